// Traces: show a Turn's trace as a read-only `fleet:` markdown document; label it for evaluation
// (from the palette, the tree, or a trace document's title bar).
import * as vscode from 'vscode';
import { UiCommandName } from '../commands';
import { Fleet, Handler } from '../fleet';
import { LabelPrompts, collectLabel, parseExpectations } from '../labelling';
import { truncate } from '../progress';
import { TraceLabelParams, URI_SCHEME } from '../protocol';
import { parseFleetUri } from '../uris';
import { openDocument } from './artifacts';

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
      label: truncate(t.task, 80),
      description: `${t.status}${t.route ? ' · ' + t.route : ''}`,
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
  await openDocument(trace.uri);
  return trace.uri;
}

const prompts: LabelPrompts = {
  async pick(title, items) {
    const picked = await vscode.window.showQuickPick(
      items.map((i) => ({ label: i.label, description: i.description, item: i })),
      { title, ignoreFocusOut: true },
    );
    return picked?.item.value;
  },
  input(title, options) {
    return Promise.resolve(vscode.window.showInputBox({ title, value: options.value, prompt: options.prompt, ignoreFocusOut: true }));
  },
  async expectations() {
    const NONE = 'No structured expectations';
    const choice = await vscode.window.showQuickPick([NONE, 'Choose an expectations file (JSON)…'], {
      title: 'Fleet: structured expectations (schema_version 1)',
      ignoreFocusOut: true,
    });
    if (choice === undefined) return undefined;
    if (choice === NONE) return null;
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
  if (arg?.status) {
    const { turnId: _turnId, ...rest } = arg;
    void _turnId;
    params = { ...rest, traceId } as TraceLabelParams;
  } else {
    const last = arg?.turnId ? fleet.live.get(arg.turnId)?.result : [...fleet.live.all()].reverse().find((t) => t.result?.traceId === traceId)?.result;
    params = await collectLabel(traceId, prompts, { answer: last?.answer, route: last?.route });
  }
  if (!params) {
    return undefined;
  }
  const result = await fleet.api().labelTrace(params);
  fleet.output.info(`labelled ${result.traceId}: ${JSON.stringify(result.labels)}`);
  void vscode.window.showInformationMessage(`Fleet: labelled ${result.traceId}: ${JSON.stringify(result.labels)}`);
  return result;
}
