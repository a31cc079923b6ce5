// Turns: run one in a cancellable progress notification that shows the root's step, model calls
// against the limit and each child agent's subtask and state; cancel; the answer as a read-only
// markdown document (`fleet-answer:`) with links to the artifacts and the trace; Turn events in
// the "Fleet Turns" output channel when `fleet.turnEvents` is on.
import { randomUUID } from 'crypto';
import * as vscode from 'vscode';
import { UI_COMMANDS, UiCommandName } from '../commands';
import { Fleet, Handler } from '../fleet';
import { ANSWER_SCHEME, answerMarkdown, answerUri, artifactsOfTurn, parseAnswerUri } from '../answer';
import { errorDocument, isCancellation } from '../errors';
import { notificationMessage } from '../live';
import { formatTurnEvent, formatTurnResult, formatUsage, newWorkDoneToken, shownStatus, truncate, turnTitle } from '../progress';
import { Mode, TurnEvent, TurnResult } from '../protocol';
import { commandLink } from '../rendered';
import { answerTitle, turnName } from '../words';
import { openDocument, pickArtifact } from './artifacts';

interface RunningTurn {
  token: string;
  sessionId: string;
  task: string;
  turnId?: string;
  cancel: vscode.CancellationTokenSource;
  report?: (message: string) => void;
}

/** What the progress notifications showed, newest last (bounded; read by the end-to-end test). */
export interface ShownProgress {
  turnId?: string;
  message: string;
}

export class Turns implements vscode.Disposable {
  readonly running = new Map<string, RunningTurn>();
  readonly shown: ShownProgress[] = [];
  private turnsOutput: vscode.OutputChannel | undefined;
  private readonly disposables: vscode.Disposable[] = [];
  readonly onRunningChange = new vscode.EventEmitter<void>();
  /** Asks the tree to reveal a Turn. */
  readonly onReveal = new vscode.EventEmitter<{ sessionId: string; turnId: string }>();

  constructor(private readonly fleet: Fleet) {
    this.disposables.push(
      this.onRunningChange,
      this.onReveal,
      fleet.server.onTurnEvent.event((event) => this.turnEvent(event)),
      vscode.workspace.registerTextDocumentContentProvider(ANSWER_SCHEME, {
        provideTextDocumentContent: (uri) => this.answerDocument(uri),
      }),
    );
  }

  dispose(): void {
    for (const turn of this.running.values()) {
      turn.cancel.dispose();
    }
    this.turnsOutput?.dispose();
    vscode.Disposable.from(...this.disposables).dispose();
  }

  commands(): Partial<Record<UiCommandName, Handler>> {
    return {
      runTurn: (arg?: { task?: string; sessionId?: string; mode?: Mode }) => this.runTurn(arg),
      cancelTurn: (arg?: { turnId?: string }) => this.cancelTurn(arg),
      runningTurn: () => this.runningTurn(),
      showAnswer: (arg?: { sessionId?: string; turnId?: string; source?: boolean }) => this.showAnswer(arg),
    };
  }

  /** The running Turns' progress in one line, or undefined when none runs. */
  status(): string | undefined {
    if (this.running.size === 0) {
      return undefined;
    }
    return [...this.running.values()]
      .map((t) => {
        // the notification's first line (the same model calls as the tree), else the task
        const live = t.turnId ? this.fleet.live.get(t.turnId) : undefined;
        const head = live ? notificationMessage(live).split(' — ')[0] : undefined;
        return head && head !== 'starting' ? head : truncate(t.task, 30);
      })
      .join(' | ');
  }

  private turnEvent(event: TurnEvent): void {
    this.fleet.live.applyEvent(event);
    this.fleet.onLiveChange.fire(event.turnId);
    for (const turn of this.running.values()) {
      if (turn.turnId === event.turnId) {
        this.refreshNotification(turn);
      }
    }
    if (this.fleet.server.config.turnEvents) {
      this.turnsOutput ??= vscode.window.createOutputChannel('Fleet Turns');
      this.turnsOutput.appendLine(formatTurnEvent(event));
    }
  }

  private refreshNotification(turn: RunningTurn): void {
    const live = turn.turnId ? this.fleet.live.get(turn.turnId) : undefined;
    if (!live || !turn.report) {
      return;
    }
    const message = notificationMessage(live);
    turn.report(message);
    this.shown.push({ turnId: turn.turnId, message });
    if (this.shown.length > 200) {
      this.shown.splice(0, this.shown.length - 200);
    }
  }

  /** Run a Turn in a cancellable notification; its Cancel button sends `$/cancelRequest`. */
  private async runTurn(arg?: { task?: string; sessionId?: string; mode?: Mode }): Promise<TurnResult | undefined> {
    const fleet = this.fleet;
    const sessionId = arg?.sessionId ?? (await fleet.ensureSession());
    if (!sessionId) {
      return undefined;
    }
    const task =
      arg?.task ??
      (await vscode.window.showInputBox({
        title: `Fleet: run a Turn in ${sessionId}`,
        prompt: 'What should the agents do?',
        placeHolder: 'Calculate revenue by region and save artifacts/revenue_by_region.csv.',
        ignoreFocusOut: true,
      }));
    if (!task || !task.trim()) {
      return undefined;
    }
    const api = fleet.api();
    const token = newWorkDoneToken(randomUUID);
    const turn: RunningTurn = { token, sessionId, task, cancel: new vscode.CancellationTokenSource() };
    this.running.set(token, turn);
    fleet.output.info(`Turn in ${sessionId}: ${task}`);
    this.onRunningChange.fire();
    let result: TurnResult | undefined;
    let failure: unknown;
    await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: turnTitle(task), cancellable: true },
      async (progress, cancelButton) => {
        turn.report = (message) => progress.report({ message });
        const sub = cancelButton.onCancellationRequested(() => turn.cancel.cancel());
        try {
          result = await api.runTurn(
            { sessionId, task, ...(arg?.mode ? { mode: arg.mode } : {}) },
            {
              workDoneToken: token,
              token: turn.cancel.token,
              onProgress: (value) => {
                const known = turn.turnId;
                turn.turnId = value.turnId ?? turn.turnId;
                if (turn.turnId && value.kind !== 'end') {
                  fleet.live.applyProgress(turn.turnId, sessionId, value);
                  this.refreshNotification(turn);
                  fleet.onLiveChange.fire(turn.turnId);
                }
                if (!known && turn.turnId) {
                  this.onRunningChange.fire();
                }
              },
            },
          );
        } catch (error) {
          failure = error;
        } finally {
          turn.report = undefined;
          sub.dispose();
          turn.cancel.dispose();
          this.running.delete(token);
          this.onRunningChange.fire();
        }
      },
    );
    if (failure !== undefined) {
      if (isCancellation(failure)) {
        const seq = turn.turnId ? (await fleet.turnSummary(sessionId, turn.turnId))?.seq : undefined;
        fleet.output.info(`${turnName(seq, turn.turnId)} cancelled`);
        void fleet.inform(`Fleet: ${turnName(seq, turn.turnId)} cancelled`);
        return undefined;
      }
      throw failure;
    }
    if (result) {
      fleet.live.applyResult(result);
      fleet.onLiveChange.fire(result.turnId);
      this.turnFinished(result, (await fleet.turnSummary(result.sessionId, result.turnId))?.seq);
    }
    return result;
  }

  private turnFinished(result: TurnResult, seq: number | undefined): void {
    const summary = formatTurnResult(result, seq);
    this.fleet.output.info(`${summary} (${formatUsage(result)})`);
    if (result.learnedNote) {
      this.fleet.output.info(`learned: ${result.learnedNote}`);
    }
    const actions: string[] = ['Show Answer', 'Show Trace'];
    if (result.artifacts.length > 0) {
      actions.push(result.artifacts.length === 1 ? 'Open Artifact' : 'Open Artifacts…');
    }
    // "completed with errors" (an outcome other than submitted) is a warning, like a failure
    const clean = result.status === 'completed' && !shownStatus(result.status, result.outcome).withErrors;
    const show = clean ? this.fleet.inform.bind(this.fleet) : this.fleet.warn.bind(this.fleet);
    void show(`Fleet: ${summary}`, ...actions).then((choice) => {
      if (choice === 'Show Answer') {
        void this.showAnswer({ sessionId: result.sessionId, turnId: result.turnId });
      } else if (choice === 'Show Trace') {
        void vscode.commands.executeCommand(UI_COMMANDS.showTrace.id, result.traceId ? { traceId: result.traceId } : { turnId: result.turnId });
      } else if (choice === 'Open Artifact') {
        void openDocument(result.artifacts[0].uri);
      } else if (choice === 'Open Artifacts…') {
        void pickArtifact(result.artifacts).then((a) => a && openDocument(a.uri));
      }
    });
  }

  private async cancelTurn(arg?: { turnId?: string }): Promise<void> {
    const turns = [...this.running.values()];
    const mine = arg?.turnId ? turns.find((t) => t.turnId === arg.turnId) : turns.length === 1 ? turns[0] : undefined;
    if (mine) {
      mine.cancel.cancel();
      return;
    }
    if (!arg?.turnId && turns.length > 1) {
      const picked = await vscode.window.showQuickPick(
        turns.map((t) => ({ label: truncate(t.task, 60), description: `${t.sessionId} ${t.turnId ?? ''}`, turn: t })),
        { title: 'Fleet: cancel which Turn?' },
      );
      picked?.turn.cancel.cancel();
      return;
    }
    // A Turn this window did not start (a script, another window): the argument's, else the
    // current Session's running one; never a raw id typed by hand.
    let turnId = arg?.turnId;
    if (!turnId) {
      const sessionId = this.fleet.sessionId;
      const history = sessionId ? await this.fleet.api().history(sessionId, 20) : [];
      const running = history.find((t) => t.status === 'running');
      if (!running) {
        void this.fleet.inform('Fleet: no Turn is running');
        return;
      }
      turnId = running.turnId;
    }
    await this.fleet.api().cancelTurn(turnId);
    const seq = this.fleet.sessionId ? (await this.fleet.turnSummary(this.fleet.sessionId, turnId))?.seq : undefined;
    void this.fleet.inform(`Fleet: cancelled ${turnName(seq, turnId)}`);
  }

  /** The status bar's running item: show the running Turn in the Fleet view, the output, or
   * cancel it (after this pick, never on the click alone). */
  private async runningTurn(): Promise<void> {
    const turns = [...this.running.values()];
    if (turns.length === 0) {
      void this.fleet.inform('Fleet: no Turn is running');
      return;
    }
    type Item = vscode.QuickPickItem & { act: () => unknown };
    const items: Item[] = [];
    for (const t of turns) {
      const name = truncate(t.task, 50);
      items.push({
        label: `$(eye) Show "${name}" in the Fleet view`,
        act: () => t.turnId && vscode.commands.executeCommand('fleet.sessions.focus').then(() => this.onReveal.fire({ sessionId: t.sessionId, turnId: t.turnId! })),
      });
      items.push({ label: `$(debug-stop) Cancel "${name}"`, act: () => t.cancel.cancel() });
    }
    items.push({ label: '$(output) Show Output', act: () => this.fleet.output.show() });
    const picked = await vscode.window.showQuickPick(items, { title: 'Fleet: a Turn is running' });
    await picked?.act();
  }

  /** Open a Turn's answer rendered, titled "Turn #n — answer" (the argument's Turn, else one picked
   * from the current Session's history); `source: true` opens its markdown text instead. */
  private async showAnswer(arg?: { sessionId?: string; turnId?: string; source?: boolean }): Promise<string | undefined> {
    let sessionId = arg?.sessionId;
    let turnId = arg?.turnId;
    if (!sessionId || !turnId) {
      sessionId = sessionId ?? (await this.fleet.ensureSession());
      if (!sessionId) {
        return undefined;
      }
      const turns = await this.fleet.api().history(sessionId, 50);
      const picked = await vscode.window.showQuickPick(
        [...turns].reverse().map((t) => ({
          label: `#${t.seq} ${truncate(t.task, 80)}`,
          description: shownStatus(t.status, this.fleet.live.get(t.turnId)?.result?.outcome ?? t.outcome).text,
          turn: t,
        })),
        { title: 'Fleet: show the answer of which Turn?' },
      );
      turnId = picked?.turn.turnId;
    }
    if (!turnId) {
      return undefined;
    }
    const uri = answerUri(sessionId, turnId);
    if (arg?.source) {
      await openDocument(uri, 'markdown');
      return uri;
    }
    const { markdown, seq } = await this.answerText(sessionId, turnId, uri);
    await this.fleet.panels.show(`answer:${turnId}`, answerTitle(seq, turnId), markdown, commandLink('fleet.ui.showAnswer', { sessionId, turnId, source: true }));
    return uri;
  }

  private async answerDocument(uri: vscode.Uri): Promise<string> {
    const ref = parseAnswerUri(uri.toString());
    if (!ref) {
      return `# Not a Fleet answer: ${uri.toString()}\n`;
    }
    return (await this.answerText(ref.sessionId, ref.turnId, uri.toString())).markdown;
  }

  /** The answer document's markdown and the Turn's number. */
  private async answerText(sessionId: string, turnId: string, uri: string): Promise<{ markdown: string; seq?: number }> {
    try {
      const api = this.fleet.api();
      const [turns, artifacts] = await Promise.all([api.history(sessionId, 1000), api.listArtifacts(sessionId)]);
      const turn = turns.find((t) => t.turnId === turnId);
      if (!turn) {
        return { markdown: `# Turn ${turnId} is not in Session ${sessionId}\n` };
      }
      const live = this.fleet.live.get(turnId);
      const markdown = answerMarkdown({
        sessionId,
        turn,
        artifacts: artifactsOfTurn(artifacts, turnId, live?.result?.artifacts, turn.artifactPaths),
        durationSeconds: live?.durationSeconds ?? turn.durationSeconds,
        outcome: live?.result?.outcome ?? turn.outcome,
      });
      return { markdown, seq: turn.seq };
    } catch (error) {
      return { markdown: errorDocument(uri, error) };
    }
  }
}
