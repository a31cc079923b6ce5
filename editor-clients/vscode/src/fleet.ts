// What every feature shares: the server connection, the output channel, the live Turn state and
// the workspace's current Session (remembered in workspaceState).
import * as vscode from 'vscode';
import { FleetApi } from './api';
import { LiveTurns } from './live';
import { SessionInfo, TurnSummary } from './protocol';
import { RenderedPanels } from './features/panels';
import { FleetServer } from './server';
import { plural } from './words';

const SESSION_KEY = 'fleet.sessionId';

export class Fleet implements vscode.Disposable {
  readonly live = new LiveTurns();
  /** Answers and traces rendered in webviews. */
  readonly panels = new RenderedPanels();
  /** Fires when the current Session changes (selected, closed, deleted). */
  readonly onSessionSelected = new vscode.EventEmitter<string | undefined>();
  /** Fires when live Turn state changed (events, progress, results): the Turn id. */
  readonly onLiveChange = new vscode.EventEmitter<string>();
  /** Fires when a trace was labelled: its Session id (the tree marks labelled traces). */
  readonly onLabelled = new vscode.EventEmitter<string>();

  /** The toasts shown (newest last, bounded; read by the end-to-end test). */
  readonly shownMessages: string[] = [];

  constructor(
    readonly context: vscode.ExtensionContext,
    readonly server: FleetServer,
    readonly output: vscode.LogOutputChannel,
  ) {}

  dispose(): void {
    this.onSessionSelected.dispose();
    this.onLiveChange.dispose();
    this.onLabelled.dispose();
    this.panels.dispose();
  }

  get sessionId(): string | undefined {
    return this.context.workspaceState.get<string>(SESSION_KEY);
  }

  /** An information toast, recorded in `shownMessages`. */
  inform(text: string, ...items: string[]): Thenable<string | undefined> {
    this.record(text);
    return vscode.window.showInformationMessage(text, ...items);
  }

  /** A warning toast, recorded in `shownMessages`. */
  warn(text: string, ...items: string[]): Thenable<string | undefined> {
    this.record(text);
    return vscode.window.showWarningMessage(text, ...items);
  }

  private record(text: string): void {
    this.shownMessages.push(text);
    if (this.shownMessages.length > 100) this.shownMessages.splice(0, this.shownMessages.length - 100);
  }

  /** The stored summary of a Turn of the current or given Session (its number, answer, outcome). */
  async turnSummary(sessionId: string, turnId: string): Promise<TurnSummary | undefined> {
    try {
      return (await this.api().history(sessionId, 200)).find((t) => t.turnId === turnId);
    } catch {
      return undefined;
    }
  }

  api(): FleetApi {
    return this.server.requireApi();
  }

  async useSession(info: SessionInfo | string | undefined): Promise<void> {
    const id = typeof info === 'string' ? info : info?.sessionId;
    await this.context.workspaceState.update(SESSION_KEY, id);
    this.onSessionSelected.fire(id);
  }

  /** The current Session, or one the user creates or picks now. */
  async ensureSession(): Promise<string | undefined> {
    if (this.sessionId) {
      return this.sessionId;
    }
    const api = this.api();
    const sessions = await api.listSessions();
    const NEW = '$(add) New Session';
    const picked = await vscode.window.showQuickPick(
      [{ label: NEW, description: '' }, ...sessions.map((s) => sessionItem(s))],
      { title: 'Fleet: choose a Session', placeHolder: 'No Session is selected in this workspace' },
    );
    if (!picked) {
      return undefined;
    }
    const info = picked.label === NEW ? await api.newSession() : await api.loadSession(picked.label);
    await this.useSession(info);
    return info.sessionId;
  }
}

export function sessionItem(s: SessionInfo): vscode.QuickPickItem {
  return {
    label: s.sessionId,
    description: `${s.mode} · ${plural(s.turnCount, 'completed Turn')}${s.dataset ? ' · ' + s.dataset.path : ''}`,
    detail: `updated ${s.updatedAt}`,
  };
}

export function formatBytes(n: number): string {
  if (n < 1024) {
    return `${n} B`;
  }
  if (n < 1024 * 1024) {
    return `${(n / 1024).toFixed(1)} KB`;
  }
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

/** A command handler: its arguments come from the palette (none), other code, or a tree item. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Handler = (...args: any[]) => unknown;
