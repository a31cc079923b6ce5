// The fleet-lsp wire protocol (version 1) as the extension uses it: method names, params and
// result shapes, the `fleet.*` commands and the error codes. It mirrors
// ../shared/design/PROTOCOL.md (the binding contract) and docs/protocol.md (the server's full
// protocol, with additions marked ⁺ there); `fleet_lsp/protocol.py` is the server's source of
// truth. Every request, result and notification type is an alias of the generated
// protocol.generated.ts, and the constants here are checked against it at compile time. No
// `vscode` import: this module is unit-tested under plain node.
import * as G from './protocol.generated';

export const PROTOCOL_VERSION = G.FLEET_PROTOCOL_VERSION;
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

/** True when A and B are the same type. */
type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
type Assert<T extends true> = T;

/** Compile-time checks against the generated types: `tsc` fails when one no longer holds. */
export type ProtocolChecks = [
  Assert<Equal<Mode, NonNullable<G.SetModeParams['mode']>>>,
  Assert<Equal<LabelStatus, NonNullable<G.TraceLabelParams['status']>>>,
  Assert<Equal<(typeof ROUTES)[number], NonNullable<G.TraceLabelParams['route']>>>,
  Assert<Equal<keyof typeof SERVER_COMMANDS, keyof typeof G.FLEET_COMMANDS>>,
];

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
} as const satisfies Record<string, G.FleetMethod | 'workspace/textDocumentContent'>;

export const Notifications = {
  turnDidEmit: 'fleet/turn/didEmit',
  sessionDidChange: 'fleet/session/didChange',
  artifactDidChange: 'fleet/artifact/didChange', // ⁺
} as const satisfies Record<string, G.FleetNotification>;

/** Server commands (`workspace/executeCommand`, one object argument) and the request each wraps. */
export const SERVER_COMMANDS: typeof G.FLEET_COMMANDS = G.FLEET_COMMANDS;
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
// Types: aliases of the generated ones (protocol.generated.ts, from docs/schema/protocol.schema.json,
// itself generated from fleet_lsp/protocol.py), so `tsc` fails when the extension and the server's
// protocol drift apart. Only `$/progress` values are fleet's LSP extension and written here.
// ----------------------------------------------------------------------------------------------

export type DatasetInfo = G.DatasetWire;
export type SessionInfo = G.SessionInfoWire;
export type TurnSummary = G.TurnSummaryWire;
export type TurnStatus = G.TurnSummaryWire['status'];
export type ErrorInfo = G.TurnErrorWire;
export type WorkspaceFile = G.WorkspaceFileWire;
export type AttachResult = G.AttachResult;
export type Artifact = G.ArtifactWire;
export type Usage = G.UsageWire;
/** How a completed Turn's answer was reached (`TurnResult.outcome`; absent on results stored
 * before outcomes existed): `submitted` is clean, anything else is "completed with errors". */
export type AnswerOutcome = G.AnswerOutcomeWire;
/** An outcome as any record may carry it (the terminal events' payloads: reasons' fields optional). */
export type AnswerOutcomeLike = G.AnswerOutcome | G.AnswerOutcomeWire;
/** The answer of `fleet/turn/run`; the terminal events carry the same record. */
export type TurnResult = G.FleetResult<'fleet/turn/run'>;
export type ArtifactReadResult = G.ArtifactReadResult;
export type TraceDocument = G.TraceResult;
export type TraceRef = G.TraceSummaryWire;
export type TraceLabelParams = G.TraceLabelParams;
export type TraceLabelResult = G.TraceLabelResult;
export type TurnRunParams = G.TurnRunParams;
export type TurnEvent = G.TurnEvent;
export type TurnEventKind = G.TurnEvent['kind'];
/** The payload of a `fleet/turn/didEmit` event of one kind. */
export type PayloadOf<K extends TurnEventKind> = Extract<G.TurnEvent, { kind: K }>['payload'];
export type ArtifactDidChange = G.ArtifactDidChangeParams;
export type SessionDidChange = G.SessionDidChangeParams;
export type Memory = G.MemoryWire;
export type MemoryListResult = G.MemoryListResult;
export type ModelInfo = G.ModelWire;
export type ModelsListResult = G.ModelsListResult;
export type SessionModels = G.SessionModelsResult;
export type DebugInfo = G.DebugInfoResult;
export type FleetMethod = G.FleetMethod;
export type FleetParams<M extends FleetMethod> = G.FleetParams<M>;
export type FleetResult<M extends FleetMethod> = G.FleetResult<M>;

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

// ----------------------------------------------------------------------------------------------
// Errors
// ----------------------------------------------------------------------------------------------

export const INVALID_PARAMS = -32602;
export const REQUEST_CANCELLED = -32800;
export const FLEET_ERROR = G.FLEET_ERROR_CODES.other;

/** Fleet error kinds and their codes (`other`, the code of any kind not listed, left out). */
export const ERROR_CODES: Readonly<Record<string, number>> = Object.fromEntries(
  Object.entries(G.FLEET_ERROR_CODES).filter(([kind]) => kind !== 'other'),
);

/** The fleet error kind for a code, when the code names exactly one. */
export function errorKindForCode(code: number): string | undefined {
  const kinds = Object.entries(ERROR_CODES).filter(([, value]) => value === code);
  return kinds.length === 1 ? kinds[0][0] : undefined;
}
