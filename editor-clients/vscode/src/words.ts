// The words the extension shows around Turns, Sessions, modes, labels and server log lines. Pure:
// no `vscode` import, unit-tested under node.
import type { LabelStatus, Mode, TraceLabelParams, TraceLabelResult } from './protocol';
import { truncate } from './progress';

/** "1 Turn", "2 Turns", "0 Turns". */
export function plural(count: number, noun: string): string {
  return `${count} ${count === 1 ? noun : `${noun}s`}`;
}

/** How a Turn is named everywhere (toasts, tabs, trees, pickers): "Turn #3", or "Turn" + its id
 * while its number is unknown. */
export function turnName(seq: number | undefined, turnId?: string): string {
  if (typeof seq === 'number' && seq > 0) {
    return `Turn #${seq}`;
  }
  return turnId ? `Turn ${turnId}` : 'Turn';
}

/** The answer tab's title: "Turn #3 — answer". */
export function answerTitle(seq: number | undefined, turnId: string): string {
  return `${turnName(seq, turnId)} — answer`;
}

/** The mode the server uses for a new Session when none is given. */
export const DEFAULT_MODE: Mode = 'hybrid';

export const MODE_DESCRIPTIONS: Readonly<Record<Mode, string>> = {
  hybrid: 'triage picks direct, flex or rlm for each Turn',
  rlm: 'every Turn writes and runs code in the sandbox (recursive loop)',
  flex: 'every Turn uses the flexible program without triage',
};

export interface ModeItem {
  label: Mode;
  description: string;
  detail?: string;
  picked?: boolean;
}

/** The mode pick: each mode described, the default marked, the current one marked and first. */
export function modeItems(modes: readonly Mode[], current?: Mode): ModeItem[] {
  const items = modes.map((mode): ModeItem => {
    const marks = [mode === DEFAULT_MODE ? 'default' : undefined, mode === current ? 'current' : undefined].filter(Boolean);
    return {
      label: mode,
      description: marks.length > 0 ? `(${marks.join(', ')})` : '',
      detail: MODE_DESCRIPTIONS[mode],
      picked: mode === (current ?? DEFAULT_MODE),
    };
  });
  const first = current ?? DEFAULT_MODE;
  return [...items.filter((i) => i.label === first), ...items.filter((i) => i.label !== first)];
}

export type LogLevel = 'trace' | 'debug' | 'info' | 'warn' | 'error';

const LEVELS: Readonly<Record<string, LogLevel>> = {
  DEBUG: 'debug',
  INFO: 'info',
  WARNING: 'warn',
  WARN: 'warn',
  ERROR: 'error',
  CRITICAL: 'error',
};

/** The level of one line of the server's stderr (`2026-01-02 10:00:00,123 INFO name: text`, the
 * server's log format): a line without a level (a traceback's continuation) keeps the previous
 * line's level; anything else unrecognised is `info` (stderr is not an error by itself). */
export function stderrLevel(line: string, previous: LogLevel | undefined): LogLevel {
  const m = /^\d{4}[-/]\d\d[-/]\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)? (DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL) /.exec(line);
  if (m) {
    return LEVELS[m[1]];
  }
  const bare = /^(DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)[: ]/.exec(line);
  if (bare) {
    return LEVELS[bare[1]];
  }
  if (/^Traceback \(most recent call last\)/.test(line)) {
    return 'error';
  }
  return previous ?? 'info';
}

/** The answer step of the label flow is pre-filled with the model's answer only for a label that
 * says the answer is right or is a reference; a rejected label starts empty. */
export function answerPrefill(status: LabelStatus, modelAnswer: string | undefined): string {
  return status === 'rejected' ? '' : (modelAnswer ?? '');
}

/** The one-line summary that ends the label flow:
 * "Fleet: labelled Turn #1 approved — expected answer "42", 1 value (critical), route rlm; eligible". */
export function labelSummary(name: string, params: TraceLabelParams, result?: Pick<TraceLabelResult, 'eligible' | 'ineligibleReason'>): string {
  const parts: string[] = [];
  if (params.answer) parts.push(`expected answer "${truncate(params.answer, 60)}"`);
  const values = Array.isArray(params.values) ? params.values : [];
  if (values.length > 0) {
    parts.push(`${plural(values.length, 'value')}${params.critical ? ' (critical)' : ''}`);
  }
  if (params.route) parts.push(`route ${params.route}`);
  if (params.expectations) parts.push('structured expectations');
  let tail = '';
  if (result) {
    tail = result.eligible ? '; optimization data' : `; not optimization data${result.ineligibleReason ? `: ${truncate(result.ineligibleReason, 80)}` : ''}`;
  }
  return `Fleet: labelled ${name} ${params.status}${parts.length > 0 ? ` — ${parts.join(', ')}` : ''}${tail}`;
}
