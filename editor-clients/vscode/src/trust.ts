// Workspace trust, without `vscode` so the rules are unit-tested. The server reads the working
// directory's `config/fleet.toml` and `.env` (a cloned repository wrote them); in a workspace the
// user has not trusted (Restricted Mode) it starts with `FLEET_IGNORE_WORKSPACE_CONFIG=1` and
// reads neither. Workspace values of `fleet.serverCommand` and `fleet.settings` are not used in
// Restricted Mode either (package.json `capabilities.untrustedWorkspaces.restrictedConfigurations`,
// applied by VS Code itself).

/** The server's switch (docs/configuration.md, Scopes): the workspace's files are not read. */
export const IGNORE_WORKSPACE_CONFIG_ENV = 'FLEET_IGNORE_WORKSPACE_CONFIG';

/** The workspace files the server would read from its working directory. */
export const WORKSPACE_CONFIG_FILES: readonly string[] = ['config/fleet.toml', '.env'];

export type Environment = Record<string, string | undefined>;

export interface ServerLaunch {
  /** The server's environment. */
  env: Environment;
  /** Whether the server ignores the workspace's configuration files. */
  ignoresWorkspaceConfig: boolean;
  /** What to tell the user once (only when there are workspace files to ignore). */
  notice?: string;
}

/**
 * How to start the server: in a trusted workspace with `baseEnv` as is; otherwise with
 * `FLEET_IGNORE_WORKSPACE_CONFIG=1` added, and a notice naming the `present` workspace files.
 */
export function serverLaunch(baseEnv: Environment, trusted: boolean, present: readonly string[]): ServerLaunch {
  if (trusted) {
    return { env: { ...baseEnv }, ignoresWorkspaceConfig: false };
  }
  const env = { ...baseEnv, [IGNORE_WORKSPACE_CONFIG_ENV]: '1' };
  if (present.length === 0) {
    return { env, ignoresWorkspaceConfig: true };
  }
  const notice =
    `Fleet: this workspace is not trusted, so the server ignores its ${present.join(' and ')} ` +
    '(Restricted Mode); your own environment and settings still apply. Trust the workspace to use them.';
  return { env, ignoresWorkspaceConfig: true, notice };
}

/**
 * The offer to make when trust is granted: a restart only helps a server started untrusted in a
 * folder that has workspace configuration files.
 */
export function trustGrantedPrompt(startedIgnoring: boolean, present: readonly string[]): string | undefined {
  if (!startedIgnoring || present.length === 0) {
    return undefined;
  }
  return `Fleet: the workspace is trusted now. Restart the server to read its ${present.join(' and ')}?`;
}
