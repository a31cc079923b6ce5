// The extension's command table. Two kinds of IDs:
// - server commands (`fleet.newSession`, ...): vscode-languageclient registers every ID the server
//   lists in `executeCommandProvider.commands` as a VS Code command that forwards to
//   `workspace/executeCommand`; package.json only gives them titles. The extension must not
//   register them itself (VS Code refuses duplicate registrations).
// - client commands (`fleet.ui.*`): the palette's "Fleet: Run Turn…" and friends, which ask for
//   input, show progress and open documents.
// No `vscode` import: package.json is checked against this table in the unit tests.
import { SERVER_COMMANDS, ServerCommand } from './protocol';

export const UI_COMMANDS = {
  newSession: { id: 'fleet.ui.newSession', title: 'New Session…' },
  loadSession: { id: 'fleet.ui.loadSession', title: 'Load Session…' },
  closeSession: { id: 'fleet.ui.closeSession', title: 'Close Session' },
  deleteSession: { id: 'fleet.ui.deleteSession', title: 'Delete Session…' },
  setMode: { id: 'fleet.ui.setMode', title: 'Set Mode…' },
  attachFile: { id: 'fleet.ui.attachFile', title: 'Attach to Fleet Session' },
  attachSelection: { id: 'fleet.ui.attachSelection', title: 'Attach Selection…' },
  setDataset: { id: 'fleet.ui.setDataset', title: 'Set Dataset…' },
  clearDataset: { id: 'fleet.ui.clearDataset', title: 'Clear Dataset' },
  runTurn: { id: 'fleet.ui.runTurn', title: 'Run Turn…' },
  cancelTurn: { id: 'fleet.ui.cancelTurn', title: 'Cancel Turn' },
  runningTurn: { id: 'fleet.ui.runningTurn', title: 'Running Turn…' },
  showAnswer: { id: 'fleet.ui.showAnswer', title: 'Show Answer' },
  openArtifact: { id: 'fleet.ui.openArtifact', title: 'Open Artifact' },
  saveArtifact: { id: 'fleet.ui.saveArtifact', title: 'Save Artifact As…' },
  showTrace: { id: 'fleet.ui.showTrace', title: 'Show Trace' },
  labelTrace: { id: 'fleet.ui.labelTrace', title: 'Label Trace…' },
  memory: { id: 'fleet.ui.memory', title: 'Memory…' },
  addMemory: { id: 'fleet.ui.addMemory', title: 'Add Memory…' },
  pickModels: { id: 'fleet.ui.pickModels', title: 'Pick Models…' },
  refreshView: { id: 'fleet.ui.refreshView', title: 'Refresh' },
  filterSessions: { id: 'fleet.ui.filterSessions', title: 'Filter Sessions…' },
  showOutput: { id: 'fleet.ui.showOutput', title: 'Show Output' },
  restartServer: { id: 'fleet.ui.restartServer', title: 'Restart Server' },
} as const;
export type UiCommandName = keyof typeof UI_COMMANDS;

/** Palette titles of the server commands (category "Fleet"). */
export const SERVER_COMMAND_TITLES: Readonly<Record<ServerCommand, string>> = {
  'fleet.newSession': 'New Session (server command)',
  'fleet.loadSession': 'Load Session (server command)',
  'fleet.listSessions': 'List Sessions (server command)',
  'fleet.closeSession': 'Close Session (server command)',
  'fleet.attachFile': 'Attach File (server command)',
  'fleet.setDataset': 'Set Dataset (server command)',
  'fleet.clearDataset': 'Clear Dataset (server command)',
  'fleet.runTurn': 'Run Turn (server command)',
  'fleet.cancelTurn': 'Cancel Turn (server command)',
  'fleet.setMode': 'Set Mode (server command)',
  'fleet.openArtifact': 'Open Artifact (server command)',
  'fleet.saveArtifact': 'Save Artifact (server command)',
  'fleet.showTrace': 'Show Trace (server command)',
  'fleet.labelTrace': 'Label Trace (server command)',
  'fleet.printDebugInformation': 'Print Debug Information',
};

/** Server commands shown in the Command Palette (the others have a `fleet.ui.*` twin there). */
export const PALETTE_SERVER_COMMANDS: readonly ServerCommand[] = ['fleet.printDebugInformation'];

/**
 * A server command invoked without an argument (a keybinding, or the palette) runs its client
 * twin, which asks for what the request needs.
 */
export const SERVER_COMMAND_UI_TWIN: Readonly<Partial<Record<ServerCommand, UiCommandName>>> = {
  'fleet.newSession': 'newSession',
  'fleet.loadSession': 'loadSession',
  'fleet.closeSession': 'closeSession',
  'fleet.attachFile': 'attachFile',
  'fleet.setDataset': 'setDataset',
  'fleet.clearDataset': 'clearDataset',
  'fleet.runTurn': 'runTurn',
  'fleet.cancelTurn': 'cancelTurn',
  'fleet.setMode': 'setMode',
  'fleet.openArtifact': 'openArtifact',
  'fleet.saveArtifact': 'saveArtifact',
  'fleet.showTrace': 'showTrace',
  'fleet.labelTrace': 'labelTrace',
};

export type CommandRoute =
  | { kind: 'ui'; command: string }
  | { kind: 'server'; arguments: unknown[] };

/**
 * Where an invocation of server command `command` with `args` goes: its client twin when it came
 * without an argument, else `workspace/executeCommand` with the arguments as they are (the server
 * takes one object argument and names the problem otherwise). Argument-less commands without a
 * twin get `{}`, plus the current Session for `fleet.printDebugInformation`.
 */
export function routeServerCommand(
  command: ServerCommand,
  args: readonly unknown[],
  currentSessionId: string | undefined,
): CommandRoute {
  if (args.length === 0 || (args.length === 1 && (args[0] === undefined || args[0] === null))) {
    const twin = SERVER_COMMAND_UI_TWIN[command];
    if (twin) {
      return { kind: 'ui', command: UI_COMMANDS[twin].id };
    }
    const argument: Record<string, unknown> = {};
    if (command === 'fleet.printDebugInformation' && currentSessionId) {
      argument.sessionId = currentSessionId;
    }
    return { kind: 'server', arguments: [argument] };
  }
  return { kind: 'server', arguments: [...args] };
}

export function allServerCommands(): ServerCommand[] {
  return Object.keys(SERVER_COMMANDS) as ServerCommand[];
}
