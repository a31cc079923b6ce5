"""The fleet-lsp wire protocol (version 1): every ``fleet/*`` method, its params and result
shapes, the ``fleet.*`` commands, the notifications and the error codes.

This module is the single source of truth; ``docs/protocol.md`` documents it. It is cheap to
import (attrs and typing only) so the server can answer ``initialize`` before any heavy library
loads.

Params are attrs classes with snake_case attributes and camelCase JSON names; :func:`parse`
validates a raw JSON object into one, strictly (no silent coercion), and raises
:class:`ParamsError` with a message naming the offending field. Unknown fields are ignored so
newer clients keep working with older servers. :class:`InitializationOptions` is read the same
way, except that a bad option is reported and ignored (:func:`parse_options`).

Results are documented as ``TypedDict`` classes (the schema's source, ``RESULTS``). A handler
returns a typed reply: a core record (``TurnResult``, ...), one of the attrs ``*Reply`` models
below, or a result ``TypedDict``; :func:`to_wire` turns it into JSON, once, for every method.
"""

from __future__ import annotations

import json
import types
import typing
from typing import (
    TYPE_CHECKING,
    Any,
    Literal,
    NotRequired,
    TypedDict,
    TypeVar,
    Union,
    get_args,
    get_origin,
)

import attrs

from fleet_core import workspace
from fleet_core.modes import ExecutionMode, ReviewStatus, Route

if TYPE_CHECKING:
    from fleet_core.models import Memory, ProvenanceRecord, SessionInfo, TurnSummary, WorkspaceFile

T = TypeVar("T")
PROTOCOL_VERSION = 1
SERVER_NAME = "fleet-lsp"
URI_SCHEME = workspace.URI_SCHEME  # fleet:/ documents (built by fleet_core.workspace)

ProgressToken = int | str

# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------

INVALID_PARAMS = -32602
REQUEST_CANCELLED = -32800
INTERNAL_ERROR = -32603
#: JSON-RPC and LSP codes the transport and the lifecycle answer with (``data.kind`` in
#: parentheses): a body that is not UTF-8/JSON (``ParseError``) or a malformed frame header
#: (``FrameError``, then the connection closes); a message that is not a JSON-RPC request
#: (``InvalidRequest``), a frame over ``server.max_message_bytes`` (``MessageTooLarge``, then
#: the connection closes), a second ``initialize`` or a request after ``shutdown``
#: (``ShuttingDown``); a request before ``initialize`` (``ServerNotInitialized``).
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
SERVER_NOT_INITIALIZED = -32002
#: A second TCP client while one is connected (``ServerBusy``; its connection is closed).
SERVER_BUSY = -32071

#: Fleet error kinds (``FleetError.kind``) and their JSON-RPC codes, in -32050..-32099.
#: A kind missing from this table (e.g. a sandbox failure) is sent as ``FLEET_ERROR``
#: with its own ``data.kind``. ``InvalidInput`` is an invalid parameter and uses -32602.
ERROR_CODES: dict[str, int] = {
    "SessionNotFound": -32050,
    "TurnBusy": -32051,
    "SessionOwned": -32052,
    "WorkspacePath": -32053,
    "FileTooLarge": -32054,
    "ModelUnavailable": -32055,
    "DatasetChanged": -32056,
    "SessionExists": -32057,
    "TurnNotFound": -32058,
    "IdempotencyConflict": -32059,
    "WorkspaceFileNotFound": -32060,
    "MemoryNotFound": -32061,
    "TraceNotFound": -32062,
    "ConfigError": -32063,
    "StoreError": -32064,
    "SandboxUnavailable": -32065,
    "SandboxError": -32066,
    "UnsupportedProtocolVersion": -32067,
    "ClientCapabilityMissing": -32068,
    "TracingUnavailable": -32069,
    "LabelSyncError": -32070,
    "SessionLimit": -32072,
    "InvalidInput": INVALID_PARAMS,
    "LabelInvalid": INVALID_PARAMS,
}
FLEET_ERROR = -32099


def error_code(kind: str) -> int:
    """The JSON-RPC code for a fleet error kind."""
    return ERROR_CODES.get(kind, FLEET_ERROR)


class ParamsError(ValueError):
    """Params that do not match the method's schema (sent as -32602 with this message)."""


# ---------------------------------------------------------------------------------------------
# Params (client -> server)
# ---------------------------------------------------------------------------------------------


def _f(
    default: Any = attrs.NOTHING,
    *,
    json: str | None = None,
    min: float | None = None,
    max: float | None = None,
    min_len: int | None = None,
    max_len: int | None = None,
) -> Any:
    """An attrs field with wire metadata: JSON name override and bounds."""
    meta = {"json": json, "min": min, "max": max, "min_len": min_len, "max_len": max_len}
    return attrs.field(default=default, metadata={k: v for k, v in meta.items() if v is not None})


def _session_id(default: Any = attrs.NOTHING) -> Any:
    """A Session id field: 1 to 64 characters."""
    return _f(default, min_len=1, max_len=64)


@attrs.frozen(kw_only=True)
class NoParams:
    """Methods without parameters (``{}`` or absent)."""


@attrs.frozen(kw_only=True)
class SessionNewParams:
    session_id: str | None = _session_id(None)
    mode: ExecutionMode | None = _f(None)  # noqa: RUF009


@attrs.frozen(kw_only=True)
class SessionParams:
    """Methods that take just a Session: load, close, delete, clearDataset, lists."""

    session_id: str = _session_id()


@attrs.frozen(kw_only=True)
class SessionListParams:
    """``fleet/session/list``: one page, newest first. ``cursor``: the previous page's
    ``nextCursor`` (opaque); ``limit``: Sessions per page (default 100). The optional filters
    combine with AND: ``ownerHost`` / ``ownerUser`` (the host name and OS user that last created
    or took the Session), ``updatedSince`` (an ISO-8601 instant: Sessions updated at or after
    it). A ``cursor`` must be sent with the same filters as the page it came from."""

    cursor: str | None = _f(None, min_len=1, max_len=4096)
    limit: int | None = _f(None, min=1, max=500)
    owner_host: str | None = _f(None, min_len=1, max_len=255)
    owner_user: str | None = _f(None, min_len=1, max_len=255)
    updated_since: str | None = _f(None, min_len=1, max_len=64)


@attrs.frozen(kw_only=True)
class WorkspaceListParams:
    """``fleet/workspace/list``: one page of files in path order. ``cursor``: the previous
    page's ``nextCursor`` (opaque); ``limit``: files per page (default 500)."""

    session_id: str = _session_id()
    cursor: str | None = _f(None, min_len=1, max_len=4096)
    limit: int | None = _f(None, min=1, max=1000)


@attrs.frozen(kw_only=True)
class SetModeParams:
    session_id: str = _session_id()
    mode: ExecutionMode = _f()  # noqa: RUF009


@attrs.frozen(kw_only=True)
class HistoryParams:
    session_id: str = _session_id()
    limit: int | None = _f(None, min=1, max=1000)


@attrs.frozen(kw_only=True)
class AttachParams:
    """Attach a local file, a folder (with ignore rules and bounds) or a text selection.

    Exactly one of ``uri`` (``file:///...``, a file or a folder) and ``text`` (a selection,
    written to ``as`` which is then required).
    """

    session_id: str = _session_id()
    uri: str | None = _f(None, min_len=1, max_len=8192)
    as_: str | None = _f(None, json="as", min_len=1, max_len=1024)
    text: str | None = _f(None, max_len=25_000_000)
    exclude: list[str] | None = _f(None)  # noqa: RUF009
    max_files: int | None = _f(None, min=1, max=100_000)
    max_bytes: int | None = _f(None, min=1, max=1 << 40)


@attrs.frozen(kw_only=True)
class SetDatasetParams:
    session_id: str = _session_id()
    path: str = _f(min_len=1, max_len=1024)
    description: str | None = _f(None, max_len=2000)


@attrs.frozen(kw_only=True)
class WorkspacePathParams:
    """``fleet/workspace/delete``: one workspace file."""

    session_id: str = _session_id()
    path: str = _f(min_len=1, max_len=1024)


def _turn_timeout(_instance: Any, _attribute: Any, value: int | None) -> None:
    """``timeoutSeconds``: the core's one rule (``fleet_core.config.TURN_TIMEOUT_RULE``)."""
    from fleet_core.config import turn_timeout_problem  # loaded by then; keeps this module light

    if value is not None and (problem := turn_timeout_problem(value)) is not None:
        raise ParamsError(f"'timeoutSeconds' must be {problem}; got {value}")


@attrs.frozen(kw_only=True)
class TurnRunParams:
    session_id: str = _session_id()
    task: str = _f(min_len=1, max_len=100_000)
    mode: ExecutionMode | None = _f(None)  # noqa: RUF009
    timeout_seconds: int | None = attrs.field(default=None, validator=_turn_timeout)
    record_replay: bool = _f(False)
    idempotency_key: str | None = _f(None, min_len=1, max_len=128)
    work_done_token: ProgressToken | None = _f(None)  # noqa: RUF009


@attrs.frozen(kw_only=True)
class TurnCancelParams:
    turn_id: str = _f(min_len=1, max_len=128)


@attrs.frozen(kw_only=True)
class UriParams:
    """``fleet/artifact/read``: a ``fleet:/`` URI."""

    uri: str = _f(min_len=1, max_len=8192)


@attrs.frozen(kw_only=True)
class ArtifactOpenParams:
    uri: str = _f(min_len=1, max_len=8192)
    take_focus: bool = _f(True)


@attrs.frozen(kw_only=True)
class ArtifactSaveParams:
    uri: str = _f(min_len=1, max_len=8192)
    target: str = _f(min_len=1, max_len=8192)


@attrs.frozen(kw_only=True)
class TraceGetParams:
    """``{traceId}`` or ``{turnId}`` (one is required)."""

    trace_id: str | None = _f(None, min_len=1, max_len=256)
    turn_id: str | None = _f(None, min_len=1, max_len=128)


@attrs.frozen(kw_only=True)
class TraceListParams:
    session_id: str = _session_id()
    limit: int | None = _f(None, min=1, max=1000)


LabelStatus = ReviewStatus


@attrs.frozen(kw_only=True)
class TraceLabelParams:
    """A partial label update: fields left out keep their earlier values.

    ``traceId`` may also be a Turn id (its MLflow trace is labelled). ``values`` is a list of
    strings or numbers (an object's values are accepted too). ``expectations`` follows the
    structured-expectations schema v1 (docs/evaluation.md). ``reviewer`` is an addition.
    """

    trace_id: str = _f(min_len=1, max_len=256)
    status: LabelStatus | None = _f(None)  # noqa: RUF009
    answer: str | None = _f(None, min_len=1, max_len=100_000)
    values: list[Any] | dict[str, Any] | None = _f(None, max_len=100)  # noqa: RUF009
    route: Route | None = _f(None)  # noqa: RUF009
    critical: bool | None = _f(None)
    group: str | None = _f(None, min_len=1, max_len=200)
    expectations: dict[str, Any] | None = _f(None)  # noqa: RUF009
    reviewer: str | None = _f(None, min_len=1, max_len=200)


@attrs.frozen(kw_only=True)
class MemoryListParams:
    session_id: str = _session_id()
    reviewed: bool | None = _f(None)


@attrs.frozen(kw_only=True)
class MemoryReviewParams:
    session_id: str = _session_id()
    memory_id: str = _f(min_len=1, max_len=128)
    reviewed: bool = _f(True)


@attrs.frozen(kw_only=True)
class MemoryAddParams:
    """A memory the user adds; it stays unreviewed (never shown to the model) until reviewed.

    ``content`` is bounded again by the store (4,000 characters after trimming)."""

    session_id: str = _session_id()
    content: str = _f(min_len=1, max_len=100_000)
    kind: str = _f("user", min_len=1, max_len=32)


@attrs.frozen(kw_only=True)
class MemoryRejectParams:
    """Reject a memory: it is deleted and never reaches the model."""

    session_id: str = _session_id()
    memory_id: str = _f(min_len=1, max_len=128)


@attrs.frozen(kw_only=True)
class ModelsListParams:
    """``refresh`` asks the endpoint again instead of the runtime's one-minute cache."""

    refresh: bool = _f(False)


@attrs.frozen(kw_only=True)
class SetModelsParams:
    """A Session's model ids per role; ``null`` or absent clears that role's selection (the
    configuration's model applies again). Model ids only: no endpoint, no key (the core refuses
    what looks like one)."""

    session_id: str = _session_id()
    root: str | None = _f(None, min_len=1, max_len=200)
    sub: str | None = _f(None, min_len=1, max_len=200)


GepaBudget = Literal["light", "medium", "heavy"]


@attrs.frozen(kw_only=True)
class OptimizeRunParams:
    """A GEPA run for the Session's program. ``budget`` (default ``light``) or
    ``maxMetricCalls`` bound the search's rollouts only: reflection, judging and the final
    validation (6 × (dev + holdout) Turn replays) come on top. Cancellable through
    ``$/cancelRequest`` and ``window/workDoneProgress/cancel`` on its token."""

    session_id: str = _session_id()
    budget: GepaBudget | None = _f(None)  # noqa: RUF009
    max_metric_calls: int | None = _f(None, min=1, max=100_000)
    seed: int | None = _f(None, min=0, max=2**31 - 1)
    work_done_token: ProgressToken | None = _f(None)  # noqa: RUF009


@attrs.frozen(kw_only=True)
class OptimizeApproveParams:
    """Approve a candidate (``fleet/optimize/status`` lists them): the same re-checks as
    ``fleet-lsp optimize --approve``; the next Turn serves it."""

    session_id: str = _session_id()
    version: str = _f(min_len=1, max_len=128)


@attrs.frozen(kw_only=True)
class DebugParams:
    session_id: str | None = _session_id(None)


# ---------------------------------------------------------------------------------------------
# Initialization options (client -> server, once, in ``initialize``)
# ---------------------------------------------------------------------------------------------

#: Where the options sit in ``initialize``'s params; messages name options by this path.
OPTIONS_PATH = "initializationOptions.fleet"


@attrs.frozen(kw_only=True)
class InitializationOptions:
    """``initializationOptions.fleet``: who the client is and what it wants. ``settings`` are
    configuration overrides (the keys of ``config/fleet.toml``, validated when the runtime
    opens); ``workspace/didChangeConfiguration`` replaces them later."""

    protocol_version: int = _f(PROTOCOL_VERSION)
    client: str | None = _f(None, min_len=1, max_len=200)
    turn_events: bool = _f(False)
    settings: dict[str, Any] = _f(attrs.Factory(dict))  # noqa: RUF009

    @classmethod
    def read(cls, initialization_options: Any) -> tuple[InitializationOptions, list[str]]:
        """The options of ``initialize`` and one message per option ignored because it is
        invalid (absent options, or no ``fleet`` key, are the defaults and no problem)."""
        raw = initialization_options
        if raw is None or (isinstance(raw, dict) and raw.get("fleet") is None):
            return cls(), []
        if not isinstance(raw, dict):
            kind = _json_type(raw)
            return cls(), [f"'initializationOptions' must be an object, got {kind}; it is ignored"]
        fleet = raw["fleet"]
        if isinstance(fleet, dict) and fleet.get("settings") == []:
            fleet = {**fleet, "settings": {}}  # Neovim sends an empty Lua table as []
        return parse_options(cls, fleet, OPTIONS_PATH)


def changed_settings(settings: Any) -> dict[str, Any] | None:
    """The overrides a ``workspace/didChangeConfiguration`` brings (they replace
    ``InitializationOptions.settings``): ``settings.fleet`` (as VS Code sends them),
    ``settings.fleet.settings`` (the shape of the initialization options) or ``settings``;
    None when it is none of these (another tool's change)."""
    if not isinstance(settings, dict):
        return None
    fleet = settings.get("fleet", settings)
    if isinstance(fleet, dict) and isinstance(fleet.get("settings"), dict):
        fleet = fleet["settings"]
    return fleet if isinstance(fleet, dict) else None


# ---------------------------------------------------------------------------------------------
# Results (server -> client), documented shapes
# ---------------------------------------------------------------------------------------------


class DatasetWire(TypedDict):
    path: str
    sizeBytes: int
    sha256: str
    description: NotRequired[str]


class SessionInfoWire(TypedDict):
    sessionId: str
    mode: str
    turnCount: int
    createdAt: str
    updatedAt: str
    dataset: NotRequired[DatasetWire]
    # the host name and OS user that last created or took the Session (absent on older ones)
    ownerHost: NotRequired[str]
    ownerUser: NotRequired[str]


class WorkspaceFileWire(TypedDict):
    path: str
    sizeBytes: int
    sha256: str


class AttachResult(WorkspaceFileWire):
    """A file attach returns the ``WorkspaceFile``; a folder attach adds what it copied."""

    files: NotRequired[list[WorkspaceFileWire]]
    skipped: NotRequired[list[str]]


class ArtifactWire(TypedDict):
    uri: str
    path: str
    sizeBytes: int
    sha256: str
    turnId: NotRequired[str]
    agentId: NotRequired[str]
    provenance: NotRequired[list[dict[str, Any]]]


class ArtifactReadResult(TypedDict):
    uri: str
    text: str
    languageId: NotRequired[str]
    sizeBytes: int
    sha256: str
    binary: bool


class TraceResult(TypedDict):
    traceId: str
    turnId: str
    sessionId: str
    uri: str
    markdown: str
    source: Literal["mlflow", "store"]
    note: NotRequired[str]


class TraceLabelResult(TypedDict):
    """``labels`` uses the request's names: status, answer, values, route, critical, group,
    expectations, reviewer (every field, after the merge)."""

    traceId: str
    turnId: str | None
    sessionId: str | None
    uri: str | None
    labels: dict[str, Any]
    eligible: bool
    ineligibleReason: str | None
    messages: list[str]


class MemoryWire(TypedDict):
    memoryId: str
    kind: str
    content: str
    sources: dict[str, Any]
    reviewed: bool
    createdAt: str


class MemoryListResult(TypedDict):
    memories: list[MemoryWire]
    summary: str


class MemoryAddResult(TypedDict):
    memory: MemoryWire


class UsageWire(TypedDict):
    """What the host observed of a Turn (``fleet_core.models.Usage``)."""

    modelCalls: int
    sandboxErrors: int
    submitRejections: int
    inputTokens: NotRequired[int]
    outputTokens: NotRequired[int]
    callsByCategory: NotRequired[dict[str, int]]
    jevDecisionsByCategory: NotRequired[dict[str, int]]
    # where the Turn's time went (docs/local-model.md#where-a-turns-time-goes)
    modelSeconds: NotRequired[float]
    promptSeconds: NotRequired[float]
    generationSeconds: NotRequired[float]
    sandboxSeconds: NotRequired[float]
    modelStartSeconds: NotRequired[float]


class OutcomeReasonWire(TypedDict):
    """Why an outcome is not ``submitted`` (``fleet_core.models.OutcomeReason``)."""

    kind: Literal[
        "iterations_exhausted",
        "sandbox_errors",
        "child_failed",
        "fallback_answer",
        "error_answer",
        "turn_failed",
        "format_unmet",
    ]
    count: int
    detail: str


class AnswerOutcomeWire(TypedDict):
    """How the Turn's answer was reached (``fleet_core.models.AnswerOutcome``): ``submitted``
    is a clean success; anything else is shown as "completed with errors" (or failed)."""

    kind: Literal["submitted", "extracted", "partial", "failed"]
    reasons: list[OutcomeReasonWire]


class TurnResultWire(TypedDict):
    """``fleet_core.models.TurnResult`` on the wire (also the payload of the terminal events)."""

    turnId: str
    sessionId: str
    status: Literal["completed", "failed", "cancelled"]
    answer: str
    route: NotRequired[str]
    learnedNote: NotRequired[str]
    artifacts: list[ArtifactWire]
    traceId: NotRequired[str]
    usage: UsageWire
    error: NotRequired[TurnErrorWire]
    replayed: NotRequired[bool]
    durationSeconds: NotRequired[float]
    artifactsOmitted: NotRequired[int]
    compiledProgramDigest: NotRequired[str]
    outcome: NotRequired[AnswerOutcomeWire]  # absent on results stored before outcomes


class SessionListResult(TypedDict):
    """One page; ``nextCursor`` (absent on the last page) asks for the next."""

    sessions: list[SessionInfoWire]
    nextCursor: NotRequired[str]


class TurnErrorWire(TypedDict):
    kind: str
    message: str
    paths: NotRequired[list[str]]  # interrupted: the files it changed, maybe incomplete
    restored: NotRequired[list[str]]  # interrupted: those put back to their committed bytes


class TurnSummaryWire(TypedDict):
    """A stored Turn; `durationSeconds`, `artifactPaths` (at most 50) and `artifactsOmitted`
    come from its stored result (absent while it runs)."""

    turnId: str
    seq: int
    status: Literal["running", "completed", "failed", "cancelled"]
    task: str
    answer: NotRequired[str]
    route: NotRequired[str]
    learnedNote: NotRequired[str]
    traceId: NotRequired[str]
    createdAt: str
    error: NotRequired[TurnErrorWire]
    durationSeconds: NotRequired[float]
    artifactPaths: NotRequired[list[str]]
    artifactsOmitted: NotRequired[int]
    outcome: NotRequired[AnswerOutcomeWire]  # from the stored result, when it has one


class HistoryResult(TypedDict):
    turns: list[TurnSummaryWire]


class WorkspaceListResult(TypedDict):
    """One page of the files in path order (``artifacts/`` ones under ``artifacts``);
    ``nextCursor`` (absent on the last page) asks for the next."""

    files: list[WorkspaceFileWire]
    artifacts: list[WorkspaceFileWire]
    nextCursor: NotRequired[str]


class ArtifactListResult(TypedDict):
    artifacts: list[ArtifactWire]


class ArtifactOpenResult(TypedDict):
    shown: bool
    uri: str


class ArtifactSaveResult(TypedDict):
    target: str
    sizeBytes: int
    sha256: str


class TraceSummaryWire(TypedDict):
    traceId: str
    turnId: str
    sessionId: str
    uri: str
    source: Literal["mlflow", "store"]
    labelStatus: NotRequired[LabelStatus]  # the trace's review status, when it is labelled


class TraceListResult(TypedDict):
    traces: list[TraceSummaryWire]


class DebugInfoResult(TypedDict):
    """What a bug report needs; ``settings`` maps each key to ``{value, source}``, ``secrets``
    each secret's name to whether it is set (never its value)."""

    server: dict[str, Any]
    protocolVersion: int
    client: dict[str, Any]
    stateDir: str
    database: str
    configDigest: str
    settings: dict[str, Any]
    secrets: dict[str, Any]
    sessions: int
    progressTokens: int
    runningTurns: list[dict[str, Any]]
    sandbox: DebugSandboxWire
    models: list[DebugModelWire]


class DebugSandboxWire(TypedDict):
    """The sandbox backend and, for ``local``, its isolation: ``isolation`` is ``bwrap``,
    ``none`` (unisolated, allowed) or ``refused``."""

    backend: str
    isolation: NotRequired[str]
    bwrapVersion: NotRequired[str | None]
    cgroupPids: NotRequired[bool]
    cgroupMemory: NotRequired[bool]
    forkBound: NotRequired[str | None]
    rlimits: NotRequired[list[str]]


class DebugModelWire(TypedDict):
    """One model role: its model and endpoint (``scheme://host:port/path``, never credentials),
    or why it is not configured. Not probed: ``fleet/models/list`` reaches the endpoint."""

    role: str
    configured: bool
    model: str | None
    endpoint: str | None
    problem: str | None


class ModelWire(TypedDict):
    id: str
    ownedBy: str | None


class ModelsListResult(TypedDict):
    """The endpoint's models (sorted by id, at most 1,000); ``cached`` when the runtime answered
    from its cache, ``fetchedAt`` (ISO-8601) when the endpoint did."""

    models: list[ModelWire]
    cached: bool
    fetchedAt: str


class SessionModelsResult(TypedDict):
    """The Session's stored selection (``null``: the configuration's model)."""

    sessionId: str
    root: str | None
    sub: str | None


class GateCheckWire(TypedDict):
    name: str
    passed: bool
    detail: str


class CandidateWire(TypedDict):
    """A saved candidate: its gate verdict (recomputed from the stored observations when it was
    saved) and its report, a read-only ``fleet:/sessions/<id>/optimization/<version>.md``."""

    version: str
    createdAt: str
    gatePassed: bool
    gate: list[GateCheckWire]
    candidateDigest: str
    changedComponents: list[str]
    active: bool
    reportUri: str


def gate_wire(gate: list[tuple[str, bool, str]]) -> list[GateCheckWire]:
    """A gate verdict's checks (``CandidateInfo.gate``, ``OptimizationRun.gate``) on the wire."""
    return [{"name": name, "passed": passed, "detail": detail} for name, passed, detail in gate]


def candidate_wire(candidate: Any, report_uri: str) -> CandidateWire:
    """A ``fleet_core.api.CandidateInfo`` on the wire (the server and ``optimize --json``)."""
    return {
        "version": candidate.version,
        "createdAt": candidate.created_at,
        "gatePassed": candidate.gate_passed,
        "gate": gate_wire(candidate.gate),
        "candidateDigest": candidate.candidate_digest,
        "changedComponents": list(candidate.changed_components),
        "active": candidate.active,
        "reportUri": report_uri,
    }


class OptimizeStatusResult(TypedDict):
    """``activeDigest`` is the built-in default program's when nothing was approved
    (``activeVersion`` is then ``null``). Candidates oldest first."""

    sessionId: str
    activeDigest: str
    activeVersion: str | None
    candidates: list[CandidateWire]


class OptimizeRunResult(TypedDict):
    """The saved (inactive) candidate; ``gatePassed: false`` candidates cannot be approved.
    ``rollouts`` counts the search's and the validation's Turn replays, ``hostSeconds`` their
    wall time."""

    sessionId: str
    version: str
    gatePassed: bool
    gate: list[GateCheckWire]
    changedComponents: list[str]
    candidateDigest: str
    reportUri: str
    rollouts: int
    hostSeconds: float
    datasetSizes: dict[str, int]
    mlflowRunId: str | None
    notes: list[str]


class SessionDidChangeParams(TypedDict):
    sessionId: str
    change: Literal["created", "updated", "closed", "deleted"]


class ArtifactDidChangeParams(TypedDict):
    uri: str
    sessionId: str
    turnId: str


# ---------------------------------------------------------------------------------------------
# Replies: what handlers return (to_wire makes each the result shape above)
# ---------------------------------------------------------------------------------------------
# Fields are snake_case, sent under their camelCase names in this order. A field whose default is
# None is left out while it is None (``NotRequired`` in its TypedDict); a required field is
# always sent, ``null`` included.


@attrs.frozen
class SessionReply:
    """A ``SessionInfo`` as the protocol sends it: its model selections are server-side."""

    info: SessionInfo

    def wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = self.info.wire()
        wire.pop("selections", None)
        return wire


@attrs.frozen(kw_only=True)
class SessionListReply:
    sessions: list[SessionReply]
    next_cursor: str | None = None


@attrs.frozen(kw_only=True)
class HistoryReply:
    turns: list[TurnSummary]


@attrs.frozen(kw_only=True)
class FolderAttachReply:
    """A folder attach: the folder's path, total size and digest, and what it copied."""

    path: str
    size_bytes: int
    sha256: str
    files: list[WorkspaceFile]
    skipped: list[str]


@attrs.frozen(kw_only=True)
class WorkspaceListReply:
    files: list[WorkspaceFile]
    artifacts: list[WorkspaceFile]
    next_cursor: str | None = None


@attrs.frozen(kw_only=True)
class ArtifactEntry:
    """An artifact with, when it was promoted, its newest provenance record's Turn and agent."""

    uri: str
    path: str
    size_bytes: int
    sha256: str
    turn_id: str | None = None
    agent_id: str | None = None
    provenance: list[ProvenanceRecord] | None = None


@attrs.frozen(kw_only=True)
class ArtifactListReply:
    artifacts: list[ArtifactEntry]


@attrs.frozen(kw_only=True)
class ArtifactOpenReply:
    shown: bool
    uri: str


@attrs.frozen(kw_only=True)
class ArtifactSaveReply:
    target: str
    size_bytes: int
    sha256: str


@attrs.frozen(kw_only=True)
class TraceReply:
    trace_id: str
    turn_id: str
    session_id: str
    uri: str
    markdown: str
    source: Literal["mlflow", "store"]
    note: str | None = None


@attrs.frozen(kw_only=True)
class TraceEntry:
    trace_id: str
    turn_id: str
    session_id: str
    uri: str
    source: Literal["mlflow", "store"]
    label_status: LabelStatus | None = None


@attrs.frozen(kw_only=True)
class TraceListReply:
    traces: list[TraceEntry]


@attrs.frozen(kw_only=True)
class TraceLabelReply:
    """A label update's outcome; ``labels`` in the request's names (``labels_to_wire``)."""

    trace_id: str
    turn_id: str | None
    session_id: str | None
    labels: dict[str, Any]
    eligible: bool
    ineligible_reason: str | None
    messages: list[str]
    uri: str | None


@attrs.frozen(kw_only=True)
class MemoryListReply:
    memories: list[Memory]
    summary: str


@attrs.frozen(kw_only=True)
class MemoryAddReply:
    memory: Memory


@attrs.frozen(kw_only=True)
class OptimizeStatusReply:
    session_id: str
    active_digest: str
    active_version: str | None
    candidates: list[CandidateWire]


@attrs.frozen(kw_only=True)
class OptimizeRunReply:
    session_id: str
    version: str
    gate_passed: bool
    gate: list[GateCheckWire]
    changed_components: list[str]
    candidate_digest: str
    report_uri: str
    rollouts: int
    host_seconds: float
    dataset_sizes: dict[str, int]
    mlflow_run_id: str | None
    notes: list[str]


@attrs.frozen(kw_only=True)
class DebugInfoReply:
    server: dict[str, Any]
    protocol_version: int
    client: dict[str, Any]
    state_dir: str
    database: str
    config_digest: str
    settings: dict[str, Any]
    secrets: dict[str, Any]
    sessions: int
    progress_tokens: int
    running_turns: list[dict[str, Any]]
    sandbox: DebugSandboxWire
    models: list[DebugModelWire]


# ---------------------------------------------------------------------------------------------
# Method, command and notification tables
# ---------------------------------------------------------------------------------------------

#: Every ``fleet/*`` request and its params class.
METHODS: dict[str, type] = {
    "fleet/session/new": SessionNewParams,
    "fleet/session/load": SessionParams,
    "fleet/session/list": SessionListParams,
    "fleet/session/close": SessionParams,
    "fleet/session/delete": SessionParams,
    "fleet/session/setMode": SetModeParams,
    "fleet/session/history": HistoryParams,
    "fleet/session/setModels": SetModelsParams,
    "fleet/models/list": ModelsListParams,
    "fleet/context/attach": AttachParams,
    "fleet/context/setDataset": SetDatasetParams,
    "fleet/context/clearDataset": SessionParams,
    "fleet/workspace/list": WorkspaceListParams,
    "fleet/workspace/delete": WorkspacePathParams,
    "fleet/turn/run": TurnRunParams,
    "fleet/turn/cancel": TurnCancelParams,
    "fleet/artifact/list": SessionParams,
    "fleet/artifact/read": UriParams,
    "fleet/artifact/open": ArtifactOpenParams,
    "fleet/artifact/save": ArtifactSaveParams,
    "fleet/trace/get": TraceGetParams,
    "fleet/trace/list": TraceListParams,
    "fleet/trace/label": TraceLabelParams,
    "fleet/memory/list": MemoryListParams,
    "fleet/memory/review": MemoryReviewParams,
    "fleet/memory/add": MemoryAddParams,
    "fleet/memory/reject": MemoryRejectParams,
    "fleet/optimize/status": SessionParams,
    "fleet/optimize/run": OptimizeRunParams,
    "fleet/optimize/approve": OptimizeApproveParams,
    "fleet/debug/info": DebugParams,
}

#: The result shape of every ``fleet/*`` request (``None``: the result is ``null``). The JSON
#: Schema (``python -m fleet_lsp.schema``) is generated from ``METHODS`` and this table.
RESULTS: dict[str, Any] = {
    "fleet/session/new": SessionInfoWire,
    "fleet/session/load": SessionInfoWire,
    "fleet/session/list": SessionListResult,
    "fleet/session/close": None,
    "fleet/session/delete": None,
    "fleet/session/setMode": SessionInfoWire,
    "fleet/session/history": HistoryResult,
    "fleet/session/setModels": SessionModelsResult,
    "fleet/models/list": ModelsListResult,
    "fleet/context/attach": AttachResult,
    "fleet/context/setDataset": DatasetWire,
    "fleet/context/clearDataset": None,
    "fleet/workspace/list": WorkspaceListResult,
    "fleet/workspace/delete": None,
    "fleet/turn/run": TurnResultWire,
    "fleet/turn/cancel": None,
    "fleet/artifact/list": ArtifactListResult,
    "fleet/artifact/read": ArtifactReadResult,
    "fleet/artifact/open": ArtifactOpenResult,
    "fleet/artifact/save": ArtifactSaveResult,
    "fleet/trace/get": TraceResult,
    "fleet/trace/list": TraceListResult,
    "fleet/trace/label": TraceLabelResult,
    "fleet/memory/list": MemoryListResult,
    "fleet/memory/review": None,
    "fleet/memory/add": MemoryAddResult,
    "fleet/memory/reject": None,
    "fleet/optimize/status": OptimizeStatusResult,
    "fleet/optimize/run": OptimizeRunResult,
    "fleet/optimize/approve": CandidateWire,
    "fleet/debug/info": DebugInfoResult,
}

#: ``workspace/executeCommand`` commands: each takes one object argument and wraps a request.
COMMANDS: dict[str, str] = {
    "fleet.newSession": "fleet/session/new",
    "fleet.loadSession": "fleet/session/load",
    "fleet.listSessions": "fleet/session/list",
    "fleet.closeSession": "fleet/session/close",
    "fleet.attachFile": "fleet/context/attach",
    "fleet.setDataset": "fleet/context/setDataset",
    "fleet.clearDataset": "fleet/context/clearDataset",
    "fleet.runTurn": "fleet/turn/run",
    "fleet.cancelTurn": "fleet/turn/cancel",
    "fleet.setMode": "fleet/session/setMode",
    "fleet.openArtifact": "fleet/artifact/open",
    "fleet.saveArtifact": "fleet/artifact/save",
    "fleet.showTrace": "fleet/trace/get",
    "fleet.labelTrace": "fleet/trace/label",
    "fleet.printDebugInformation": "fleet/debug/info",
}

NOTIFY_TURN_EVENT = "fleet/turn/didEmit"
NOTIFY_SESSION_CHANGE = "fleet/session/didChange"
NOTIFY_ARTIFACT_CHANGE = "fleet/artifact/didChange"

#: Server -> client notifications and their params (``fleet/turn/didEmit``'s params are the
#: TurnEvent of ``fleet_core.event_payloads``, one payload model per kind).
NOTIFICATIONS: dict[str, Any] = {
    NOTIFY_TURN_EVENT: "TurnEvent",
    NOTIFY_SESSION_CHANGE: SessionDidChangeParams,
    NOTIFY_ARTIFACT_CHANGE: ArtifactDidChangeParams,
}

#: Advertised in ``capabilities.experimental.fleet.features``.
FEATURES: tuple[str, ...] = (
    "sessions",
    "sessions.paging",
    "sessions.filter",
    "context.attachFolder",
    "context.attachSelection",
    "workspace.delete",
    "workspace.paging",
    "turns",
    "turns.progress",
    "turns.childProgress",
    "turns.didEmit",
    "turns.cancel",
    "artifacts",
    "artifacts.textDocumentContent",
    "traces",
    "traces.list",
    "traces.label",
    "memory",
    "optimize",
    "models",
    "settings",
)


# ---------------------------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------------------------


def json_name(field: attrs.Attribute[Any]) -> str:
    explicit = field.metadata.get("json")
    if explicit:
        return str(explicit)
    head, *tail = field.name.split("_")
    return head + "".join(part.title() for part in tail)


def wire_fields(cls: type) -> list[str]:
    """The camelCase JSON names of a params class."""
    return [json_name(f) for f in attrs.fields(cls)]


def parse(cls: type[T], raw: Any) -> T:
    """Validate a JSON value into ``cls``; :class:`ParamsError` names the first problem."""
    if raw is None:
        raw = {}
    if isinstance(raw, tuple) and hasattr(raw, "_asdict"):  # pygls' untyped namedtuples
        raw = _namedtuple_to_dict(raw)
    if not isinstance(raw, dict):
        raise ParamsError(f"params must be a JSON object, got {_json_type(raw)}")
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for field in attrs.fields(cls):  # type: ignore[arg-type]
        name = json_name(field)
        if name not in raw or (raw[name] is None and field.default is not attrs.NOTHING):
            if field.default is attrs.NOTHING:
                raise ParamsError(f"'{name}' is required{_expected(hints[field.name])}")
            continue
        values[field.name] = _check(name, raw[name], hints[field.name], field.metadata)
    return cls(**values)


def parse_options(cls: type[T], raw: Any, where: str) -> tuple[T, list[str]]:
    """Validate a JSON object into ``cls`` (every field has a default) as :func:`parse` does,
    except that an invalid field is ignored: its default applies and its problem, named by
    ``where``, is returned (one message per field)."""
    defaults = cls()
    if not isinstance(raw, dict):
        return defaults, [f"'{where}' must be an object, got {_json_type(raw)}; it is ignored"]
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    problems: list[str] = []
    for field in attrs.fields(cls):  # type: ignore[arg-type]
        name = json_name(field)
        if raw.get(name) is None:
            continue
        try:
            values[field.name] = _check(
                f"{where}.{name}", raw[name], hints[field.name], field.metadata
            )
        except ParamsError as exc:
            default = getattr(defaults, field.name)
            kept = "it is ignored" if default is None else f"using {json.dumps(default)} instead"
            problems.append(f"{exc}; {kept}")
    return cls(**values), problems


def to_wire(value: Any) -> Any:
    """A handler's reply as JSON, the one serialization of every ``fleet/*`` result: JSON values
    and TypedDicts as they are, records (and replies) with a ``wire()`` method by it, the other
    replies by their fields (see *Replies* above), lists item by item."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    wire = getattr(value, "wire", None)
    if callable(wire):
        return wire()
    if attrs.has(type(value)):
        return _reply_wire(value)
    if isinstance(value, list | tuple):
        return [to_wire(item) for item in value]
    if isinstance(value, dict):
        return {key: to_wire(item) for key, item in value.items()}
    raise TypeError(f"no wire form for {type(value).__name__}")  # a handler's bug


def _reply_wire(reply: Any) -> dict[str, Any]:
    wire: dict[str, Any] = {}
    for field in attrs.fields(type(reply)):
        value = getattr(reply, field.name)
        if value is not None or field.default is not None:
            wire[json_name(field)] = to_wire(value)
    return wire


def _namedtuple_to_dict(value: Any) -> Any:
    if isinstance(value, tuple) and hasattr(value, "_asdict"):
        return {k: _namedtuple_to_dict(v) for k, v in value._asdict().items()}
    if isinstance(value, list | tuple):
        return [_namedtuple_to_dict(v) for v in value]
    return value


def _expected(tp: Any) -> str:
    described = _describe_type(tp)
    return f" ({described})" if described else ""


def _describe_type(tp: Any) -> str:
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        parts = [_describe_type(a) for a in get_args(tp) if a is not type(None)]
        return " or ".join(p for p in parts if p)
    if origin is Literal:
        return "one of: " + ", ".join(repr(a) for a in get_args(tp))
    if origin is list:
        return "a list of strings" if get_args(tp) == (str,) else "a list"
    if origin is dict:
        return "an object"
    return {str: "a string", int: "an integer", bool: "true or false", float: "a number"}.get(
        tp, ""
    )


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _check(name: str, value: Any, tp: Any, meta: Any) -> Any:
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        options = [a for a in get_args(tp) if a is not type(None)]
        problems: dict[Any, ParamsError] = {}
        for option in options:
            try:
                return _check(name, value, option, meta)
            except ParamsError as exc:
                problems[get_origin(option) or option] = exc
        shape = list if isinstance(value, list) else dict if isinstance(value, dict) else None
        if len(options) == 1 or shape in problems:  # the option of its shape says precisely why
            raise problems.get(shape) or next(iter(problems.values()))
        raise ParamsError(f"'{name}' must be {_describe_type(tp)}, got {_json_type(value)}")
    if origin is Literal:
        allowed = get_args(tp)
        if value not in allowed or isinstance(value, bool):
            raise ParamsError(
                f"'{name}' must be one of: {', '.join(repr(a) for a in allowed)}; got {value!r}"
            )
        return value
    if origin is list:
        strings = get_args(tp) == (str,)
        if not isinstance(value, list) or (strings and not all(isinstance(v, str) for v in value)):
            raise ParamsError(f"'{name}' must be {_describe_type(tp)}, got {_json_type(value)}")
        if "max_len" in meta and len(value) > meta["max_len"]:
            limit = meta["max_len"]
            raise ParamsError(f"'{name}' has {len(value)} items; at most {limit} are allowed")
        return list(value)
    if origin is dict:
        if not isinstance(value, dict):
            raise ParamsError(f"'{name}' must be an object, got {_json_type(value)}")
        return dict(value)
    if tp is Any:
        return value
    if tp is str:
        if not isinstance(value, str):
            raise ParamsError(f"'{name}' must be a string, got {_json_type(value)}")
        if "min_len" in meta and len(value) < meta["min_len"]:
            raise ParamsError(f"'{name}' must not be empty")
        if "max_len" in meta and len(value) > meta["max_len"]:
            raise ParamsError(f"'{name}' is longer than {meta['max_len']} characters")
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ParamsError(f"'{name}' must be true or false, got {_json_type(value)}")
        return value
    if tp is int or tp is float:
        ok = isinstance(value, int) if tp is int else isinstance(value, int | float)
        if isinstance(value, bool) or not ok:
            raise ParamsError(f"'{name}' must be {_describe_type(tp)}, got {_json_type(value)}")
        if "min" in meta and value < meta["min"]:
            raise ParamsError(f"'{name}' must be at least {meta['min']}, got {value}")
        if "max" in meta and value > meta["max"]:
            raise ParamsError(f"'{name}' must be at most {meta['max']}, got {value}")
        return value
    raise TypeError(f"unsupported params type {tp!r}")  # a bug in this module, not the client
