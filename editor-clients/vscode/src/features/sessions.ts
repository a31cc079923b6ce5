// Sessions: new, load, close, delete, mode; the status bar item.
import * as vscode from 'vscode';
import { UI_COMMANDS, UiCommandName } from '../commands';
import { Fleet, Handler, sessionItem } from '../fleet';
import { truncate } from '../progress';
import { modeItems, plural } from '../words';
import { MODES, Mode, SessionInfo } from '../protocol';

export function sessionCommands(fleet: Fleet): Partial<Record<UiCommandName, Handler>> {
  return {
    newSession: (arg?: { sessionId?: string; mode?: Mode }) => newSession(fleet, arg),
    loadSession: (arg?: { sessionId?: string }) => loadSession(fleet, arg),
    closeSession: (arg?: { sessionId?: string }) => closeSession(fleet, arg),
    deleteSession: (arg?: { sessionId?: string; confirmed?: boolean }) => deleteSession(fleet, arg),
    setMode: (arg?: { mode?: Mode }) => setMode(fleet, arg),
  };
}

async function newSession(fleet: Fleet, arg?: { sessionId?: string; mode?: Mode }): Promise<SessionInfo | undefined> {
  let params = arg && (arg.sessionId !== undefined || arg.mode !== undefined) ? { sessionId: arg.sessionId, mode: arg.mode } : undefined;
  if (!params) {
    const sessionId = await vscode.window.showInputBox({
      title: 'Fleet: New Session',
      prompt: 'Session id (leave empty for a generated one)',
      validateInput: (v) => (v && !/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/.test(v) ? 'letters, digits, _ . - (up to 64)' : undefined),
    });
    if (sessionId === undefined) {
      return undefined;
    }
    const mode = await pickMode('Fleet: mode of the new Session');
    if (mode === undefined) {
      return undefined;
    }
    params = { sessionId: sessionId || undefined, mode };
  }
  const info = await fleet.api().newSession({
    ...(params.sessionId ? { sessionId: params.sessionId } : {}),
    ...(params.mode ? { mode: params.mode } : {}),
  });
  await fleet.useSession(info);
  void vscode.window.showInformationMessage(`Fleet: session ${info.sessionId} (${info.mode})`);
  return info;
}

async function loadSession(fleet: Fleet, arg?: { sessionId?: string }): Promise<SessionInfo | undefined> {
  const api = fleet.api();
  let sessionId = arg?.sessionId;
  if (!sessionId) {
    const sessions = await api.listSessions();
    if (sessions.length === 0) {
      void vscode.window.showInformationMessage("Fleet: no stored Sessions; 'Fleet: New Session…' makes one.");
      return undefined;
    }
    const picked = await vscode.window.showQuickPick(sessions.map(sessionItem), { title: 'Fleet: load a Session' });
    sessionId = picked?.label;
  }
  if (!sessionId) {
    return undefined;
  }
  const info = await api.loadSession(sessionId);
  await fleet.useSession(info);
  void vscode.window.showInformationMessage(`Fleet: session ${info.sessionId} (${info.mode}, ${plural(info.turnCount, 'completed Turn')})`);
  return info;
}

async function closeSession(fleet: Fleet, arg?: { sessionId?: string }): Promise<void> {
  const sessionId = arg?.sessionId ?? fleet.sessionId;
  if (!sessionId) {
    return;
  }
  await fleet.api().closeSession(sessionId);
  if (sessionId === fleet.sessionId) {
    await fleet.useSession(undefined);
  }
}

async function deleteSession(fleet: Fleet, arg?: { sessionId?: string; confirmed?: boolean }): Promise<boolean> {
  let sessionId = arg?.sessionId;
  if (!sessionId) {
    const sessions = await fleet.api().listSessions();
    sessionId = (await vscode.window.showQuickPick(sessions.map(sessionItem), { title: 'Fleet: delete which Session?' }))?.label;
  }
  if (!sessionId) {
    return false;
  }
  if (!arg?.confirmed) {
    const choice = await vscode.window.showWarningMessage(
      `Fleet: delete Session ${sessionId}? Its history, files and artifacts are removed.`,
      { modal: true },
      'Delete',
    );
    if (choice !== 'Delete') {
      return false;
    }
  }
  await fleet.api().deleteSession(sessionId);
  if (sessionId === fleet.sessionId) {
    await fleet.useSession(undefined);
  }
  void vscode.window.showInformationMessage(`Fleet: deleted Session ${sessionId}`);
  return true;
}

async function setMode(fleet: Fleet, arg?: { mode?: Mode }): Promise<SessionInfo | undefined> {
  const sessionId = await fleet.ensureSession();
  if (!sessionId) {
    return undefined;
  }
  let current: Mode | undefined;
  if (!arg?.mode) {
    const info = (await fleet.api().listSessions()).find((s) => s.sessionId === sessionId);
    current = MODES.find((m) => m === info?.mode);
  }
  const mode = arg?.mode ?? (await pickMode(`Fleet: mode of ${sessionId}`, current));
  if (!mode) {
    return undefined;
  }
  const info = await fleet.api().setMode(sessionId, mode);
  void vscode.window.showInformationMessage(`Fleet: session ${info.sessionId} runs in ${info.mode} mode`);
  return info;
}

/** The mode pick: each mode described, the default and the current one marked. */
async function pickMode(title: string, current?: Mode): Promise<Mode | undefined> {
  const picked = await vscode.window.showQuickPick(modeItems(MODES, current), { title, matchOnDetail: true });
  return picked?.label;
}

/** The status bar item: the current Session, or the running Turns' progress (click cancels). */
export class SessionStatus implements vscode.Disposable {
  private readonly item = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Left, 50);

  constructor(
    private readonly fleet: Fleet,
    private readonly runningStatus: () => string | undefined,
  ) {
    this.update();
  }

  dispose(): void {
    this.item.dispose();
  }

  update(): void {
    const session = this.fleet.sessionId;
    const running = this.runningStatus();
    if (running !== undefined) {
      this.item.text = `$(sync~spin) Fleet: ${truncate(running || 'running', 60)}`;
      this.item.command = UI_COMMANDS.runningTurn.id;
      this.item.tooltip = 'Fleet: a Turn is running. Click to show it or cancel it.';
    } else {
      this.item.text = session ? `$(hubot) Fleet: ${session}` : '$(hubot) Fleet';
      this.item.command = session ? UI_COMMANDS.runTurn.id : UI_COMMANDS.newSession.id;
      this.item.tooltip = session ? `Fleet session ${session}. Click to run a Turn.` : 'Fleet: click to start a Session.';
    }
    this.item.show();
  }
}
