// Traces: show a Turn's trace as a read-only `fleet:` markdown document; label it for evaluation
// (from the palette, the tree, or a trace document's title bar).
import * as vscode from 'vscode';
import { UiCommandName } from '../commands';
import { Fleet, Handler } from '../fleet';
import { BACK, Back, LabelPrompts, PickItem, Step, collectLabel, parseExpectations } from '../labelling';
import { shownStatus, truncate } from '../progress';
import { TraceLabelParams, TraceLabelResult, TurnSummary, URI_SCHEME } from '../protocol';
import { labelSummary, turnName } from '../words';
import { commandLink } from '../rendered';
import { parseFleetUri } from '../uris';

type TraceArg = { traceId?: string | null; turnId?: string };

export function traceCommands(fleet: Fleet): Partial<Record<UiCommandName, Handler>> {
  return {
    showTrace: (arg?: TraceArg) => showTrace(fleet, arg),
    labelTrace: (arg?: TraceArg & Partial<TraceLabelParams>) => labelTrace(fleet, arg),
  };
}

/** A trace reference: the argument, else a Turn of the current Session picked from its history. */
async function pickTrace(fleet: Fleet, arg: TraceArg | undefined, title: string): Promise<{ traceId: string } | { turnId: string } | undefined> {
  if (arg?.traceId) {
    return { traceId: arg.traceId };
  }
  if (arg?.turnId) {
    return { turnId: arg.turnId };
  }
  const sessionId = await fleet.ensureSession();
  if (!sessionId) {
    return undefined;
  }
  const turns = await fleet.api().history(sessionId, 50);
  if (turns.length === 0) {
    void vscode.window.showInformationMessage(`Fleet: ${sessionId} has no Turns yet`);
    return undefined;
  }
  const picked = await vscode.window.showQuickPick(
    [...turns].reverse().map((t) => ({
      label: `#${t.seq} ${truncate(t.task, 80)}`,
      description: `${shownStatus(t.status, fleet.live.get(t.turnId)?.result?.outcome ?? t.outcome).text}${t.route ? ' · ' + t.route : ''}`,
      detail: t.answer ? truncate(t.answer, 120) : t.turnId,
      turn: t,
    })),
    { title, matchOnDescription: true, matchOnDetail: true },
  );
  if (!picked) {
    return undefined;
  }
  return picked.turn.traceId ? { traceId: picked.turn.traceId } : { turnId: picked.turn.turnId };
}

async function showTrace(fleet: Fleet, arg?: TraceArg): Promise<string | undefined> {
  const ref = await pickTrace(fleet, arg, 'Fleet: show the trace of which Turn?');
  if (!ref) {
    return undefined;
  }
  const trace = await fleet.api().trace(ref);
  const turn = await fleet.turnSummary(trace.sessionId, trace.turnId);
  const label = `\n\n---\n\n[Label this trace](${commandLink('fleet.ui.labelTrace', { traceId: trace.traceId, turnId: trace.turnId })})\n`;
  await fleet.panels.show(`trace:${trace.traceId}`, `${turnName(turn?.seq, trace.turnId)} — trace`, trace.markdown + label, commandLink('fleet.ui.openArtifact', { uri: trace.uri }));
  return trace.uri;
}

/** A quick pick or input box of a multi-step flow: "title (step/totalSteps)", Back after step 1. */
function quickInput<I extends vscode.QuickPick<vscode.QuickPickItem> | vscode.InputBox>(input: I, title: string, step: Step): I {
  input.title = title;
  input.step = step.step;
  input.totalSteps = step.totalSteps;
  input.ignoreFocusOut = true;
  input.buttons = step.step > 1 ? [vscode.QuickInputButtons.Back] : [];
  return input;
}

function settle<T>(input: vscode.QuickPick<vscode.QuickPickItem> | vscode.InputBox, accept: (resolve: (v: T | Back | undefined) => void) => vscode.Disposable): Promise<T | Back | undefined> {
  return new Promise((resolve) => {
    let done = false;
    const finish = (v: T | Back | undefined) => {
      if (done) return;
      done = true;
      subs.forEach((d) => d.dispose());
      input.dispose();
      resolve(v);
    };
    const subs = [
      accept(finish),
      input.onDidTriggerButton((b: vscode.QuickInputButton) => b === vscode.QuickInputButtons.Back && finish(BACK)),
      input.onDidHide(() => finish(undefined)),
    ];
    input.show();
  });
}

const prompts: LabelPrompts = {
  pick<T>(title: string, items: PickItem<T>[], step: Step, active?: T) {
    const pick = quickInput(vscode.window.createQuickPick<vscode.QuickPickItem & { item: PickItem<T> }>(), title, step);
    pick.items = items.map((i) => ({ label: i.label, description: i.description, item: i }));
    const current = pick.items.find((i) => active !== undefined && i.item.value === active);
    if (current) pick.activeItems = [current];
    return settle<T>(pick, (finish) => pick.onDidAccept(() => finish(pick.selectedItems[0]?.item.value)));
  },
  input(title, options, step) {
    const box = quickInput(vscode.window.createInputBox(), title, step);
    box.value = options.value ?? '';
    box.prompt = options.prompt;
    return settle<string>(box, (finish) => box.onDidAccept(() => finish(box.value)));
  },
  async expectations(title, step) {
    const NONE = 'No structured expectations';
    const choice = await prompts.pick(
      title,
      [
        { label: NONE, value: 'none' },
        { label: 'Choose an expectations file (JSON)…', value: 'file' },
      ],
      step,
    );
    if (choice === undefined || choice === BACK) return choice;
    if (choice === 'none') return null;
    const files = await vscode.window.showOpenDialog({
      title: 'Fleet: expectations file',
      canSelectMany: false,
      filters: { JSON: ['json'] },
      defaultUri: vscode.workspace.workspaceFolders?.[0]?.uri,
    });
    if (!files || files.length === 0) return undefined;
    const bytes = await vscode.workspace.fs.readFile(files[0]);
    if (bytes.byteLength > 1024 * 1024) {
      throw new Error(`${files[0].fsPath} is over 1 MB; expectations files are small JSON objects`);
    }
    return parseExpectations(files[0].fsPath, new TextDecoder().decode(bytes));
  },
};

/**
 * Label a trace. With `status` in the argument (a script, a test) the label is sent as given;
 * otherwise the user is asked (quick picks for status, route and critical; input boxes for the
 * answer and values; an expectations file picker).
 */
async function labelTrace(fleet: Fleet, arg?: TraceArg & Partial<TraceLabelParams>): Promise<unknown> {
  let traceId = arg?.traceId ?? undefined;
  if (!traceId) {
    const active = vscode.window.activeTextEditor?.document.uri;
    const parsed = active?.scheme === URI_SCHEME ? parseFleetUri(active.toString()) : undefined;
    if (parsed?.kind === 'trace') {
      traceId = parsed.traceId;
    } else {
      const ref = await pickTrace(fleet, arg, 'Fleet: label the trace of which Turn?');
      traceId = ref && ('traceId' in ref ? ref.traceId : (await fleet.api().trace(ref)).traceId);
    }
  }
  if (!traceId) {
    return undefined;
  }
  let params: TraceLabelParams | undefined;
  const named = await turnOfTrace(fleet, traceId, arg?.turnId);
  if (arg?.status) {
    const { turnId: _turnId, ...rest } = arg;
    void _turnId;
    params = { ...rest, traceId } as TraceLabelParams;
  } else {
    const last = arg?.turnId ? fleet.live.get(arg.turnId)?.result : [...fleet.live.all()].reverse().find((t) => t.result?.traceId === traceId)?.result;
    const answer = last?.answer ?? named?.answer;
    params = await collectLabel(traceId, prompts, { answer, route: last?.route ?? named?.route, name: turnName(named?.seq, named?.turnId) });
  }
  if (!params) {
    return undefined;
  }
  const result = await labelWhenExported(fleet, params);
  if (result.sessionId) {
    fleet.onLabelled.fire(result.sessionId);
  }
  fleet.output.info(`labelled ${result.traceId}: ${JSON.stringify(result.labels)}`);
  fleet.inform(labelSummary(named ? turnName(named.seq, named.turnId) : `trace ${result.traceId}`, params, result));
  return result;
}

/** Label the trace; a trace still queued for export right after its Turn (the server answers
 * TracingUnavailable "queued for export") is retried for up to 60 s behind a progress message. */
async function labelWhenExported(fleet: Fleet, params: TraceLabelParams): Promise<TraceLabelResult> {
  const queued = (error: unknown) => (error as { data?: { kind?: string } })?.data?.kind === 'TracingUnavailable' && /queued for export/.test(String((error as Error)?.message));
  try {
    return await fleet.api().labelTrace(params);
  } catch (error) {
    if (!queued(error)) throw error;
  }
  return vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title: 'Fleet: waiting for the trace to be exported before labelling it' }, async () => {
    const end = Date.now() + 60000;
    for (;;) {
      await new Promise((r) => setTimeout(r, 1000));
      try {
        return await fleet.api().labelTrace(params);
      } catch (error) {
        if (!queued(error) || Date.now() > end) throw error;
      }
    }
  });
}

/** The stored Turn a trace belongs to (for its "Turn #n" name and the model's answer). */
async function turnOfTrace(fleet: Fleet, traceId: string, turnId: string | undefined): Promise<TurnSummary | undefined> {
  const sessionId = fleet.sessionId;
  if (!sessionId) return undefined;
  try {
    const turns = await fleet.api().history(sessionId, 200);
    return turns.find((t) => (turnId ? t.turnId === turnId : t.traceId === traceId));
  } catch {
    return undefined;
  }
}
