// Fleet for VS Code: a thin client of `fleet-lsp serve`, split by feature like the server:
// server.ts (the connection and logging), fleet.ts (shared state), features/sessions.ts,
// features/context.ts, features/turns.ts (progress, cancel, answers), features/artifacts.ts,
// features/traces.ts (show, label), features/memory.ts, features/models.ts, features/tree.ts (the
// Fleet view). The logic that lives without `vscode` is in the sibling modules (unit-tested).
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as vscode from 'vscode';
import { UI_COMMANDS, UiCommandName } from './commands';
import { isCancellation, formatError } from './errors';
import { Fleet, Handler } from './fleet';
import { artifactCommands } from './features/artifacts';
import { contextCommands } from './features/context';
import { memoryCommands } from './features/memory';
import { modelCommands } from './features/models';
import { SessionStatus, sessionCommands } from './features/sessions';
import { traceCommands } from './features/traces';
import { FleetTree } from './features/tree';
import { ShownProgress, Turns } from './features/turns';
import { ShownPanel } from './features/panels';
import { FleetServer } from './server';

/** What `activate` returns: a small API for other extensions and the end-to-end test. */
export interface FleetExtensionApi {
  /** The server's process id while it runs. */
  serverPid(): number | undefined;
  /** The Fleet tree as indented text lines. */
  treeSnapshot(): Promise<string[]>;
  revealTurn(sessionId: string, turnId: string): Promise<void>;
  /** What the Turn progress notifications showed (newest last, bounded). */
  progressShown(): readonly ShownProgress[];
  currentSession(): string | undefined;
  /** The context keys the extension set (`fleet.hasSession`, `fleet.turnRunning`, ...). */
  contextKeys(): Readonly<Record<string, unknown>>;
  /** The Fleet view's states in order: loading, ready:<Sessions>, stopped. */
  viewStates(): readonly string[];
  /** The toasts shown, newest last. */
  messagesShown(): readonly string[];
  /** The rendered answers and traces shown (title, HTML), newest last. */
  panelsShown(): readonly ShownPanel[];
}

let server: FleetServer | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<FleetExtensionApi> {
  const output = vscode.window.createOutputChannel('Fleet', { log: true });
  let fleet: Fleet | undefined;
  server = new FleetServer(output, () => fleet?.sessionId);
  fleet = new Fleet(context, server, output);
  const turns = new Turns(fleet);
  const tree = new FleetTree(fleet);
  const status = new SessionStatus(fleet, () => turns.status());
  const keys = new ContextKeys();
  const updateKeys = () => {
    keys.set('fleet.serverRunning', Boolean(server?.running));
    keys.set('fleet.hasSession', Boolean(fleet?.sessionId));
    keys.set('fleet.turnRunning', turns.running.size > 0);
  };
  updateKeys();
  context.subscriptions.push(output, server, fleet, turns, tree, status);
  context.subscriptions.push(
    fleet.onSessionSelected.event(() => (status.update(), updateKeys(), ignoreStateDir(output))),
    turns.onRunningChange.event(() => (status.update(), updateKeys())),
    server.onRunning.event(() => updateKeys()),
    fleet.onLiveChange.event(() => status.update()),
    turns.onReveal.event((t) => void tree.revealTurn(t.sessionId, t.turnId)),
    server.onSessionChange.event((change) => {
      if (change.sessionId === fleet?.sessionId && (change.change === 'closed' || change.change === 'deleted')) {
        void fleet.useSession(undefined);
      }
    }),
  );
  const handlers: Partial<Record<UiCommandName, Handler>> = {
    ...sessionCommands(fleet),
    ...contextCommands(fleet),
    ...turns.commands(),
    ...artifactCommands(fleet),
    ...traceCommands(fleet),
    ...memoryCommands(fleet),
    ...modelCommands(fleet),
    ...tree.commands(),
    showOutput: () => output.show(),
    restartServer: () => server?.restart(),
  };
  for (const name of Object.keys(UI_COMMANDS) as UiCommandName[]) {
    const handler = handlers[name];
    if (!handler) {
      throw new Error(`no handler for ${UI_COMMANDS[name].id}`);
    }
    context.subscriptions.push(
      vscode.commands.registerCommand(UI_COMMANDS[name].id, async (...args: unknown[]) => {
        try {
          return await handler(...args);
        } catch (error) {
          if (!isCancellation(error)) {
            output.error(formatError(error, UI_COMMANDS[name].id));
            void vscode.window.showErrorMessage(formatError(error, `Fleet: ${UI_COMMANDS[name].title.replace('…', '')}`));
          }
          return undefined;
        }
      }),
    );
  }
  // Awaited so the server's commands are registered before VS Code runs the one that activated us.
  await server.start();
  updateKeys();
  if (!server.running) {
    tree.stopped();
  }
  ignoreStateDir(output);
  return {
    serverPid: () => server?.pid,
    treeSnapshot: () => tree.snapshot(),
    revealTurn: (sessionId, turnId) => tree.revealTurn(sessionId, turnId),
    progressShown: () => turns.shown,
    currentSession: () => fleet?.sessionId,
    contextKeys: () => keys.values,
    viewStates: () => tree.states,
    messagesShown: () => fleet?.shownMessages ?? [],
    panelsShown: () => fleet?.panels.shown ?? [],
  };
}

/** Context keys for `when` clauses (package.json), set only when they change. */
class ContextKeys {
  readonly values: Record<string, unknown> = {};

  set(key: string, value: unknown): void {
    if (this.values[key] === value) return;
    this.values[key] = value;
    void vscode.commands.executeCommand('setContext', key, value);
  }
}

/** The server keeps its state in `.fleet/` of the first workspace folder (unless FLEET_STATE_DIR
 * points elsewhere): a `.gitignore` of `*` inside keeps it out of the user's commits. */
function ignoreStateDir(output: vscode.LogOutputChannel): void {
  const folder = vscode.workspace.workspaceFolders?.[0]?.uri;
  if (!folder || folder.scheme !== 'file' || process.env.FLEET_STATE_DIR) return;
  const dir = join(folder.fsPath, '.fleet');
  try {
    if (existsSync(dir) && !existsSync(join(dir, '.gitignore'))) {
      writeFileSync(join(dir, '.gitignore'), '# Fleet state (sessions, traces): not for version control\n*\n');
      output.info(`wrote ${join(dir, '.gitignore')}`);
    }
  } catch (error) {
    output.warn(formatError(error, `cannot write ${join(dir, '.gitignore')}`));
  }
}

export async function deactivate(): Promise<void> {
  await server?.stop();
  server = undefined;
}
