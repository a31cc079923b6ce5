// Error messages for people: a JSON-RPC error from fleet-lsp (code, message, data.kind) becomes
// the text the extension shows. Pure: no `vscode` import.
import { INVALID_PARAMS, REQUEST_CANCELLED, errorKindForCode } from './protocol';

export interface RpcErrorLike {
  code: number;
  message: string;
  data?: { kind?: string; [key: string]: unknown } | unknown;
}

export function isRpcError(error: unknown): error is RpcErrorLike {
  return (
    typeof error === 'object' &&
    error !== null &&
    typeof (error as RpcErrorLike).code === 'number' &&
    typeof (error as RpcErrorLike).message === 'string'
  );
}

/** The fleet error kind (`data.kind`, else the kind the code stands for). */
export function errorKind(error: unknown): string | undefined {
  if (!isRpcError(error)) {
    return undefined;
  }
  const data = error.data as { kind?: unknown } | undefined;
  if (data && typeof data === 'object' && typeof data.kind === 'string') {
    return data.kind;
  }
  if (error.code === INVALID_PARAMS) {
    return 'InvalidParams';
  }
  return errorKindForCode(error.code);
}

export function isCancellation(error: unknown): boolean {
  if (isRpcError(error)) {
    return error.code === REQUEST_CANCELLED;
  }
  return error instanceof Error && error.name === 'Canceled';
}

/** What to do next, for the kinds where the extension knows a next step. */
const HINTS: Readonly<Record<string, string>> = {
  SessionNotFound: "Run 'Fleet: New Session' or 'Fleet: Load Session…'.",
  TurnBusy: "'Fleet: Cancel Turn' stops the running Turn.",
  SessionOwned: 'Close the other editor or process that uses this Session, or load another one.',
  DatasetChanged: "Select the dataset again with 'Fleet: Set Dataset…'.",
  ClientCapabilityMissing: 'This VS Code client cannot do what the server asked.',
};

/**
 * The message the extension shows for a failed request: `<what>: <server message>` plus a hint.
 * The server writes its messages for people, so they are shown as they are.
 */
export function formatError(error: unknown, what?: string): string {
  const prefix = what ? `${what}: ` : '';
  if (isCancellation(error)) {
    return `${prefix}cancelled`;
  }
  if (isRpcError(error)) {
    const kind = errorKind(error);
    const hint = kind ? HINTS[kind] : undefined;
    const message = error.message.trim() || `error ${error.code}`;
    return `${prefix}${message}${hint ? ' ' + hint : ''}`;
  }
  if (error instanceof Error) {
    return `${prefix}${error.message}`;
  }
  return `${prefix}${String(error)}`;
}

/** The text of a `fleet:` document that could not be read (shown instead of an empty editor). */
export function errorDocument(uri: string, error: unknown): string {
  const kind = errorKind(error);
  return [
    `# Cannot open ${uri}`,
    '',
    formatError(error),
    ...(kind ? ['', `(${kind})`] : []),
    '',
  ].join('\n');
}
