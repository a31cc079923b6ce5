// Formatting of Turn progress, Turn results and Turn events for VS Code's notification, status bar
// and output channel. Pure: no `vscode` import.
import type { AnswerOutcomeLike, TurnEvent, TurnProgressValue, TurnResult, TurnStatus } from './protocol';

// C0/C1 controls (newlines and tabs aside), DEL and the bidi overrides/isolates: shown, never acted on.
// eslint-disable-next-line no-control-regex
const UNSAFE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

/** Outside text (a file name, a task, an answer line) with every control and bidi override as a
 * visible escape: `\x1b`, `\x9b`, `<U+202E>`; a name that reads "invoice<U+202E>txt.exe" cannot
 * pass for "invoiceexe.txt" in a tree or picker. */
export function visible(text: string): string {
  return text.replace(UNSAFE, (c) => {
    const code = c.charCodeAt(0);
    return code < 0x100 ? `\\x${code.toString(16).padStart(2, '0')}` : `<U+${code.toString(16).toUpperCase().padStart(4, '0')}>`;
  });
}

export function truncate(text: string, limit: number): string {
  const flat = visible(text.replace(/\s+/g, ' ').trim());
  return flat.length <= limit ? flat : flat.slice(0, Math.max(0, limit - 1)).trimEnd() + '…';
}

/** The title of the progress notification the extension opens for a Turn it runs. */
export function turnTitle(task: string): string {
  return `Fleet: ${truncate(task, 60)}`;
}

/** A fresh client-created work-done token for one Turn. */
export function newWorkDoneToken(random: () => string): string {
  return `fleet-vscode-${random()}`;
}

/**
 * The message to show in the Turn's notification for one progress value on its token;
 * `undefined` leaves the notification as it is.
 */
export function progressMessage(value: TurnProgressValue): string | undefined {
  switch (value.kind) {
    case 'begin':
      return value.message ? `${value.title}: ${value.message}` : value.title;
    case 'report':
      return value.message;
    case 'end':
      return value.message ? `Turn ${value.message}` : undefined;
  }
}

/** How a Turn's end is shown: its status, or "completed with errors" for a completed Turn whose
 * outcome is not `submitted` (extracted, partial, or failed: the answer is the program's own
 * error message), with the outcome's reasons. */
export interface ShownStatus {
  /** "completed", "completed with errors", "failed", "cancelled", "running". */
  text: string;
  /** A completed Turn whose outcome is not clean. */
  withErrors: boolean;
  /** The reasons' details joined by "; " (the outcome's kind when none has a detail); raw server
   * text: pass it through `truncate`/`visible` (or a markdown fence) to show it. "" when clean. */
  reasons: string;
  /** The reasons' details one by one (raw server text, like `reasons`). */
  details: string[];
}

export const WITH_ERRORS = 'completed with errors';

/** A Turn's shown status from its status and its outcome (`TurnResult.outcome`, or a stored
 * `TurnSummary.outcome`). A missing outcome (a result or summary stored before outcomes existed) is
 * shown as the status. */
export function shownStatus(status: TurnStatus, outcome: AnswerOutcomeLike | null | undefined): ShownStatus {
  if (status !== 'completed' || !outcome || typeof outcome !== 'object' || typeof outcome.kind !== 'string' || outcome.kind === 'submitted') {
    return { text: status, withErrors: false, reasons: '', details: [] };
  }
  const details = (Array.isArray(outcome.reasons) ? outcome.reasons : [])
    .map((r) => (r && typeof r.detail === 'string' ? r.detail.trim() : ''))
    .filter((d) => d !== '');
  return { text: WITH_ERRORS, withErrors: true, reasons: details.length > 0 ? details.join('; ') : outcome.kind, details };
}

/** "completed", or "completed with errors: 2 sandbox cells failed" (one line, controls and bidi
 * overrides made visible, at most `limit` characters of reasons). */
export function formatStatus(shown: ShownStatus, limit = 300): string {
  return shown.withErrors ? `${shown.text}: ${truncate(shown.reasons, limit)}` : shown.text;
}

/** One line summarising a finished Turn (notification text). */
export function formatTurnResult(result: TurnResult, seq?: number): string {
  const shown = shownStatus(result.status, result.outcome);
  const head = `${seq ? `Turn #${seq}` : `Turn ${result.turnId}`} ${formatStatus(shown)}`;
  const route = result.route ? ` (${result.route})` : '';
  if (result.status === 'failed') {
    const reason = result.error?.message ?? result.error?.kind ?? 'no reason given';
    return `${head}${route}: ${truncate(String(reason), 300)}`;
  }
  const answer = result.answer ? `${shown.withErrors ? ' — answer' : ''}: ${truncate(result.answer, 300)}` : '';
  const files = result.artifacts?.length
    ? ` [${result.artifacts.length} artifact${result.artifacts.length === 1 ? '' : 's'}]`
    : '';
  return `${head}${route}${answer}${files}`;
}

/** The Turn's usage in one line, for the output channel. */
export function formatUsage(result: TurnResult): string {
  const u = result.usage;
  if (!u) {
    return '';
  }
  const parts = [`${u.modelCalls} model calls`, `${u.sandboxErrors} sandbox errors`];
  if (u.submitRejections) {
    parts.push(`${u.submitRejections} submit rejections`);
  }
  if (u.inputTokens != null || u.outputTokens != null) {
    parts.push(`${u.inputTokens ?? '?'} in / ${u.outputTokens ?? '?'} out tokens`);
  }
  return parts.join(', ');
}

function text(value: unknown): string {
  return typeof value === 'string' ? value : '';
}

/**
 * One output-channel line for a `fleet/turn/didEmit` event. Each kind reads the fields of its
 * generated payload type (docs/schema/turn-events.schema.json), never guessed alternatives.
 */
export function formatTurnEvent(event: TurnEvent): string {
  const agent = event.parentAgentId ? `${event.agentId} (of ${event.parentAgentId})` : event.agentId;
  let detail = '';
  switch (event.kind) {
    case 'triage_decision': {
      const p = event.payload ?? {};
      detail = `route ${text(p.route) || '?'}` + (text(p.summary) ? ` (${text(p.summary)})` : '');
      break;
    }
    case 'module_start':
    case 'module_end':
      detail = text(event.payload?.module);
      break;
    case 'code_cell':
      detail = truncate(text(event.payload?.code), 120);
      break;
    case 'cell_output': {
      const p = event.payload ?? {};
      detail = truncate(p.ok === false ? text(p.error) || text(p.error_type) : text(p.output), 120);
      break;
    }
    case 'tool_call_start':
    case 'tool_call_end':
      detail = text(event.payload?.tool);
      break;
    case 'child_spawned':
      detail = truncate(text(event.payload?.subtask), 120);
      break;
    case 'child_finished': {
      const p = event.payload ?? {};
      detail = text(p.status) + (text(p.error) ? `: ${truncate(text(p.error), 120)}` : '');
      break;
    }
    case 'artifact':
      detail = text(event.payload?.path);
      break;
    case 'status': {
      const p = event.payload ?? {};
      detail = text(p.message) || text(p.status);
      break;
    }
    case 'turn_failed':
      detail = text(event.payload?.error?.message);
      break;
  }
  const seq = String(event.seq).padStart(3, ' ');
  return `[${event.turnId} #${seq}] ${agent} ${event.kind}${detail ? ': ' + detail : ''}`;
}

/** "a, b ,c" -> ["a", "b", "c"]: expected values typed into an input box. */
export function splitValues(text: string): string[] {
  return text
    .split(',')
    .map((v) => v.trim())
    .filter((v) => v !== '');
}
