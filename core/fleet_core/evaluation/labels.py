"""Review labels on Turn traces: model, strict validation, and a service writing both stores.

Labels are written as MLflow expectations on the trace (``fleet.labels`` with the whole set, plus
``expected_response``/``expected_facts`` for MLflow's judges) **and** as a row of
``fleet_trace_labels``. MLflow is written first, then the store; a failure in either is reported
with what was saved, and re-running the same command converges (the merge starts from the newest
labels, MLflow's, and the update is re-applied).

The LSP (``fleet/trace/label``) and the CLI (``fleet-lsp eval label``) both call
``LabelService.label(trace_id, LabelUpdate(...))``.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import anyio.to_thread
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from fleet_core.errors import FleetError, InvalidInput
from fleet_core.modes import ReviewStatus, Route
from fleet_core.observability.export import labels_queue_id

if TYPE_CHECKING:
    from fleet_core.observability.records import TraceRecord
    from fleet_core.store import Store

MAX_EXPECTATIONS_BYTES = 256_000
MAX_VALUES = 100


class LabelInvalid(InvalidInput):
    kind = "LabelInvalid"


class LabelSyncError(FleetError):
    """One of the two label stores was not written; re-running the same command repairs it."""

    kind = "LabelSyncError"


class LabelWriteFailed(LabelSyncError):
    """MLflow refused or could not take the labels; nothing was written (the caller queues)."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def _normal_path(path: str, roots: tuple[str, ...], what: str) -> str:
    if not path or "\\" in path or path.startswith("/") or "\x00" in path:
        raise ValueError(f"{what} '{path}' must be a relative workspace path")
    normal = posixpath.normpath(path)
    if normal != path or normal.startswith("..") or "/../" in f"/{normal}/":
        raise ValueError(f"{what} '{path}' must be normalized (no '.', '..' or '//')")
    if not normal.startswith(tuple(f"{r}/" for r in roots)):
        raise ValueError(f"{what} '{path}' must be under {' or '.join(r + '/' for r in roots)}")
    return normal


class ArtifactExpectation(_Strict):
    """An expected artifact and how to check it."""

    path: str
    kind: Literal["text", "json", "csv", "python"]
    expected: Any = None
    key_columns: list[str] = Field(default_factory=list, max_length=10)
    tolerance: float = Field(0.0, ge=0)
    execute: bool | None = None
    timeout_seconds: int = Field(30, ge=1, le=60)
    exit_code: int = 0
    stdout: str | None = None

    @field_validator("path")
    @classmethod
    def _path(cls, value: str) -> str:
        return _normal_path(value, ("artifacts",), "artifact path")

    @field_validator("tolerance", mode="before")
    @classmethod
    def _number(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError("tolerance must be a number")
        return float(value) if isinstance(value, int) else value

    @model_validator(mode="after")
    def _kind_rules(self) -> ArtifactExpectation:
        if self.kind == "python":
            if self.execute is None:
                raise ValueError(f"python artifact '{self.path}' needs 'execute' (true or false)")
        elif self.execute is not None:
            raise ValueError(
                f"'execute' applies only to python artifacts ('{self.path}' is {self.kind})"
            )
        if self.kind == "csv":
            if not self.key_columns or any(not c.strip() for c in self.key_columns):
                raise ValueError(f"csv artifact '{self.path}' needs non-empty 'key_columns'")
            if len(set(self.key_columns)) != len(self.key_columns):
                raise ValueError(f"csv artifact '{self.path}' has duplicate 'key_columns'")
        elif self.key_columns:
            raise ValueError(f"'key_columns' applies only to csv artifacts ('{self.path}')")
        if self.kind in ("text", "csv", "json") and self.expected is None:
            raise ValueError(f"{self.kind} artifact '{self.path}' needs 'expected'")
        if self.kind == "text" and not isinstance(self.expected, str):
            raise ValueError(f"text artifact '{self.path}': 'expected' must be a string")
        if self.kind == "csv" and not (
            isinstance(self.expected, list) and all(isinstance(r, dict) for r in self.expected)
        ):
            raise ValueError(
                f"csv artifact '{self.path}': 'expected' must be a list of row objects"
            )
        return self


class ChildExpectation(_Strict):
    """A child agent the Turn must have delegated to."""

    input_paths: list[str] = Field(default_factory=list, max_length=100)
    artifacts: list[str] = Field(default_factory=list, max_length=32)

    @field_validator("input_paths")
    @classmethod
    def _inputs(cls, value: list[str]) -> list[str]:
        paths = [
            _normal_path(p, ("files", "skills", "artifacts"), "child input path") for p in value
        ]
        if len(set(paths)) != len(paths):
            raise ValueError("child input_paths must be unique")
        return paths

    @field_validator("artifacts")
    @classmethod
    def _suffixes(cls, value: list[str]) -> list[str]:
        for suffix in value:
            if not suffix or suffix.startswith("/") or ".." in suffix.split("/"):
                raise ValueError(f"child artifact '{suffix}' must be a relative suffix")
        return value


class StructuredExpectations(_Strict):
    """Schema version 1 of artifact and delegation expectations."""

    schema_version: Literal[1]
    artifacts: list[ArtifactExpectation] = Field(default_factory=list, max_length=32)
    children: list[ChildExpectation] = Field(default_factory=list, max_length=32)

    @model_validator(mode="after")
    def _unique(self) -> StructuredExpectations:
        paths = [a.path for a in self.artifacts]
        if len(set(paths)) != len(paths):
            raise ValueError("artifact expectation paths must be unique")
        return self


class TraceLabels(_Strict):
    """The review of one trace."""

    review_status: ReviewStatus = "approved"
    source_group: str = Field(min_length=1, max_length=200)
    expected_answer: str | None = Field(None, max_length=100_000)
    expected_values: list[str] = Field(default_factory=list, max_length=MAX_VALUES)
    route: Route | None = None
    critical: bool = False
    structured_expectations: StructuredExpectations | None = None
    reviewer: str = Field("human", min_length=1, max_length=200)

    @field_validator("expected_values")
    @classmethod
    def _values(cls, value: list[str]) -> list[str]:
        if any(not v.strip() for v in value):
            raise ValueError("expected values must not be blank")
        return value

    @model_validator(mode="after")
    def _rules(self) -> TraceLabels:
        if self.critical and not self.expected_values:
            raise ValueError("a critical label needs at least one expected value (--value)")
        if self.review_status == "approved" and not (self.expected_answer or self.expected_values):
            raise ValueError(
                "an approved label needs an expected answer (--answer) or values (--value)"
            )
        return self

    def wire(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class LabelUpdate(BaseModel):
    """A partial update: ``None`` keeps the earlier value."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    review_status: ReviewStatus | None = None
    source_group: str | None = None
    expected_answer: str | None = None
    expected_values: list[str] | None = None
    route: Route | None = None
    critical: bool | None = None
    structured_expectations: dict[str, Any] | None = None
    reviewer: str | None = None
    clear_answer: bool = False
    clear_route: bool = False


def load_expectations_file(path: Path) -> dict[str, Any]:
    """Read and validate a ``--expectations-file`` (JSON, ≤256,000 bytes)."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise LabelInvalid(f"Cannot read expectations file {path}: {exc.strerror}") from None
    if size > MAX_EXPECTATIONS_BYTES:
        raise LabelInvalid(
            f"Expectations file {path} is {size:,} bytes; the limit is {MAX_EXPECTATIONS_BYTES:,}"
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise LabelInvalid(f"Expectations file {path} is not valid JSON: {exc}") from None
    parse_expectations(data)
    return dict(data)


def parse_expectations(data: Any) -> StructuredExpectations:
    try:
        return StructuredExpectations.model_validate(data)
    except ValidationError as exc:
        raise LabelInvalid(f"Structured expectations: {_describe(exc)}") from None


def merge_labels(base: Mapping[str, Any], update: LabelUpdate) -> TraceLabels:
    """Overlay ``update`` on ``base`` (defaults, then earlier labels) and validate."""
    merged = dict(base)
    for key, value in update.model_dump(exclude={"clear_answer", "clear_route"}).items():
        if value is not None:
            merged[key] = value
    if update.clear_answer:
        merged["expected_answer"] = None
    if update.clear_route:
        merged["route"] = None
    try:
        return TraceLabels.model_validate(merged)
    except ValidationError as exc:
        raise LabelInvalid(f"Invalid label: {_describe(exc)}") from None


def _describe(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    message = str(first["msg"]).removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        return f"unknown field '{where}'"
    return f"{where}: {message}" if where else message


# the service ------------------------------------------------------------------------------------


class TraceLabelBackend(Protocol):
    """What the service needs from MLflow (``MlflowBackend`` implements it)."""

    def trace_info(self, trace_id: str) -> Any: ...

    def read_labels(self, trace_id: str) -> dict[str, Any] | None: ...

    def log_labels(
        self, trace_id: str, labels: Mapping[str, Any], *, source_type: str, source_id: str
    ) -> None: ...


@dataclass(frozen=True, slots=True)
class LabelResult:
    trace_id: str
    labels: TraceLabels
    eligible: bool
    ineligible_reason: str | None
    turn_id: str | None
    session_id: str | None
    messages: list[str] = field(default_factory=list)

    def wire(self) -> dict[str, Any]:
        return {
            "traceId": self.trace_id,
            "turnId": self.turn_id,
            "sessionId": self.session_id,
            "labels": self.labels.wire(),
            "eligible": self.eligible,
            "ineligibleReason": self.ineligible_reason,
            "messages": list(self.messages),
        }


NO_REPLAY = (
    "The Turn was not replay-captured (recordReplay was off), so its workspace inputs cannot be "
    "reconstructed: the label is kept for evaluation but the trace cannot be optimization data."
)


class LabelService:
    """Label traces in MLflow and the store, consistently."""

    def __init__(self, store: Store, backend: TraceLabelBackend) -> None:
        self.store = store
        self.backend = backend

    async def label(self, trace_id: str, update: LabelUpdate) -> LabelResult:
        """Apply a partial update (runs in a worker thread)."""
        return await anyio.to_thread.run_sync(self.label_sync, trace_id, update)

    async def get(self, trace_id: str) -> dict[str, Any] | None:
        return await anyio.to_thread.run_sync(self.store.get_trace_labels, trace_id)

    def label_sync(self, trace_id: str, update: LabelUpdate) -> LabelResult:
        info = self.backend.trace_info(trace_id)
        turn = self.store.find_turn_by_trace(trace_id)
        turn_id = turn.turn_id if turn else None
        session_id = info.session_id
        queued = self.store.pending_trace(labels_queue_id(trace_id)) is not None
        row = self.store.get_trace_labels(trace_id)
        # a label queued during an outage is newer than MLflow's copy
        existing = None if queued else self.backend.read_labels(trace_id)
        if existing is None:
            existing = dict(row["labels"]) if row else None
        base: dict[str, Any] = {"review_status": "approved", "source_group": session_id or trace_id}
        base |= existing or {}
        labels = merge_labels(base, update)
        eligible, reason = self._eligibility(labels, turn_id, info)
        messages = [] if eligible else [reason or ""]
        source_type = "CODE" if labels.review_status == "synthetic" else "HUMAN"
        try:
            self.backend.log_labels(
                trace_id, labels.wire(), source_type=source_type, source_id=labels.reviewer
            )
        except FleetError:
            raise
        except Exception as exc:
            raise LabelWriteFailed(
                f"Labels were not saved: writing them to MLflow failed ({type(exc).__name__}: "
                f"{str(exc)[:300]}); nothing was changed. Re-run the same command."
            ) from None
        try:
            self.store.upsert_trace_labels(
                trace_id,
                session_id=session_id,
                turn_id=turn_id,
                labels=labels.wire(),
                eligible=eligible,
                ineligible_reason=reason,
            )
        except Exception as exc:
            raise LabelSyncError(
                "Labels were saved in MLflow but the store write failed "
                f"({type(exc).__name__}: {str(exc)[:300]}); re-run the same command to "
                "synchronize them."
            ) from None
        if queued:  # superseded by what MLflow now has
            self.store.drop_trace(labels_queue_id(trace_id))
        return LabelResult(trace_id, labels, eligible, reason, turn_id, session_id, messages)

    async def queue(
        self, trace_id: str, update: LabelUpdate, record: TraceRecord | None, reason: str
    ) -> LabelResult:
        """Save a label while MLflow is unreachable (runs in a worker thread): see
        ``queue_sync``."""
        return await anyio.to_thread.run_sync(self.queue_sync, trace_id, update, record, reason)

    def queue_sync(
        self, trace_id: str, update: LabelUpdate, record: TraceRecord | None, reason: str
    ) -> LabelResult:
        """The label row and its export to MLflow, queued in one transaction: the label counts
        at once (listing, evaluation, optimization data, ``fleet/trace/get``) and the exporter
        writes the expectations once the trace is in MLflow. ``record``: the trace's queued
        record (None: the trace is in MLflow already). A trace neither queued nor of a Turn
        here is refused with ``TracingUnavailable``."""
        from fleet_core.observability.errors import TracingUnavailable
        from fleet_core.observability.export import encode_labels

        turn = self.store.find_turn_by_trace(trace_id)
        if record is None and turn is None:
            raise TracingUnavailable(
                f"Labels were not saved: MLflow is unreachable ({reason}) and no Turn here has "
                f"trace '{trace_id}'; nothing was changed."
            )
        info = _queued_info(trace_id, record, self.store.session_of_trace(trace_id))
        turn_id = turn.turn_id if turn else info.turn_id
        row = self.store.get_trace_labels(trace_id)
        base: dict[str, Any] = {
            "review_status": "approved",
            "source_group": info.session_id or trace_id,
        }
        base |= dict(row["labels"]) if row else {}
        labels = merge_labels(base, update)
        eligible, ineligible = self._eligibility(labels, turn_id, info)
        source_type = "CODE" if labels.review_status == "synthetic" else "HUMAN"
        self.store.queue_trace_labels(
            trace_id,
            queue_id=labels_queue_id(trace_id),
            session_id=info.session_id,
            turn_id=turn_id,
            labels=labels.wire(),
            eligible=eligible,
            ineligible_reason=ineligible,
            payload=encode_labels(
                labels.wire(), source_type=source_type, source_id=labels.reviewer
            ),
        )
        messages = [
            f"MLflow is unreachable ({reason}): the labels are saved and queued; they are "
            "written to MLflow when the trace is exported (fleet-lsp trace export --status)."
        ]
        messages += [] if eligible else [ineligible or ""]
        return LabelResult(
            trace_id, labels, eligible, ineligible, turn_id, info.session_id, messages
        )

    def _eligibility(
        self, labels: TraceLabels, turn_id: str | None, info: Any
    ) -> tuple[bool, str | None]:
        if labels.review_status == "rejected":
            return False, "Rejected labels are never optimization data."
        if labels.review_status == "benchmark":
            return (
                False,
                "Benchmark-labelled traces are excluded from the curated optimization dataset.",
            )
        if turn_id is None:
            return False, "No Turn in this store has this trace, so its replay cannot be found."
        stored = self.store.get_replay(turn_id)
        if stored is None:
            return False, NO_REPLAY
        from fleet_core.observability.errors import ReplayError
        from fleet_core.observability.replay import decode_replay

        digest, blob = stored
        try:
            decode_replay(blob, digest, turn_id=turn_id)
        except ReplayError as exc:
            return False, f"The Turn's replay snapshot failed verification: {exc.message}"
        traced = getattr(info, "replay_sha256", None)
        if traced and traced != digest:
            return False, "The trace references a different replay snapshot than the store holds."
        return True, None


def _queued_info(trace_id: str, record: TraceRecord | None, session_id: str | None) -> Any:
    """What labelling needs of a trace MLflow cannot show now: from its queued record, else
    from the store's Turn (the replay digest is then checked against the store alone)."""
    from fleet_core.observability import attributes as attr
    from fleet_core.observability.mlflow_backend import TraceInfoView

    if record is None:
        return TraceInfoView(trace_id, session_id, None, None, False, "OK", None)
    root = next((s for s in record.spans if s.parent_id is None), None)
    replay = record.tags.get(attr.REPLAY_SHA256) or (
        root.attributes.get(attr.REPLAY_SHA256) if root is not None else None
    )
    return TraceInfoView(
        trace_id=trace_id,
        session_id=record.metadata.get(attr.TRACE_SESSION) or session_id,
        turn_id=record.metadata.get(attr.TURN_ID) or record.client_request_id,
        replay_sha256=str(replay) if replay else None,
        replay_selected=False,
        state=record.state,
        experiment_id=None,
    )
