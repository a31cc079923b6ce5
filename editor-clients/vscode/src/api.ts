// Every call the extension makes to fleet-lsp, over anything that sends JSON-RPC requests and
// listens to `$/progress` the way vscode-languageclient's `LanguageClient` does. The extension
// passes its LanguageClient; the contract test passes a `vscode-languageserver-protocol`
// connection to the real server. No `vscode` import.
import {
  CancellationToken,
  ExecuteCommandRequest,
  WorkDoneProgress,
} from 'vscode-languageserver-protocol';
import type { ProgressType } from 'vscode-languageserver-protocol';
import {
  Artifact,
  ArtifactReadResult,
  AttachResult,
  DatasetInfo,
  DebugInfo,
  FleetMethod,
  FleetParams,
  FleetResult,
  Memory,
  MemoryListResult,
  Methods,
  Mode,
  ModelsListResult,
  SERVER_COMMANDS,
  ServerCommand,
  SessionInfo,
  SessionModels,
  TraceDocument,
  TraceLabelParams,
  TraceLabelResult,
  TraceRef,
  TurnProgressValue,
  TurnResult,
  TurnRunParams,
  TurnSummary,
  WorkspaceFile,
} from './protocol';
import { newWorkDoneToken } from './progress';

export interface Disposable {
  dispose(): void;
}

/** The part of `LanguageClient` (and of a `ProtocolConnection`) the extension needs. */
export interface Rpc {
  sendRequest<R>(method: string, params: unknown, token?: CancellationToken): Promise<R>;
  onProgress<P>(type: ProgressType<P>, token: string | number, handler: (value: P) => void): Disposable;
}

export interface RunTurnOptions {
  /** Cancelling it sends `$/cancelRequest` for `fleet/turn/run` (the Turn ends, answer -32800). */
  token?: CancellationToken;
  /** Each `$/progress` value on the Turn's client-created token. */
  onProgress?: (value: TurnProgressValue, token: string) => void;
  /** The token to use (default: a fresh `fleet-vscode-<uuid>`). */
  workDoneToken?: string;
}

function randomId(): string {
  const c = (globalThis as { crypto?: { randomUUID?: () => string } }).crypto;
  return c?.randomUUID ? c.randomUUID() : `${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}`;
}

/** Pages `listSessions` and `workspace` follow at most (500,000 Sessions, 500,000 files). */
export const MAX_PAGES = 1000;

/** `fleet/session/list` filters (the server lists `sessions.filter` in its features). */
export interface SessionFilter {
  ownerHost?: string;
  ownerUser?: string;
  /** An ISO-8601 instant. */
  updatedSince?: string;
}

function definedOnly(filter: SessionFilter): SessionFilter {
  return Object.fromEntries(Object.entries(filter).filter(([, v]) => v !== undefined && v !== '')) as SessionFilter;
}

function pageParams(pageSize?: number): { limit?: number } {
  return pageSize === undefined ? {} : { limit: pageSize };
}

export class FleetApi {
  constructor(private readonly rpc: Rpc) {}

  /** A `fleet/*` request, its params and result typed by the generated protocol types. */
  request<M extends FleetMethod>(method: M, params: FleetParams<M>, token?: CancellationToken): Promise<FleetResult<M>> {
    return this.send<FleetResult<M>>(method, params, token);
  }

  private send<R>(method: string, params: unknown, token?: CancellationToken): Promise<R> {
    // Never pass an undefined token: vscode-jsonrpc would send `[params, null]` as array params.
    return token
      ? this.rpc.sendRequest<R>(method, params ?? {}, token)
      : this.rpc.sendRequest<R>(method, params ?? {});
  }

  // sessions -------------------------------------------------------------------------------------

  newSession(params: { sessionId?: string; mode?: Mode } = {}): Promise<SessionInfo> {
    return this.request(Methods.sessionNew, params);
  }

  loadSession(sessionId: string): Promise<SessionInfo> {
    return this.request(Methods.sessionLoad, { sessionId });
  }

  /**
   * Every Session, newest first: `fleet/session/list` answers a page at a time, so this follows
   * `nextCursor` until the last page (the first request is `{}`, as an older server expects).
   */
  async listSessions(options: { pageSize?: number; filter?: SessionFilter } = {}): Promise<SessionInfo[]> {
    const sessions: SessionInfo[] = [];
    // the filters go with every page (a cursor is only valid with the filters it came from)
    const params = { ...pageParams(options.pageSize), ...definedOnly(options.filter ?? {}) };
    await this.followPages(Methods.sessionList, params, (page) => {
      sessions.push(...page.sessions);
    });
    return sessions;
  }

  closeSession(sessionId: string): Promise<null> {
    return this.request(Methods.sessionClose, { sessionId });
  }

  deleteSession(sessionId: string): Promise<null> {
    return this.request(Methods.sessionDelete, { sessionId });
  }

  setMode(sessionId: string, mode: Mode): Promise<SessionInfo> {
    return this.request(Methods.sessionSetMode, { sessionId, mode });
  }

  async history(sessionId: string, limit?: number): Promise<TurnSummary[]> {
    const params = limit === undefined ? { sessionId } : { sessionId, limit };
    const result = await this.request(Methods.sessionHistory, params);
    return result.turns;
  }

  // context --------------------------------------------------------------------------------------

  attach(sessionId: string, uri: string, as?: string): Promise<AttachResult> {
    return this.request(Methods.contextAttach, as ? { sessionId, uri, as } : { sessionId, uri });
  }

  /** Attach an editor selection as the workspace file `as` (a docs/protocol.md addition). */
  attachText(sessionId: string, text: string, as: string): Promise<AttachResult> {
    return this.request(Methods.contextAttach, { sessionId, text, as });
  }

  setDataset(sessionId: string, path: string, description?: string): Promise<DatasetInfo> {
    const params = description ? { sessionId, path, description } : { sessionId, path };
    return this.request(Methods.contextSetDataset, params);
  }

  clearDataset(sessionId: string): Promise<null> {
    return this.request(Methods.contextClearDataset, { sessionId });
  }

  /** Every workspace file, following `fleet/workspace/list`'s pages (in path order). */
  async workspace(
    sessionId: string,
    options: { pageSize?: number } = {},
  ): Promise<{ files: WorkspaceFile[]; artifacts: WorkspaceFile[] }> {
    const files: WorkspaceFile[] = [];
    const artifacts: WorkspaceFile[] = [];
    await this.followPages(Methods.workspaceList, { sessionId, ...pageParams(options.pageSize) }, (page) => {
      files.push(...page.files);
      artifacts.push(...page.artifacts);
    });
    return { files, artifacts };
  }

  /**
   * Request `method` page by page: each answer goes to `onPage`, and its `nextCursor` (absent on
   * the last page, and from servers that do not page) is sent back as `cursor`. A cursor the
   * server repeats, or more than `MAX_PAGES` pages, ends it with an error instead of a loop.
   */
  private async followPages<M extends typeof Methods.sessionList | typeof Methods.workspaceList>(
    method: M,
    params: FleetParams<M>,
    onPage: (page: FleetResult<M>) => void,
  ): Promise<void> {
    const seen = new Set<string>();
    let cursor: string | undefined;
    for (let pages = 0; pages < MAX_PAGES; pages++) {
      const page = await this.request(method, (cursor === undefined ? params : { ...params, cursor }) as FleetParams<M>);
      onPage(page);
      const next = page.nextCursor;
      if (next === undefined || next === null) {
        return;
      }
      if (seen.has(next)) {
        throw new Error(`${method} repeated the page cursor ${JSON.stringify(next.slice(0, 40))}; stopped`);
      }
      seen.add(next);
      cursor = next;
    }
    throw new Error(`${method} answered more than ${MAX_PAGES} pages; stopped`);
  }

  // turns ----------------------------------------------------------------------------------------

  /**
   * Run a Turn with a client-created work-done token: progress on that token goes to
   * `onProgress`; cancelling `token` sends `$/cancelRequest` and the promise rejects with -32800.
   */
  async runTurn(params: Omit<TurnRunParams, 'workDoneToken'>, options: RunTurnOptions = {}): Promise<TurnResult> {
    const workDoneToken = options.workDoneToken ?? newWorkDoneToken(randomId);
    const subscription = options.onProgress
      ? this.rpc.onProgress(WorkDoneProgress.type, workDoneToken, (value) =>
          options.onProgress?.(value as TurnProgressValue, workDoneToken),
        )
      : undefined;
    try {
      return await this.request(Methods.turnRun, { ...params, workDoneToken }, options.token);
    } finally {
      subscription?.dispose();
    }
  }

  cancelTurn(turnId: string): Promise<null> {
    return this.request(Methods.turnCancel, { turnId });
  }

  // artifacts and traces -------------------------------------------------------------------------

  async listArtifacts(sessionId: string): Promise<Artifact[]> {
    const result = await this.request(Methods.artifactList, { sessionId });
    return result.artifacts;
  }

  readArtifact(uri: string, token?: CancellationToken): Promise<ArtifactReadResult> {
    return this.request(Methods.artifactRead, { uri }, token);
  }

  saveArtifact(uri: string, target: string): Promise<{ target: string; sizeBytes: number; sha256: string }> {
    return this.request(Methods.artifactSave, { uri, target });
  }

  /** `workspace/textDocumentContent` (LSP 3.18), what VS Code's provider for `fleet:` calls. */
  async documentContent(uri: string, token?: CancellationToken): Promise<string> {
    const result = await this.send<{ text: string }>(Methods.textDocumentContent, { uri }, token);
    return result.text;
  }

  trace(ref: { traceId: string } | { turnId: string }): Promise<TraceDocument> {
    return this.request(Methods.traceGet, ref);
  }

  async listTraces(sessionId: string, limit?: number): Promise<TraceRef[]> {
    const params = limit === undefined ? { sessionId } : { sessionId, limit };
    const result = await this.request(Methods.traceList, params);
    return result.traces;
  }

  labelTrace(params: TraceLabelParams): Promise<TraceLabelResult> {
    return this.request(Methods.traceLabel, params);
  }

  // memory and models ----------------------------------------------------------------------------

  listMemories(sessionId: string, reviewed?: boolean): Promise<MemoryListResult> {
    return this.request(Methods.memoryList, reviewed === undefined ? { sessionId } : { sessionId, reviewed });
  }

  reviewMemory(sessionId: string, memoryId: string, reviewed = true): Promise<null> {
    return this.request(Methods.memoryReview, { sessionId, memoryId, reviewed });
  }

  addMemory(sessionId: string, content: string): Promise<{ memory: Memory }> {
    return this.request(Methods.memoryAdd, { sessionId, content });
  }

  rejectMemory(sessionId: string, memoryId: string): Promise<null> {
    return this.request(Methods.memoryReject, { sessionId, memoryId });
  }

  listModels(refresh = false): Promise<ModelsListResult> {
    return this.request(Methods.modelsList, refresh ? { refresh } : {});
  }

  /** Select the Session's root and sub model ids (`null` clears a selection). */
  setModels(sessionId: string, root: string | null, sub: string | null): Promise<SessionModels> {
    return this.request(Methods.sessionSetModels, { sessionId, root, sub });
  }

  debugInfo(sessionId?: string): Promise<DebugInfo> {
    return this.request(Methods.debugInfo, sessionId ? { sessionId } : {});
  }

  // commands -------------------------------------------------------------------------------------

  /** `workspace/executeCommand` with exactly one object argument, as the contract asks. */
  executeCommand<C extends ServerCommand>(
    command: C,
    argument: FleetParams<(typeof SERVER_COMMANDS)[C]>,
    token?: CancellationToken,
  ): Promise<FleetResult<(typeof SERVER_COMMANDS)[C]>> {
    return this.send(ExecuteCommandRequest.method, { command, arguments: [argument] }, token);
  }

  /** `workspace/executeCommand` with the arguments as given (the server checks them). */
  executeCommandWith<R = unknown>(command: string, args: unknown[], token?: CancellationToken): Promise<R> {
    return this.send<R>(ExecuteCommandRequest.method, { command, arguments: args }, token);
  }
}
