// The fleet-lsp protocol's types, generated from docs/schema/protocol.schema.json
// (itself generated from fleet_lsp/protocol.py) by `uv run python -m fleet_lsp.schema`. Do not edit.
/* eslint-disable */

export const FLEET_PROTOCOL_VERSION = 1;

/** How the Turn's answer was reached (``AnswerKind``) and why it is not clean. */
export interface AnswerOutcome {
  kind: "submitted" | "extracted" | "partial" | "failed";
  reasons?: OutcomeReason[];
}

/** How the Turn's answer was reached (`fleet_core.models.AnswerOutcome`): `submitted` is a clean success; anything else is shown as "completed with errors" (or failed). */
export interface AnswerOutcomeWire {
  kind: "submitted" | "extracted" | "partial" | "failed";
  reasons: OutcomeReasonWire[];
}

export interface ArtifactDidChangeParams {
  uri: string;
  sessionId: string;
  turnId: string;
}

export interface ArtifactListResult {
  artifacts: ArtifactWire[];
}

export interface ArtifactOpenParams {
  uri: string;
  takeFocus?: boolean | null;
}

export interface ArtifactOpenResult {
  shown: boolean;
  uri: string;
}

/** An artifact was written (reserved: the engine does not emit it today). */
export interface ArtifactPayload {
  path: string;
  sha256?: string | null;
  size_bytes?: number | null;
  root_path?: string | null;
}

export interface ArtifactReadResult {
  uri: string;
  text: string;
  languageId?: string;
  sizeBytes: number;
  sha256: string;
  binary: boolean;
}

export interface ArtifactReceipt {
  path: string;
  sha256: string;
  agent_id: string;
  root_path: string;
}

/** An artifact a Turn result names; ``uri`` is ``fleet:/sessions/<id>/artifacts/<path>``. */
export interface ArtifactRef {
  uri: string;
  path: string;
  sizeBytes: number;
  sha256: string;
  turnId?: string | null;
  agentId?: string | null;
  provenance?: ProvenanceRecord[] | null;
}

export interface ArtifactSaveParams {
  uri: string;
  target: string;
}

export interface ArtifactSaveResult {
  target: string;
  sizeBytes: number;
  sha256: string;
}

export interface ArtifactWire {
  uri: string;
  path: string;
  sizeBytes: number;
  sha256: string;
  turnId?: string;
  agentId?: string;
  provenance?: Array<Record<string, unknown>>;
}

/** Attach a local file, a folder (with ignore rules and bounds) or a text selection. Exactly one of `uri` (`file:///...`, a file or a folder) and `text` (a selection, written to `as` which is then required). */
export interface AttachParams {
  sessionId: string;
  uri?: string | null;
  as?: string | null;
  text?: string | null;
  exclude?: string[] | null;
  maxFiles?: number | null;
  maxBytes?: number | null;
}

/** A file attach returns the `WorkspaceFile`; a folder attach adds what it copied. */
export interface AttachResult {
  path: string;
  sizeBytes: number;
  sha256: string;
  files?: WorkspaceFileWire[];
  skipped?: string[];
}

/** Model-call units were charged (coalesced: only the latest pending one is delivered). */
export interface BudgetUpdatePayload {
  /** Units used by the whole Turn so far. */
  used: number;
  /** The Turn's model-call budget. */
  max: number;
  category: string;
}

/** A saved candidate: its gate verdict (recomputed from the stored observations when it was saved) and its report, a read-only `fleet:/sessions/<id>/optimization/<version>.md`. */
export interface CandidateWire {
  version: string;
  createdAt: string;
  gatePassed: boolean;
  gate: GateCheckWire[];
  candidateDigest: string;
  changedComponents: string[];
  active: boolean;
  reportUri: string;
}

/** A sandbox cell ended. */
export interface CellOutputPayload {
  cell: number;
  phase: "bootstrap" | "task";
  ok: boolean;
  /** submit_rejected: an ungrounded SUBMIT was refused (not an error). */
  outcome: "completed" | "submitted" | "submit_rejected" | "error" | "sandbox_error" | "cancelled" | "deadline" | "budget";
  duration_ms: number;
  /** The cell's output (bounded), when ok. */
  output?: string | null;
  /** The error message (bounded), when not ok. */
  error?: string | null;
  error_type?: string | null;
}

/** A child agent ended; the event's ``agentId`` is the child. */
export interface ChildFinishedPayload {
  status: "succeeded" | "failed" | "cancelled" | "deadline" | "budget";
  error?: string | null;
  /** The artifacts promoted to the parent, when succeeded. */
  artifacts?: ArtifactReceipt[] | null;
}

/** A child agent started; the event's ``agentId`` is the child, ``parentAgentId`` its parent. */
export interface ChildSpawnedPayload {
  depth: number;
  /** The child's subtask, at most 500 characters. */
  subtask: string;
  /** Copied inputs; null means files/. */
  input_paths?: string[] | null;
}

/** A sandbox cell is about to run. */
export interface CodeCellPayload {
  /** The cell's number within its agent, from 1. */
  cell: number;
  phase: "bootstrap" | "task";
  /** The code (bounded), or a label for a bootstrap cell. */
  code: string;
}

export interface DatasetWire {
  path: string;
  sizeBytes: number;
  sha256: string;
  description?: string;
}

/** What a bug report needs; `settings` maps each key to `{value, source}`, `secrets` each secret's name to whether it is set (never its value). */
export interface DebugInfoResult {
  server: Record<string, unknown>;
  protocolVersion: number;
  client: Record<string, unknown>;
  stateDir: string;
  database: string;
  configDigest: string;
  settings: Record<string, unknown>;
  secrets: Record<string, unknown>;
  sessions: number;
  progressTokens: number;
  runningTurns: Array<Record<string, unknown>>;
  sandbox: DebugSandboxWire;
  models: DebugModelWire[];
}

/** One model role: its model and endpoint (`scheme://host:port/path`, never credentials), or why it is not configured. Not probed: `fleet/models/list` reaches the endpoint. */
export interface DebugModelWire {
  role: string;
  configured: boolean;
  model: string | null;
  endpoint: string | null;
  problem: string | null;
}

export interface DebugParams {
  sessionId?: string | null;
}

/** The sandbox backend and, for `local`, its isolation: `isolation` is `bwrap`, `none` (unisolated, allowed) or `refused`. */
export interface DebugSandboxWire {
  backend: string;
  isolation?: string;
  bwrapVersion?: string | null;
  cgroupPids?: boolean;
  cgroupMemory?: boolean;
  forkBound?: string | null;
  rlimits?: string[];
}

export interface GateCheckWire {
  name: string;
  passed: boolean;
  detail: string;
}

export interface HistoryParams {
  sessionId: string;
  limit?: number | null;
}

export interface HistoryResult {
  turns: TurnSummaryWire[];
}

/** One batch of typed decisions (triage, Skill selection or ``jev_decide_batched``), by Jev or by the sub LM; one budget unit per item, charged to ``category``. */
export interface JevDecisionPayload {
  /** routing, skill_selection or other_decisions. */
  category: string;
  backend: "jev" | "generative";
  model?: string | null;
  /** How many items were decided (= units charged). */
  items: number;
  ok: boolean;
  duration_ms: number;
  /** Why the Jev call failed (never the key). */
  error?: string | null;
  /** The Jev failure this sub-LM batch replaced. */
  fallback_from?: string | null;
  usage?: TokenUsage | null;
}

/** A model call ended. */
export interface LmEndPayload {
  call_id: string;
  model: string;
  category: string;
  duration_ms: number;
  ok: boolean;
  error_type?: string | null;
  usage?: TokenUsage | null;
}

/** A model call started (after its budget unit was charged). */
export interface LmStartPayload {
  call_id: string;
  model: string;
  /** The budget category, e.g. triage, generation, sub_query. */
  category: string;
}

/** A memory the user adds; it stays unreviewed (never shown to the model) until reviewed. `content` is bounded again by the store (4,000 characters after trimming). */
export interface MemoryAddParams {
  sessionId: string;
  content: string;
  kind?: string | null;
}

export interface MemoryAddResult {
  memory: MemoryWire;
}

export interface MemoryListParams {
  sessionId: string;
  reviewed?: boolean | null;
}

export interface MemoryListResult {
  memories: MemoryWire[];
  summary: string;
}

/** The Turn's code proposed an unreviewed memory (``workspace.remember``); it is committed with the Turn's outcome and reaches no model until a person reviews it. */
export interface MemoryProposedPayload {
  /** The memory's id (fleet/memory/review, reject). */
  memory_id: string;
  /** The name the code gave it (kept in its sources). */
  name: string;
  /** The memory's kind: "sandbox". */
  kind: string;
  /** The content's length in characters (the text is not sent). */
  chars: number;
}

/** Reject a memory: it is deleted and never reaches the model. */
export interface MemoryRejectParams {
  sessionId: string;
  memoryId: string;
}

export interface MemoryReviewParams {
  sessionId: string;
  memoryId: string;
  reviewed?: boolean | null;
}

export interface MemoryWire {
  memoryId: string;
  kind: string;
  content: string;
  sources: Record<string, unknown>;
  reviewed: boolean;
  createdAt: string;
}

export interface ModelWire {
  id: string;
  ownedBy: string | null;
}

/** `refresh` asks the endpoint again instead of the runtime's one-minute cache. */
export interface ModelsListParams {
  refresh?: boolean | null;
}

/** The endpoint's models (sorted by id, at most 1,000); `cached` when the runtime answered from its cache, `fetchedAt` (ISO-8601) when the endpoint did. */
export interface ModelsListResult {
  models: ModelWire[];
  cached: boolean;
  fetchedAt: string;
}

/** A DSPy module ended. */
export interface ModuleEndPayload {
  call_id: string;
  module: string;
  duration_ms: number;
  ok: boolean;
  error_type?: string | null;
}

/** A DSPy module started. */
export interface ModuleStartPayload {
  call_id: string;
  /** The module's class name. */
  module: string;
  /** The RLM/Flex iteration, e.g. '2/16'. */
  iteration?: string | null;
}

/** Approve a candidate (`fleet/optimize/status` lists them): the same re-checks as `fleet-lsp optimize --approve`; the next Turn serves it. */
export interface OptimizeApproveParams {
  sessionId: string;
  version: string;
}

/** A GEPA run for the Session's program. `budget` (default `light`) or `maxMetricCalls` bound the search's rollouts only: reflection, judging and the final validation (6 × (dev + holdout) Turn replays) come on top. Cancellable through `$/cancelRequest` and `window/workDoneProgress/cancel` on its token. */
export interface OptimizeRunParams {
  sessionId: string;
  budget?: "light" | "medium" | "heavy" | null;
  maxMetricCalls?: number | null;
  seed?: number | null;
  workDoneToken?: number | string | null;
}

/** The saved (inactive) candidate; `gatePassed: false` candidates cannot be approved. `rollouts` counts the search's and the validation's Turn replays, `hostSeconds` their wall time. */
export interface OptimizeRunResult {
  sessionId: string;
  version: string;
  gatePassed: boolean;
  gate: GateCheckWire[];
  changedComponents: string[];
  candidateDigest: string;
  reportUri: string;
  rollouts: number;
  hostSeconds: number;
  datasetSizes: Record<string, number>;
  mlflowRunId: string | null;
  notes: string[];
}

/** `activeDigest` is the built-in default program's when nothing was approved (`activeVersion` is then `null`). Candidates oldest first. */
export interface OptimizeStatusResult {
  sessionId: string;
  activeDigest: string;
  activeVersion: string | null;
  candidates: CandidateWire[];
}

/** Why an outcome is not ``submitted``: a kind, how many times, and a line saying what. */
export interface OutcomeReason {
  kind: "iterations_exhausted" | "sandbox_errors" | "child_failed" | "fallback_answer" | "error_answer" | "turn_failed" | "format_unmet";
  count?: number;
  detail?: string;
}

/** Why an outcome is not `submitted` (`fleet_core.models.OutcomeReason`). */
export interface OutcomeReasonWire {
  kind: "iterations_exhausted" | "sandbox_errors" | "child_failed" | "fallback_answer" | "error_answer" | "turn_failed" | "format_unmet";
  count: number;
  detail: string;
}

/** Where a promoted artifact came from. */
export interface ProvenanceRecord {
  path: string;
  rootPath: string;
  sha256: string;
  sizeBytes: number;
  agentId: string;
  sourceSandbox?: string | null;
  parentChain?: string[];
  turnId?: string | null;
}

/** Packages of the sandbox environment line are not installed (once per Session and process, at the first Turn that finds them missing). */
export interface SandboxEnvironmentIncompletePayload {
  /** The missing packages' distribution names. */
  missing: string[];
  /** The sandbox's Python version. */
  python: string;
}

export interface SessionDidChangeParams {
  sessionId: string;
  change: "created" | "updated" | "closed" | "deleted";
}

export interface SessionInfoWire {
  sessionId: string;
  mode: string;
  turnCount: number;
  createdAt: string;
  updatedAt: string;
  dataset?: DatasetWire;
  ownerHost?: string;
  ownerUser?: string;
}

/** `fleet/session/list`: one page, newest first. `cursor`: the previous page's `nextCursor` (opaque); `limit`: Sessions per page (default 100). The optional filters combine with AND: `ownerHost` / `ownerUser` (the host name and OS user that last created or took the Session), `updatedSince` (an ISO-8601 instant: Sessions updated at or after it). A `cursor` must be sent with the same filters as the page it came from. */
export interface SessionListParams {
  cursor?: string | null;
  limit?: number | null;
  ownerHost?: string | null;
  ownerUser?: string | null;
  updatedSince?: string | null;
}

/** One page; `nextCursor` (absent on the last page) asks for the next. */
export interface SessionListResult {
  sessions: SessionInfoWire[];
  nextCursor?: string;
}

/** The Session's stored selection (`null`: the configuration's model). */
export interface SessionModelsResult {
  sessionId: string;
  root: string | null;
  sub: string | null;
}

export interface SessionNewParams {
  sessionId?: string | null;
  mode?: "hybrid" | "rlm" | "flex" | null;
}

/** Methods that take just a Session: load, close, delete, clearDataset, lists. */
export interface SessionParams {
  sessionId: string;
}

export interface SetDatasetParams {
  sessionId: string;
  path: string;
  description?: string | null;
}

export interface SetModeParams {
  sessionId: string;
  mode: "hybrid" | "rlm" | "flex";
}

/** A Session's model ids per role; `null` or absent clears that role's selection (the configuration's model applies again). Model ids only: no endpoint, no key (the core refuses what looks like one). */
export interface SetModelsParams {
  sessionId: string;
  root?: string | null;
  sub?: string | null;
}

export interface SkillDecision {
  skill: string;
  decision: string | null;
  raw_choice?: string | null;
  probabilities?: Record<string, number>;
  confidence?: number | null;
  backend: string;
  model?: string | null;
}

/** The Turn's code saved a Session Skill (``save_skill``); the next Turn's catalog lists it. */
export interface SkillSavedPayload {
  /** The Skill's name. */
  name: string;
  /** The written file: skills/<name>/SKILL.md. */
  path: string;
  size_bytes: number;
  sha256: string;
  /** Whether it replaced a Skill of that name. */
  replaced: boolean;
}

/** Skill preloading (Jev only): the catalog entries classified and those appended. */
export interface SkillSelectionPayload {
  /** Skills whose SKILL.md was appended (at most 3). */
  selected: string[];
  decisions: SkillDecision[];
}

/** The Turn is stopping, or events were dropped (coalesced like budget_update). */
export interface StatusPayload {
  status: "stopping" | "events_dropped";
  /** Why it is stopping. */
  reason?: "cancelled" | "deadline" | "budget" | null;
  message?: string | null;
  /** How many events a slow consumer missed. */
  dropped?: number | null;
}

export interface TokenUsage {
  input_tokens?: number | null;
  output_tokens?: number | null;
}

/** A host tool call ended. */
export interface ToolCallEndPayload {
  call_id: string;
  tool: string;
  source: string;
  duration_ms: number;
  ok: boolean;
  error_type?: string | null;
  /** The output (bounded), when ok. */
  output?: unknown;
}

/** A host tool was called (DSPy tool callbacks). */
export interface ToolCallStartPayload {
  call_id: string;
  tool: string;
  /** Where the call came from: dspy. */
  source: string;
  /** The inputs (bounded). */
  inputs?: Record<string, unknown>;
}

/** `{traceId}` or `{turnId}` (one is required). */
export interface TraceGetParams {
  traceId?: string | null;
  turnId?: string | null;
}

/** A partial label update: fields left out keep their earlier values. `traceId` may also be a Turn id (its MLflow trace is labelled). `values` is a list of strings or numbers (an object's values are accepted too). `expectations` follows the structured-expectations schema v1 (docs/evaluation.md). `reviewer` is an addition. */
export interface TraceLabelParams {
  traceId: string;
  status?: "approved" | "benchmark" | "synthetic" | "rejected" | null;
  answer?: string | null;
  values?: unknown[] | Record<string, unknown> | null;
  route?: "direct" | "flex" | "rlm" | null;
  critical?: boolean | null;
  group?: string | null;
  expectations?: Record<string, unknown> | null;
  reviewer?: string | null;
}

/** `labels` uses the request's names: status, answer, values, route, critical, group, expectations, reviewer (every field, after the merge). */
export interface TraceLabelResult {
  traceId: string;
  turnId: string | null;
  sessionId: string | null;
  uri: string | null;
  labels: Record<string, unknown>;
  eligible: boolean;
  ineligibleReason: string | null;
  messages: string[];
}

export interface TraceListParams {
  sessionId: string;
  limit?: number | null;
}

export interface TraceListResult {
  traces: TraceSummaryWire[];
}

export interface TraceResult {
  traceId: string;
  turnId: string;
  sessionId: string;
  uri: string;
  markdown: string;
  source: "mlflow" | "store";
  note?: string;
}

export interface TraceSummaryWire {
  traceId: string;
  turnId: string;
  sessionId: string;
  uri: string;
  source: "mlflow" | "store";
  labelStatus?: "approved" | "benchmark" | "synthetic" | "rejected";
}

/** The route the Turn takes. */
export interface TriageDecisionPayload {
  mode: string;
  /** direct, flex or rlm. */
  route: string;
  /** session_mode, selected_context, routing_error, or null. */
  override_reason?: string | null;
  /** One readable sentence: the route and why. */
  summary: string;
  evidence?: TriageEvidence | null;
}

export interface TriageEvidence {
  /** The triage model's own label. */
  raw_choice?: string | null;
  /** How the route was chosen. */
  backend?: string | null;
  model?: string | null;
  effective_route?: string | null;
  override_reason?: string | null;
  error?: string | null;
  /** Jev's probability per route (backend jev only). */
  probabilities?: Record<string, number> | null;
  /** Jev's confidence (backend jev only). */
  confidence?: number | null;
  /** Why Jev could not triage, when the sub LM decided instead. */
  jev_error?: string | null;
}

export interface TurnCancelParams {
  turnId: string;
}

/** turn_completed, turn_failed, turn_cancelled: the Turn's ``TurnResult`` (camelCase). */
export interface TurnEndedPayload {
  turnId: string;
  sessionId: string;
  status: "completed" | "failed" | "cancelled";
  answer?: string;
  route?: string | null;
  learnedNote?: string | null;
  artifacts?: ArtifactRef[];
  traceId?: string | null;
  usage?: Usage;
  error?: TurnError | null;
  replayed?: boolean;
  durationSeconds?: number | null;
  artifactsOmitted?: number;
  compiledProgramDigest?: string;
  outcome?: AnswerOutcome | null;
}

export interface TurnError {
  kind: string;
  message: string;
  paths?: string[] | null;
  restored?: string[] | null;
}

export interface TurnErrorWire {
  kind: string;
  message: string;
  paths?: string[];
  restored?: string[];
}

/** A TurnEvent (version 1) as sent in fleet/turn/didEmit; generated from fleet_core.event_payloads (python -m fleet_core.event_payloads). */
export interface TurnEventBase {
  version?: 1;
  turnId: string;
  sessionId: string;
  seq: number;
  /** root, or a child agent's id */
  agentId: string;
  parentAgentId?: string;
  kind: "turn_started" | "triage_decision" | "module_start" | "module_end" | "lm_start" | "lm_end" | "code_cell" | "cell_output" | "tool_call_start" | "tool_call_end" | "child_spawned" | "child_finished" | "artifact" | "budget_update" | "status" | "sandbox_environment_incomplete" | "ungrounded_submit" | "memory_proposed" | "skill_saved" | "jev_decision" | "skill_selection" | "turn_completed" | "turn_failed" | "turn_cancelled";
  payload: Record<string, unknown>;
  at?: string;
}

export type TurnEvent =
  | TurnEventBase & { kind: "turn_started"; payload: TurnStartedPayload }
  | TurnEventBase & { kind: "triage_decision"; payload: TriageDecisionPayload }
  | TurnEventBase & { kind: "module_start"; payload: ModuleStartPayload }
  | TurnEventBase & { kind: "module_end"; payload: ModuleEndPayload }
  | TurnEventBase & { kind: "lm_start"; payload: LmStartPayload }
  | TurnEventBase & { kind: "lm_end"; payload: LmEndPayload }
  | TurnEventBase & { kind: "code_cell"; payload: CodeCellPayload }
  | TurnEventBase & { kind: "cell_output"; payload: CellOutputPayload }
  | TurnEventBase & { kind: "tool_call_start"; payload: ToolCallStartPayload }
  | TurnEventBase & { kind: "tool_call_end"; payload: ToolCallEndPayload }
  | TurnEventBase & { kind: "child_spawned"; payload: ChildSpawnedPayload }
  | TurnEventBase & { kind: "child_finished"; payload: ChildFinishedPayload }
  | TurnEventBase & { kind: "artifact"; payload: ArtifactPayload }
  | TurnEventBase & { kind: "budget_update"; payload: BudgetUpdatePayload }
  | TurnEventBase & { kind: "status"; payload: StatusPayload }
  | TurnEventBase & { kind: "sandbox_environment_incomplete"; payload: SandboxEnvironmentIncompletePayload }
  | TurnEventBase & { kind: "ungrounded_submit"; payload: UngroundedSubmitPayload }
  | TurnEventBase & { kind: "memory_proposed"; payload: MemoryProposedPayload }
  | TurnEventBase & { kind: "skill_saved"; payload: SkillSavedPayload }
  | TurnEventBase & { kind: "jev_decision"; payload: JevDecisionPayload }
  | TurnEventBase & { kind: "skill_selection"; payload: SkillSelectionPayload }
  | TurnEventBase & { kind: "turn_completed"; payload: TurnEndedPayload }
  | TurnEventBase & { kind: "turn_failed"; payload: TurnEndedPayload }
  | TurnEventBase & { kind: "turn_cancelled"; payload: TurnEndedPayload };

/** `fleet_core.models.TurnResult` on the wire (also the payload of the terminal events). */
export interface TurnResultWire {
  turnId: string;
  sessionId: string;
  status: "completed" | "failed" | "cancelled";
  answer: string;
  route?: string;
  learnedNote?: string;
  artifacts: ArtifactWire[];
  traceId?: string;
  usage: UsageWire;
  error?: TurnErrorWire;
  replayed?: boolean;
  durationSeconds?: number;
  artifactsOmitted?: number;
  compiledProgramDigest?: string;
  outcome?: AnswerOutcomeWire;
}

export interface TurnRunParams {
  sessionId: string;
  task: string;
  mode?: "hybrid" | "rlm" | "flex" | null;
  timeoutSeconds?: number | null;
  recordReplay?: boolean | null;
  idempotencyKey?: string | null;
  workDoneToken?: number | string | null;
}

/** The Turn started (root agent). */
export interface TurnStartedPayload {
  /** The task, at most 2000 characters. */
  task: string;
  /** The Session's execution mode: hybrid, rlm or flex. */
  mode: string;
}

/** A stored Turn; `durationSeconds`, `artifactPaths` (at most 50) and `artifactsOmitted` come from its stored result (absent while it runs). */
export interface TurnSummaryWire {
  turnId: string;
  seq: number;
  status: "running" | "completed" | "failed" | "cancelled";
  task: string;
  answer?: string;
  route?: string;
  learnedNote?: string;
  traceId?: string;
  createdAt: string;
  error?: TurnErrorWire;
  durationSeconds?: number;
  artifactPaths?: string[];
  artifactsOmitted?: number;
  outcome?: AnswerOutcomeWire;
}

/** A SUBMIT carried figures typed in its code that no output showed (engine/grounding.py); the agent's first 2 are rejected and returned to the model, later ones accepted and flagged. */
export interface UngroundedSubmitPayload {
  /** The submitting cell's number within its agent. */
  cell: number;
  /** The ungrounded figures as written (at most 20). */
  figures: string[];
  /** True: refused (counted in submitRejections); false: flagged. */
  rejected: boolean;
}

/** `fleet/artifact/read`: a `fleet:/` URI. */
export interface UriParams {
  uri: string;
}

export interface Usage {
  modelCalls?: number;
  sandboxErrors?: number;
  submitRejections?: number;
  inputTokens?: number | null;
  outputTokens?: number | null;
  callsByCategory?: Record<string, number>;
  jevDecisionsByCategory?: Record<string, number>;
  modelSeconds?: number | null;
  promptSeconds?: number | null;
  generationSeconds?: number | null;
  sandboxSeconds?: number | null;
  modelStartSeconds?: number | null;
}

/** What the host observed of a Turn (`fleet_core.models.Usage`). */
export interface UsageWire {
  modelCalls: number;
  sandboxErrors: number;
  submitRejections: number;
  inputTokens?: number;
  outputTokens?: number;
  callsByCategory?: Record<string, number>;
  jevDecisionsByCategory?: Record<string, number>;
  modelSeconds?: number;
  promptSeconds?: number;
  generationSeconds?: number;
  sandboxSeconds?: number;
  modelStartSeconds?: number;
}

export interface WorkspaceFileWire {
  path: string;
  sizeBytes: number;
  sha256: string;
}

/** `fleet/workspace/list`: one page of files in path order. `cursor`: the previous page's `nextCursor` (opaque); `limit`: files per page (default 500). */
export interface WorkspaceListParams {
  sessionId: string;
  cursor?: string | null;
  limit?: number | null;
}

/** One page of the files in path order (`artifacts/` ones under `artifacts`); `nextCursor` (absent on the last page) asks for the next. */
export interface WorkspaceListResult {
  files: WorkspaceFileWire[];
  artifacts: WorkspaceFileWire[];
  nextCursor?: string;
}

/** `fleet/workspace/delete`: one workspace file. */
export interface WorkspacePathParams {
  sessionId: string;
  path: string;
}

/** Every `fleet/*` request: its params and its result. */
export interface FleetRequests {
  "fleet/artifact/list": { params: SessionParams; result: ArtifactListResult };
  "fleet/artifact/open": { params: ArtifactOpenParams; result: ArtifactOpenResult };
  "fleet/artifact/read": { params: UriParams; result: ArtifactReadResult };
  "fleet/artifact/save": { params: ArtifactSaveParams; result: ArtifactSaveResult };
  "fleet/context/attach": { params: AttachParams; result: AttachResult };
  "fleet/context/clearDataset": { params: SessionParams; result: null };
  "fleet/context/setDataset": { params: SetDatasetParams; result: DatasetWire };
  "fleet/debug/info": { params: DebugParams; result: DebugInfoResult };
  "fleet/memory/add": { params: MemoryAddParams; result: MemoryAddResult };
  "fleet/memory/list": { params: MemoryListParams; result: MemoryListResult };
  "fleet/memory/reject": { params: MemoryRejectParams; result: null };
  "fleet/memory/review": { params: MemoryReviewParams; result: null };
  "fleet/models/list": { params: ModelsListParams; result: ModelsListResult };
  "fleet/optimize/approve": { params: OptimizeApproveParams; result: CandidateWire };
  "fleet/optimize/run": { params: OptimizeRunParams; result: OptimizeRunResult };
  "fleet/optimize/status": { params: SessionParams; result: OptimizeStatusResult };
  "fleet/session/close": { params: SessionParams; result: null };
  "fleet/session/delete": { params: SessionParams; result: null };
  "fleet/session/history": { params: HistoryParams; result: HistoryResult };
  "fleet/session/list": { params: SessionListParams; result: SessionListResult };
  "fleet/session/load": { params: SessionParams; result: SessionInfoWire };
  "fleet/session/new": { params: SessionNewParams; result: SessionInfoWire };
  "fleet/session/setMode": { params: SetModeParams; result: SessionInfoWire };
  "fleet/session/setModels": { params: SetModelsParams; result: SessionModelsResult };
  "fleet/trace/get": { params: TraceGetParams; result: TraceResult };
  "fleet/trace/label": { params: TraceLabelParams; result: TraceLabelResult };
  "fleet/trace/list": { params: TraceListParams; result: TraceListResult };
  "fleet/turn/cancel": { params: TurnCancelParams; result: null };
  "fleet/turn/run": { params: TurnRunParams; result: TurnResultWire };
  "fleet/workspace/delete": { params: WorkspacePathParams; result: null };
  "fleet/workspace/list": { params: WorkspaceListParams; result: WorkspaceListResult };
}

/** Every server -> client notification and its params. */
export interface FleetNotifications {
  "fleet/artifact/didChange": ArtifactDidChangeParams;
  "fleet/session/didChange": SessionDidChangeParams;
  "fleet/turn/didEmit": TurnEvent;
}

export type FleetMethod = keyof FleetRequests;
export type FleetParams<M extends FleetMethod> = FleetRequests[M]['params'];
export type FleetResult<M extends FleetMethod> = FleetRequests[M]['result'];
export type FleetNotification = keyof FleetNotifications;

export const FLEET_METHODS = [
  "fleet/artifact/list",
  "fleet/artifact/open",
  "fleet/artifact/read",
  "fleet/artifact/save",
  "fleet/context/attach",
  "fleet/context/clearDataset",
  "fleet/context/setDataset",
  "fleet/debug/info",
  "fleet/memory/add",
  "fleet/memory/list",
  "fleet/memory/reject",
  "fleet/memory/review",
  "fleet/models/list",
  "fleet/optimize/approve",
  "fleet/optimize/run",
  "fleet/optimize/status",
  "fleet/session/close",
  "fleet/session/delete",
  "fleet/session/history",
  "fleet/session/list",
  "fleet/session/load",
  "fleet/session/new",
  "fleet/session/setMode",
  "fleet/session/setModels",
  "fleet/trace/get",
  "fleet/trace/label",
  "fleet/trace/list",
  "fleet/turn/cancel",
  "fleet/turn/run",
  "fleet/workspace/delete",
  "fleet/workspace/list",
] as const;

/** `workspace/executeCommand` commands and the request each wraps. */
export const FLEET_COMMANDS = {
  "fleet.attachFile": "fleet/context/attach",
  "fleet.cancelTurn": "fleet/turn/cancel",
  "fleet.clearDataset": "fleet/context/clearDataset",
  "fleet.closeSession": "fleet/session/close",
  "fleet.labelTrace": "fleet/trace/label",
  "fleet.listSessions": "fleet/session/list",
  "fleet.loadSession": "fleet/session/load",
  "fleet.newSession": "fleet/session/new",
  "fleet.openArtifact": "fleet/artifact/open",
  "fleet.printDebugInformation": "fleet/debug/info",
  "fleet.runTurn": "fleet/turn/run",
  "fleet.saveArtifact": "fleet/artifact/save",
  "fleet.setDataset": "fleet/context/setDataset",
  "fleet.setMode": "fleet/session/setMode",
  "fleet.showTrace": "fleet/trace/get",
} as const satisfies Record<string, FleetMethod>;

/** Fleet error kinds and their JSON-RPC codes (`other`: any kind not listed). */
export const FLEET_ERROR_CODES = {
  ClientCapabilityMissing: -32068,
  ConfigError: -32063,
  DatasetChanged: -32056,
  FileTooLarge: -32054,
  IdempotencyConflict: -32059,
  InvalidInput: -32602,
  LabelInvalid: -32602,
  LabelSyncError: -32070,
  MemoryNotFound: -32061,
  ModelUnavailable: -32055,
  SandboxError: -32066,
  SandboxUnavailable: -32065,
  SessionExists: -32057,
  SessionLimit: -32072,
  SessionNotFound: -32050,
  SessionOwned: -32052,
  StoreError: -32064,
  TraceNotFound: -32062,
  TracingUnavailable: -32069,
  TurnBusy: -32051,
  TurnNotFound: -32058,
  UnsupportedProtocolVersion: -32067,
  WorkspaceFileNotFound: -32060,
  WorkspacePath: -32053,
  other: -32099,
} as const;
