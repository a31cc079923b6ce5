"""Domain records shared by the runtime, the store and every front end.

Fields are snake_case in Python and camelCase on the wire (``model_dump(by_alias=True)``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel
from pydantic.json_schema import SkipJsonSchema

from fleet_core.digests import DEFAULT_PROGRAM_DIGEST
from fleet_core.modes import ExecutionMode

TurnStatus = Literal["running", "completed", "failed", "cancelled"]


class Record(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True)

    def wire(self) -> dict[str, Any]:
        """The camelCase JSON form, without unset optional fields."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class DatasetContext(Record):
    path: str
    size_bytes: int
    sha256: str
    description: str | None = None


class SessionInfo(Record):
    session_id: str
    mode: str
    turn_count: int = 0
    created_at: datetime
    updated_at: datetime
    dataset: DatasetContext | None = None
    selections: dict[str, Any] = Field(default_factory=dict)
    # the host name and OS user of the process that last created or took the Session (None
    # for Sessions stored before migration 0004)
    owner_host: str | None = None
    owner_user: str | None = None


class WorkspaceFile(Record):
    path: str
    size_bytes: int
    sha256: str


class SessionPage(Record):
    """One page of Sessions, newest first; ``next_cursor`` is None on the last page."""

    sessions: list[SessionInfo]
    next_cursor: str | None = None


class WorkspacePage(Record):
    """One page of a workspace's regular files in path order, split as ``fleet/workspace/list``
    shows them (``artifacts/`` and everything else); ``next_cursor`` is None on the last."""

    files: list[WorkspaceFile]
    artifacts: list[WorkspaceFile]
    next_cursor: str | None = None


# the error kind of a cancelled Turn (fleet_core.engine.control.TurnCancelled.kind)
TURN_CANCELLED = "TurnCancelled"


class TurnError(Record):
    kind: str
    message: str
    # an interrupted Turn: the workspace files it changed in place before its process stopped
    # and that may be incomplete (``paths``), and those a shared blob store held, put back to
    # their committed bytes (``restored``); each sorted, at most
    # ``store.ownership.INTERRUPTED_PATHS_KEPT``
    paths: list[str] | None = None
    restored: list[str] | None = None
    # the engine's traceback of an unexpected failure: for the trace only (redacted, bounded),
    # never on the wire or in the store
    traceback: SkipJsonSchema[str | None] = Field(default=None, exclude=True)


AnswerKind = Literal["submitted", "extracted", "partial", "failed"]
"""How a Turn's answer was reached: ``submitted`` (the program or the RLM submitted it, nothing
failed on the way), ``extracted`` (the loop ran out and an extract step answered from the
trajectory), ``partial`` (some cells or children failed and the answer stands on the rest),
``failed`` (the Turn failed, or its answer is the program's own error message)."""
ReasonKind = Literal[
    "iterations_exhausted",
    "sandbox_errors",
    "child_failed",
    "fallback_answer",
    "error_answer",
    "turn_failed",
    "format_unmet",
]


class OutcomeReason(Record):
    """Why an outcome is not ``submitted``: a kind, how many times, and a line saying what."""

    kind: ReasonKind
    count: int = 1
    detail: str = ""


class AnswerOutcome(Record):
    """How the Turn's answer was reached (``AnswerKind``) and why it is not clean."""

    kind: AnswerKind
    reasons: list[OutcomeReason] = Field(default_factory=list)

    @property
    def clean(self) -> bool:
        return self.kind == "submitted"

    def summary(self) -> str:
        """One line for people: '' when clean, else 'completed with errors: ...'."""
        if self.clean:
            return ""
        said = "; ".join(r.detail for r in self.reasons if r.detail) or self.kind
        lead = "failed" if self.kind == "failed" else "completed with errors"
        return f"{lead}: {said}"


class TurnSummary(Record):
    turn_id: str
    seq: int
    status: TurnStatus
    task: str
    answer: str | None = None
    route: str | None = None
    learned_note: str | None = None
    trace_id: str | None = None
    created_at: datetime
    error: TurnError | None = None
    # from the Turn's stored result: None while it runs (or when it was interrupted)
    duration_seconds: float | None = None
    # the workspace paths of the artifacts its result lists (at most HISTORY_ARTIFACT_PATHS);
    # artifacts_omitted counts those left out, here or by storage.max_turn_artifacts
    artifact_paths: list[str] = Field(default_factory=list)
    artifacts_omitted: int = 0
    # how its answer was reached, from the stored result (None: not recorded)
    outcome: AnswerOutcome | None = None


# artifact paths a TurnSummary carries (history lists up to 50 Turns per request)
HISTORY_ARTIFACT_PATHS = 50


class ProvenanceRecord(Record):
    """Where a promoted artifact came from."""

    path: str
    root_path: str
    sha256: str
    size_bytes: int
    agent_id: str
    source_sandbox: str | None = None
    parent_chain: list[str] = Field(default_factory=list)
    turn_id: str | None = None


class Memory(Record):
    memory_id: str
    kind: str
    content: str
    sources: dict[str, Any] = Field(default_factory=dict)
    reviewed: bool = False
    created_at: datetime


class TurnRequest(Record):
    session_id: str
    task: str = Field(min_length=1, max_length=100_000)
    mode: ExecutionMode | None = None
    timeout_seconds: int | None = None
    record_replay: bool = False
    idempotency_key: str | None = Field(None, min_length=1, max_length=128)


class Usage(Record):
    model_calls: int = 0
    sandbox_errors: int = 0
    submit_rejections: int = 0
    input_tokens: int | None = None
    output_tokens: int | None = None
    calls_by_category: dict[str, int] = Field(default_factory=dict)
    # decisions answered by Jev, per budget category (their units are in calls_by_category too)
    jev_decisions_by_category: dict[str, int] = Field(default_factory=dict)
    # where the Turn's time went (docs/protocol.md): inside model calls, and of that the
    # server's prompt processing and generation (the embedded llama.cpp server's timings; None
    # for an endpoint that reports none), running cells in the sandbox, and getting the models
    # outside any call (starting the embedded server, or proving the running one)
    model_seconds: float | None = None
    prompt_seconds: float | None = None
    generation_seconds: float | None = None
    sandbox_seconds: float | None = None
    model_start_seconds: float | None = None


class ArtifactRef(Record):
    """An artifact a Turn result names; ``uri`` is ``fleet:/sessions/<id>/artifacts/<path>``."""

    uri: str
    path: str
    size_bytes: int
    sha256: str
    turn_id: str | None = None
    agent_id: str | None = None
    provenance: list[ProvenanceRecord] | None = None


class TurnResult(Record):
    turn_id: str
    session_id: str
    status: Literal["completed", "failed", "cancelled"]
    answer: str = ""
    route: str | None = None
    learned_note: str | None = None
    artifacts: list[ArtifactRef] = Field(default_factory=list)
    trace_id: str | None = None
    usage: Usage = Field(default_factory=Usage)
    error: TurnError | None = None
    replayed: bool = False
    duration_seconds: float | None = None  # from the Turn's start to its outcome
    artifacts_omitted: int = 0  # changed artifacts past storage.max_turn_artifacts, not listed
    # the digest of the program that served the Turn (the approved candidate's or the built-in
    # default's; fleet_core.optimization.program): never null
    compiled_program_digest: str = DEFAULT_PROGRAM_DIGEST
    # how the answer was reached (None: a result stored before outcomes existed)
    outcome: AnswerOutcome | None = None

    @classmethod
    def cancelled(
        cls, turn_id: str, session_id: str, message: str = "The Turn was cancelled"
    ) -> TurnResult:
        """A cancelled Turn's result when nothing more is known of it (e.g. cancelled before it
        started): status ``cancelled`` and error kind ``TurnCancelled``, as the Turn service
        classifies a cancellation; every other field its default."""
        return cls(
            turn_id=turn_id,
            session_id=session_id,
            status="cancelled",
            error=TurnError(kind=TURN_CANCELLED, message=message),
        )


class ModelEntry(Record):
    """One model the configured endpoint offers (``GET /v1/models``)."""

    id: str
    owned_by: str | None = None

    def wire(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)  # ownedBy: null stays


class ModelList(Record):
    """The endpoint's models; ``cached`` when served from the runtime's short-lived cache,
    ``fetched_at`` when the endpoint answered."""

    models: list[ModelEntry]
    cached: bool
    fetched_at: datetime

    def wire(self) -> dict[str, Any]:
        return {
            "models": [m.wire() for m in self.models],
            "cached": self.cached,
            "fetchedAt": self.fetched_at.isoformat(),
        }


class SessionModels(Record):
    """A Session's model selection: a model id per role, ``None`` = the configuration's."""

    session_id: str
    root: str | None = None
    sub: str | None = None

    def wire(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)  # null = not selected
