// The extension's settings (`fleet.serverCommand`, `fleet.settings`, `fleet.turnEvents`), read
// and checked without `vscode` so the rules are unit-tested.

export const DEFAULT_SERVER_COMMAND: readonly string[] = ['fleet-lsp', 'serve'];

export interface FleetConfig {
  /** Program and arguments that start the server on stdio. */
  serverCommand: string[];
  /** Configuration overrides (`initializationOptions.fleet.settings`, keys of config/fleet.toml). */
  settings: Record<string, unknown>;
  /** Log every `fleet/turn/didEmit` event in the "Fleet Turns" output channel. */
  turnEvents: boolean;
}

export interface ConfigProblem {
  key: string;
  message: string;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Split a command line on whitespace, honouring simple single and double quotes. */
export function splitCommandLine(line: string): string[] {
  const parts: string[] = [];
  const pattern = /"([^"]*)"|'([^']*)'|(\S+)/g;
  let match: RegExpExecArray | null;
  while ((match = pattern.exec(line)) !== null) {
    parts.push(match[1] ?? match[2] ?? match[3]);
  }
  return parts;
}

/**
 * Read the settings through `get` (VS Code's `WorkspaceConfiguration.get` of the `fleet`
 * section); invalid values fall back to the defaults and are reported in `problems`.
 */
export function readConfig(get: (key: string) => unknown): { config: FleetConfig; problems: ConfigProblem[] } {
  const problems: ConfigProblem[] = [];

  let serverCommand = [...DEFAULT_SERVER_COMMAND];
  const rawCommand = get('serverCommand');
  if (typeof rawCommand === 'string' && rawCommand.trim() !== '') {
    serverCommand = splitCommandLine(rawCommand);
  } else if (
    Array.isArray(rawCommand) &&
    rawCommand.length > 0 &&
    rawCommand.every((p) => typeof p === 'string') &&
    (rawCommand[0] as string).trim() !== ''
  ) {
    serverCommand = rawCommand as string[];
  } else if (rawCommand !== undefined && rawCommand !== null && !(Array.isArray(rawCommand) && rawCommand.length === 0)) {
    problems.push({
      key: 'fleet.serverCommand',
      message: `fleet.serverCommand must be a list of strings such as ["fleet-lsp", "serve"]; using ${JSON.stringify(DEFAULT_SERVER_COMMAND)}`,
    });
  }

  let settings: Record<string, unknown> = {};
  const rawSettings = get('settings');
  if (isPlainObject(rawSettings)) {
    settings = rawSettings;
  } else if (rawSettings !== undefined && rawSettings !== null) {
    problems.push({ key: 'fleet.settings', message: 'fleet.settings must be an object; ignoring it' });
  }

  const rawEvents = get('turnEvents');
  const turnEvents = rawEvents === true;
  if (rawEvents !== undefined && rawEvents !== null && typeof rawEvents !== 'boolean') {
    problems.push({ key: 'fleet.turnEvents', message: 'fleet.turnEvents must be true or false' });
  }

  return { config: { serverCommand, settings, turnEvents }, problems };
}

/**
 * Whether going from `before` to `after` needs a server restart: only a new server command does
 * (the client always receives Turn events; `turnEvents` only decides whether they are logged).
 */
export function needsRestart(before: FleetConfig, after: FleetConfig): boolean {
  return JSON.stringify(before.serverCommand) !== JSON.stringify(after.serverCommand);
}

/** `workspace/didChangeConfiguration` params that replace the overrides at run time. */
export function didChangeConfigurationParams(config: FleetConfig): { settings: { fleet: Record<string, unknown> } } {
  return { settings: { fleet: config.settings } };
}
