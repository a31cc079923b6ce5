// What the Fleet tree shows for a Turn and an agent: labels, descriptions, icons' names. Pure: no
// `vscode` import, unit-tested under node.
import { LiveAgent, LiveTurn, callsText, formatDuration } from './live';
import { formatStatus, shownStatus, truncate, visible } from './progress';
import type { TurnStatus, TurnSummary } from './protocol';

export const STATUS_ICON: Readonly<Record<string, string>> = {
  running: 'sync~spin',
  completed: 'pass',
  succeeded: 'pass',
  failed: 'error',
  cancelled: 'circle-slash',
  deadline: 'watch',
  budget: 'dashboard',
};

/** A completed Turn whose outcome is not clean ("completed with errors"). */
export const WITH_ERRORS_ICON = 'warning';

export interface TurnView {
  label: string;
  description: string;
  tooltip: string;
  status: TurnStatus;
  /** The status as shown: "completed with errors" for a completed Turn whose outcome is not clean. */
  shown: string;
  icon: string;
}

/** A Turn's row: "#<seq> <task>", described by status · route · duration. A completed Turn whose
 * outcome (from its result, when this window saw it end, else from its stored summary) is not
 * `submitted` is "completed with errors: <reasons>" with a warning icon; a summary without an
 * outcome (stored before summaries carried one) shows as before. */
export function turnView(summary: TurnSummary | undefined, live: LiveTurn | undefined): TurnView {
  const status: TurnStatus = live?.status ?? summary?.status ?? 'running';
  const shown = shownStatus(status, live?.result?.outcome ?? summary?.outcome);
  const task = summary?.task ?? live?.task ?? live?.turnId ?? '';
  const route = live?.route ?? summary?.route ?? undefined;
  const duration = formatDuration(live?.durationSeconds ?? summary?.durationSeconds);
  const parts: string[] = [formatStatus(shown, 60)];
  if (route) parts.push(route);
  if (duration) parts.push(duration);
  if (status === 'running' && live?.callsUsed !== undefined) parts.push(callsText(live));
  const seq = summary?.seq !== undefined ? `#${summary.seq} ` : '';
  const tooltip = [visible(task), `Turn ${summary?.turnId ?? live?.turnId}`, parts.join(' · ')];
  if (shown.withErrors) {
    tooltip.push(formatStatus(shown, 1000));
  }
  return {
    label: `${seq}${truncate(task, 60)}`,
    description: parts.join(' · '),
    tooltip: tooltip.join('\n'),
    status,
    shown: shown.text,
    icon: shown.withErrors ? WITH_ERRORS_ICON : (STATUS_ICON[status] ?? 'circle-outline'),
  };
}

/** An agent's row: "root" or "↳ <subtask>", described by its state (and step while running). */
export function agentView(agent: LiveAgent): { label: string; description: string; icon: string } {
  const label = agent.agentId === 'root' ? 'root agent' : truncate(agent.subtask ?? agent.agentId, 60);
  const description = [agent.agentId === 'root' ? undefined : agent.agentId, agent.state, agent.state === 'running' ? agent.step : undefined]
    .filter(Boolean)
    .join(' · ');
  return { label, description, icon: STATUS_ICON[agent.state] ?? 'circle-outline' };
}

/** A labelled trace's icon by review status. */
export const LABEL_ICONS: Record<string, string> = { approved: 'pass', benchmark: 'beaker', synthetic: 'symbol-misc', rejected: 'circle-slash' };

/** A trace row's description: its label first ("labelled approved"), then the id. */
export function traceDescription(traceId: string | undefined, labelStatus: string | undefined): string | undefined {
  if (!labelStatus) {
    return traceId;
  }
  return traceId ? `labelled ${labelStatus} · ${traceId}` : `labelled ${labelStatus}`;
}

/** `fleet/trace/list` entries → trace id → review status, for the labelled ones. */
export function labelStatuses(refs: readonly { traceId: string; labelStatus?: string }[]): Map<string, string> {
  return new Map(refs.filter((r) => r.labelStatus).map((r) => [r.traceId, r.labelStatus as string]));
}
