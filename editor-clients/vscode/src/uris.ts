// `fleet:/` document URIs (artifacts and traces), built and parsed the way the server does
// (fleet_lsp/documents.py): single slash, no authority, no query, segments percent-encoded.
import { URI_SCHEME } from './protocol';

export type FleetUri =
  | { kind: 'artifact'; sessionId: string; path: string }
  | { kind: 'trace'; sessionId: string; traceId: string };

/** Python's `urllib.parse.quote(segment, safe='')`: everything but `A-Za-z0-9_.-~` is encoded. */
export function quoteSegment(segment: string): string {
  return encodeURIComponent(segment).replace(
    /[!'()*]/g,
    (c) => '%' + c.charCodeAt(0).toString(16).toUpperCase(),
  );
}

/** `fleet:///x` and `fleet://x` become `fleet:/x` (the server accepts all three). */
export function normalizeFleetUri(uri: string): string {
  const prefix = `${URI_SCHEME}://`;
  if (uri.startsWith(prefix)) {
    return `${URI_SCHEME}:/` + uri.slice(prefix.length).replace(/^\/+/, '');
  }
  return uri;
}

export function isFleetUri(uri: string): boolean {
  return uri.startsWith(`${URI_SCHEME}:`);
}

/** The URI of a Session artifact; `path` may carry the `artifacts/` workspace root or not. */
export function artifactUri(sessionId: string, path: string): string {
  const relative = path.replace(/^artifacts\//, '').replace(/^\/+/, '');
  const encoded = relative.split('/').map(quoteSegment).join('/');
  return `${URI_SCHEME}:/sessions/${quoteSegment(sessionId)}/artifacts/${encoded}`;
}

export function traceUri(sessionId: string, traceId: string): string {
  return `${URI_SCHEME}:/sessions/${quoteSegment(sessionId)}/traces/${quoteSegment(traceId)}.md`;
}

/** Parse a `fleet:/` URI; `undefined` when it names neither an artifact nor a trace. */
export function parseFleetUri(uri: string): FleetUri | undefined {
  const normalized = normalizeFleetUri(uri);
  const prefix = `${URI_SCHEME}:/sessions/`;
  if (!normalized.startsWith(prefix) || /[?#]/.test(normalized)) {
    return undefined;
  }
  let parts: string[];
  try {
    parts = normalized.slice(prefix.length).split('/').map(decodeURIComponent);
  } catch {
    return undefined;
  }
  if (parts.length < 3 || parts[0] === '') {
    return undefined;
  }
  const [sessionId, section, ...rest] = parts;
  if (section === 'artifacts' && rest.every((p) => p !== '' && p !== '.' && p !== '..')) {
    return { kind: 'artifact', sessionId, path: ['artifacts', ...rest].join('/') };
  }
  if (section === 'traces' && rest.length === 1 && rest[0].endsWith('.md') && rest[0] !== '.md') {
    return { kind: 'trace', sessionId, traceId: rest[0].slice(0, -'.md'.length) };
  }
  return undefined;
}

/** A short label for a document tab or a pick list. */
export function describeFleetUri(uri: string): string {
  const parsed = parseFleetUri(uri);
  if (!parsed) {
    return uri;
  }
  if (parsed.kind === 'artifact') {
    return `${parsed.path.replace(/^artifacts\//, '')} (session ${parsed.sessionId})`;
  }
  return `trace ${parsed.traceId} (session ${parsed.sessionId})`;
}
