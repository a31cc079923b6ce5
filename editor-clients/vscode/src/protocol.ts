// The fleet-lsp wire protocol (version 1) as the extension uses it: method names, params and
// result shapes, the `fleet.*` commands and the error codes. It mirrors
// ../shared/design/PROTOCOL.md (the binding contract) and docs/protocol.md (the server's full
// protocol, with additions marked ⁺ there); `fleet_lsp/protocol.py` is the server's source of
// truth. No `vscode` import: this module is unit-tested under plain node.

export const PROTOCOL_VERSION = 1;
export const SERVER_NAME = 'fleet-lsp';
export const URI_SCHEME = 'fleet';
export const CLIENT_NAME = 'vscode';

export const MODES = ['hybrid', 'rlm', 'flex'] as const;
export type Mode = (typeof MODES)[number];

/** Review statuses `fleet/trace/label` accepts (docs/evaluation.md; an approved label needs an
 * expected answer or values, a critical one needs values). */
export const LABEL_STATUSES = ['approved', 'benchmark', 'synthetic', 'rejected'] as const;
export type LabelStatus = (typeof LABEL_STATUSES)[number];

/** Routes a label may expect. */
export const ROUTES = ['direct', 'flex', 'rlm'] as const;

// ----------------------------------------------------------------------------------------------
// Methods
// ----------------------------------------------------------------------------------------------

export const Methods = {
  sessionNew: 'fleet/session/new',
  sessionLoad: 'fleet/session/load',
  sessionList: 'fleet/session/list',
  sessionClose: 'fleet/session/close',
  sessionDelete: 'fleet/session/delete', // ⁺
  sessionSetMode: 'fleet/session/setMode',
  sessionHistory: 'fleet/session/history',
  sessionSetModels: 'fleet/session/setModels', // ⁺
  contextAttach: 'fleet/context/attach',
  contextSetDataset: 'fleet/context/setDataset',
  contextClearDataset: 'fleet/context/clearDataset',
  workspaceList: 'fleet/workspace/list',
  turnRun: 'fleet/turn/run',
  turnCancel: 'fleet/turn/cancel',
  artifactList: 'fleet/artifact/list',
  artifactRead: 'fleet/artifact/read',
  artifactOpen: 'fleet/artifact/open',
  artifactSave: 'fleet/artifact/save',
  traceGet: 'fleet/trace/get',
  traceList: 'fleet/trace/list', // ⁺
  traceLabel: 'fleet/trace/label',
  memoryList: 'fleet/memory/list', // ⁺
  memoryReview: 'fleet/memory/review', // ⁺
  memoryAdd: 'fleet/memory/add', // ⁺
  memoryReject: 'fleet/memory/reject', // ⁺
  modelsList: 'fleet/models/list', // ⁺
  debugInfo: 'fleet/debug/info', // ⁺
  textDocumentContent: 'workspace/textDocumentContent',
} as const;

export const Notifications = {
  turnDidEmit: 'fleet/turn/didEmit',
  sessionDidChange: 'fleet/session/didChange',
  artifactDidChange: 'fleet/artifact/didChange', // ⁺
} as const;

/** Server commands (`workspace/executeCommand`, one object argument) and the request each wraps. */
export const SERVER_COMMANDS = {
  'fleet.newSession': Methods.sessionNew,
  'fleet.loadSession': 'fleet/session/load',
  'fleet.listSessions': 'fleet/session/list',
  'fleet.closeSession': 'fleet/session/close',
  'fleet.attachFile': Methods.contextAttach,
  'fleet.setDataset': Methods.contextSetDataset,
  'fleet.clearDataset': Methods.contextClearDataset,
  'fleet.runTurn': Methods.turnRun,
  'fleet.cancelTurn': Methods.turnCancel,
  'fleet.setMode': Methods.sessionSetMode,
  'fleet.openArtifact': Methods.artifactOpen,
  'fleet.saveArtifact': Methods.artifactSave,
  'fleet.showTrace': Methods.traceGet,
  'fleet.labelTrace': Methods.traceLabel,
  'fleet.printDebugInformation': Methods.debugInfo,
} as const;
export type ServerCommand = keyof typeof SERVER_COMMANDS;

/** The commands PROTOCOL.md requires every server to list (the others are additions). */
export const CONTRACT_COMMANDS: readonly ServerCommand[] = [
  'fleet.newSession',
  'fleet.attachFile',
  'fleet.setDataset',
  'fleet.runTurn',
  'fleet.cancelTurn',
  'fleet.setMode',
  'fleet.openArtifact',
  'fleet.saveArtifact',
  'fleet.showTrace',
  'fleet.labelTrace',
  'fleet.printDebugInformation',
];

export function isServerCommand(command: string): command is ServerCommand {
  return Object.prototype.hasOwnProperty.call(SERVER_COMMANDS, command);
}

// ----------------------------------------------------------------------------------------------
// Initialization
// ----------------------------------------------------------------------------------------------

export interface FleetInitializationOptions {
  protocolVersion: number;
  client: string;
  turnEvents: boolean;
  settings: Record<string, unknown>;
}

/** `initializationOptions` exactly as the extension sends them. */
export function initializationOptions(config: {
  turnEvents: boolean;
  settings: Record<string, unknown>;
}): { fleet: FleetInitializationOptions } {
  return {
    fleet: {
      protocolVersion: PROTOCOL_VERSION,
      client: CLIENT_NAME,
      turnEvents: config.turnEvents,
      settings: config.settings,
    },
  };
}

/** `capabilities.experimental.fleet` of the `initialize` result. */
export interface FleetServerCapability {
  protocolVersion: number;
  features: string[];
}

// ----------------------------------------------------------------------------------------------
// Types
// ----------------------------------------------------------------------------------------------

export interface DatasetInfo {
  path: string;
  sizeBytes: number;
  sha256: string;
  description?: string;
}

export interface SessionInfo {
  sessionId: string;
  mode: Mode;
  turnCount: number;
  createdAt: string;
  updatedAt: string;
  dataset?: DatasetInfo | null;
}

export type TurnStatus = 'running' | 'completed' | 'failed' | 'cancelled';

export interface ErrorInfo {
  kind?: string;
  message?: string;
  [key: string]: unknown;
}

export interface TurnSummary {
  turnId: string;
  status: TurnStatus;
  task: string;
  answer?: string | null;
  route?: string | null;
  traceId?: string | null;
  createdAt: string;
  error?: ErrorInfo | null;
  seq?: number;
  learnedNote?: string | null;
}

export interface WorkspaceFile {
  path: string;
  sizeBytes: number;
  sha256: string;
}

export interface AttachResult extends WorkspaceFile {
  files?: WorkspaceFile[];
  skipped?: string[];
}

export interface Artifact {
  uri: string;
  path: string;
  sizeBytes: number;
  sha256: string;
  turnId?: string | null;
  agentId?: string | null;
  provenance?: unknown[];
}

export interface Usage {
  modelCalls: number;
  sandboxErrors: number;
  submitRejections: number;
  inputTokens?: number | null;
  outputTokens?: number | null;
}

export interface TurnResult {
  turnId: string;
  sessionId: string;
  status: 'completed' | 'failed' | 'cancelled';
  answer: string;
  route: string;
  learnedNote?: string | null;
  artifacts: Artifact[];
  traceId?: string | null;
  usage: Usage;
  error?: ErrorInfo | null;
  /** From the Turn's start to its outcome. */
  durationSeconds?: number | null;
  replayed?: boolean;
  artifactsOmitted?: number;
}

export interface ArtifactReadResult {
  uri: string;
  text: string;
  languageId?: string | null;
  sizeBytes: number;
  sha256: string;
  binary?: boolean;
}

export interface TraceDocument {
  traceId: string;
  turnId?: string;
  sessionId?: string;
  uri: string;
  markdown: string;
}

export interface TraceRef {
  traceId: string;
  turnId: string;
  sessionId: string;
  uri: string;
}

export interface TraceLabelParams {
  traceId: string;
  status?: LabelStatus | string;
  answer?: string;
  /** Expected values (strings or numbers) the answer must contain. */
  values?: (string | number)[] | Record<string, unknown>;
  route?: string;
  critical?: boolean;
  group?: string;
  expectations?: Record<string, unknown>;
  reviewer?: string;
}

export interface TurnRunParams {
  sessionId: string;
  task: string;
  mode?: Mode;
  timeoutSeconds?: number;
  recordReplay?: boolean;
  idempotencyKey?: string;
  workDoneToken?: string | number;
}

/** `$/progress` values on Turn and child-agent tokens (fields beyond the LSP ones are fleet's). */
export interface TurnProgressBegin {
  kind: 'begin';
  title: string;
  cancellable?: boolean;
  message?: string;
  percentage?: number;
  turnId?: string;
  sessionId?: string;
  agentId?: string;
  parentAgentId?: string;
}
export interface TurnProgressReport {
  kind: 'report';
  message?: string;
  percentage?: number;
  cancellable?: boolean;
  turnId?: string;
  agentId?: string;
  parentAgentId?: string;
}
export interface TurnProgressEnd {
  kind: 'end';
  message?: string;
  turnId?: string;
  agentId?: string;
}
export type TurnProgressValue = TurnProgressBegin | TurnProgressReport | TurnProgressEnd;

export interface TurnEvent {
  turnId: string;
  sessionId: string;
  seq: number;
  agentId: string;
  parentAgentId?: string;
  kind: string;
  payload: Record<string, unknown>;
  at?: string;
}

/** `fleet/artifact/didChange` ⁺: an artifact a running Turn wrote or promoted. */
export interface ArtifactDidChange {
  uri: string;
  sessionId: string;
  turnId?: string | null;
}

/** A memory (`fleet/memory/list`): learned notes and user memories; only reviewed ones reach the model. */
export interface Memory {
  memoryId: string;
  kind: string;
  content: string;
  sources: Record<string, unknown>;
  reviewed: boolean;
  createdAt: string;
}

export interface MemoryListResult {
  memories: Memory[];
  summary?: string;
}

/** `fleet/models/list` ⁺: the models the configured endpoint lists. */
export interface ModelInfo {
  id: string;
  ownedBy: string | null;
}

export interface ModelsListResult {
  models: ModelInfo[];
  cached: boolean;
  fetchedAt: string;
}

/** `fleet/session/setModels` ⁺: the Session's stored model selection (ids only, null = default). */
export interface SessionModels {
  sessionId: string;
  root: string | null;
  sub: string | null;
}

export interface SessionDidChange {
  sessionId: string;
  change: 'created' | 'updated' | 'closed' | 'deleted';
}

// ----------------------------------------------------------------------------------------------
// Errors
// ----------------------------------------------------------------------------------------------

export const INVALID_PARAMS = -32602;
export const REQUEST_CANCELLED = -32800;
export const FLEET_ERROR = -32099;

export const ERROR_CODES: Readonly<Record<string, number>> = {
  SessionNotFound: -32050,
  TurnBusy: -32051,
  SessionOwned: -32052,
  WorkspacePath: -32053,
  FileTooLarge: -32054,
  ModelUnavailable: -32055,
  DatasetChanged: -32056,
  SessionExists: -32057,
  TurnNotFound: -32058,
  IdempotencyConflict: -32059,
  WorkspaceFileNotFound: -32060,
  MemoryNotFound: -32061,
  TraceNotFound: -32062,
  ConfigError: -32063,
  StoreError: -32064,
  SandboxUnavailable: -32065,
  SandboxError: -32066,
  UnsupportedProtocolVersion: -32067,
  ClientCapabilityMissing: -32068,
  TracingUnavailable: -32069,
  LabelSyncError: -32070,
  SessionLimit: -32072,
};

/** The fleet error kind for a code, when the code names exactly one. */
export function errorKindForCode(code: number): string | undefined {
  for (const [kind, value] of Object.entries(ERROR_CODES)) {
    if (value === code) {
      return kind;
    }
  }
  return undefined;
}
