// The answer of a Turn as a read-only markdown document (`fleet-answer:` URIs): the task, the
// answer, links to its artifacts (`fleet:` documents) and its trace. Pure: no `vscode` import.
import { shownStatus } from './progress';
import type { AnswerOutcomeLike, Artifact, TurnSummary } from './protocol';
import { quoteSegment, traceUri } from './uris';

export const ANSWER_SCHEME = 'fleet-answer';

export function answerUri(sessionId: string, turnId: string): string {
  return `${ANSWER_SCHEME}:/sessions/${quoteSegment(sessionId)}/turns/${quoteSegment(turnId)}.md`;
}

export function parseAnswerUri(uri: string): { sessionId: string; turnId: string } | undefined {
  const m = /^fleet-answer:\/sessions\/([^/?#]+)\/turns\/([^/?#]+)\.md$/.exec(uri);
  if (!m) return undefined;
  try {
    return { sessionId: decodeURIComponent(m[1]), turnId: decodeURIComponent(m[2]) };
  } catch {
    return undefined;
  }
}

/** Markdown text is shown as text: escape what markdown would interpret in a link label. */
export function escapeLinkText(text: string): string {
  return text.replace(/([\\`*_{}[\]()#+!<>|])/g, '\\$1');
}

function fence(text: string): string {
  const longest = Math.max(2, ...(text.match(/`+/g) ?? []).map((m) => m.length));
  const ticks = '`'.repeat(longest + 1);
  return `${ticks}text\n${text}\n${ticks}`;
}

/**
 * The artifacts of one Turn, as `fleet/artifact/list` lists them now: those its result listed
 * (when this window saw it), those its stored summary names (`artifactPaths`, for Turns an
 * earlier editor session ran), and those whose record or provenance names the Turn. A path no
 * longer in the workspace is left out (there is nothing to open).
 */
export function artifactsOfTurn(
  listed: readonly Artifact[],
  turnId: string,
  fromResult: readonly Artifact[] = [],
  paths: readonly string[] = [],
): Artifact[] {
  const byPath = new Map<string, Artifact>();
  for (const a of fromResult) {
    byPath.set(a.path, a);
  }
  const named = new Set(paths);
  for (const a of listed) {
    const provenance = (a.provenance ?? []) as { turnId?: unknown }[];
    if (a.turnId === turnId || named.has(a.path) || provenance.some((p) => p && p.turnId === turnId)) {
      byPath.set(a.path, { ...byPath.get(a.path), ...a });
    } else if (byPath.has(a.path)) {
      byPath.set(a.path, { ...byPath.get(a.path)!, sizeBytes: a.sizeBytes, sha256: a.sha256 });
    }
  }
  return [...byPath.values()];
}

export interface AnswerInput {
  sessionId: string;
  turn: Pick<TurnSummary, 'turnId' | 'status' | 'task' | 'answer' | 'route' | 'traceId' | 'error'> & { seq?: number };
  artifacts: Artifact[];
  durationSeconds?: number;
  /** The Turn's outcome: from its result when this window saw it end, else its stored summary's. */
  outcome?: AnswerOutcomeLike | null;
}

/**
 * The document. Task and answer come from users and models: they are shown in fenced blocks, so
 * nothing in them renders as markdown or links.
 */
export function answerMarkdown(input: AnswerInput): string {
  const { turn, sessionId } = input;
  const shown = shownStatus(turn.status, input.outcome);
  const lines = [
    `# Turn ${turn.seq !== undefined ? `#${turn.seq}` : turn.turnId} · ${shown.text}${turn.route ? ` · ${turn.route}` : ''}`,
    '',
    `Session \`${sessionId}\`, Turn \`${turn.turnId}\`${input.durationSeconds !== undefined ? `, ${input.durationSeconds.toFixed(1)} s` : ''}`,
    '',
    '## Task',
    '',
    fence(turn.task),
    '',
    '## Answer',
    '',
    turn.answer ? fence(turn.answer) : '_(no answer)_',
  ];
  if (shown.withErrors) {
    // the reasons come from the server (an error answer's first line is the model's): fenced text
    lines.push('', '## Completed with errors', '', fence((shown.details.length > 0 ? shown.details : [shown.reasons]).join('\n')));
  }
  if (turn.error && (turn.error.message || turn.error.kind)) {
    lines.push('', '## Error', '', fence(String(turn.error.message ?? turn.error.kind)));
  }
  lines.push('', '## Artifacts', '');
  if (input.artifacts.length === 0) {
    lines.push('_(none)_');
  }
  for (const a of input.artifacts) {
    lines.push(`- [${escapeLinkText(a.path.replace(/^artifacts\//, ''))}](${a.uri}) (${a.sizeBytes} bytes)`);
  }
  lines.push('', '## Trace', '');
  const trace = turn.traceId ?? turn.turnId;
  lines.push(`- [trace ${escapeLinkText(trace)}](${traceUri(sessionId, trace)})`, '');
  return lines.join('\n');
}
