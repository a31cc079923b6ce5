// Fleet for VS Code: a thin client of `fleet-lsp serve`, split by feature like the server:
// server.ts (the connection and logging), fleet.ts (shared state), features/sessions.ts,
// features/context.ts, features/turns.ts (progress, cancel, answers), features/artifacts.ts,
// features/traces.ts (show, label), features/memory.ts, features/models.ts, features/tree.ts (the
// Fleet view). The logic that lives without `vscode` is in the sibling modules (unit-tested).
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
  context.subscriptions.push(output, server, fleet, turns, tree, status);
  context.subscriptions.push(
    fleet.onSessionSelected.event(() => status.update()),
    turns.onRunningChange.event(() => status.update()),
    fleet.onLiveChange.event(() => status.update()),
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
  return {
    serverPid: () => server?.pid,
    treeSnapshot: () => tree.snapshot(),
    revealTurn: (sessionId, turnId) => tree.revealTurn(sessionId, turnId),
    progressShown: () => turns.shown,
    currentSession: () => fleet?.sessionId,
  };
}

export async function deactivate(): Promise<void> {
  await server?.stop();
  server = undefined;
}
