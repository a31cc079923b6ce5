"""The trace records: what a Turn's trace holds, independent of any backend.

``TraceBuilder`` (``spans.py``) produces a ``TraceRecord``; the export queue stores it encoded
(``encode_record``) inside the Turn's commit, and ``MlflowBackend`` writes it. Pure Python.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal

SpanStatus = Literal["OK", "ERROR", "UNSET"]
RECORD_FORMAT = 1


@dataclass(frozen=True, slots=True)
class TurnTraceStart:
    """What the root span records when a Turn starts."""

    turn_id: str
    session_id: str
    task: str
    mode: str
    configuration_digest: str
    compiled_program_digest: str | None = None
    idempotency_key: str | None = None
    record_replay: bool = False
    workspace_manifest: str | None = None
    context_files: dict[str, str] | None = None
    model_settings: dict[str, Any] | None = None
    turn_timeout_seconds: int | None = None


@dataclass(slots=True)
class SpanRecord:
    """One buffered span (ids are 64-bit ints; times are ns since the epoch)."""

    span_id: int
    parent_id: int | None
    name: str
    span_type: str
    kind: str
    start_ns: int
    end_ns: int | None = None
    inputs: dict[str, Any] = field(default_factory=dict)
    outputs: dict[str, Any] = field(default_factory=dict)
    attributes: dict[str, Any] = field(default_factory=dict)
    status: SpanStatus = "OK"
    status_message: str = ""


@dataclass(slots=True)
class TraceRecord:
    """A finished Turn's trace, redacted and ready to write."""

    trace_id: str
    spans: list[SpanRecord]
    request_time_ms: int
    duration_ms: int
    state: Literal["OK", "ERROR"]
    request_preview: str
    response_preview: str
    client_request_id: str
    metadata: dict[str, str]
    tags: dict[str, str]


def new_trace_id() -> tuple[str, int]:
    """An MLflow v3 trace id (``tr-`` + 32 hex digits) and its OpenTelemetry integer form."""
    otel = uuid.uuid4().int
    return f"tr-{otel:032x}", otel


def encode_record(record: TraceRecord) -> bytes:
    """A finished trace as gzip'd JSON (deterministic: mtime 0, sorted keys)."""
    body = {"format": RECORD_FORMAT, **dataclasses.asdict(record)}
    text = json.dumps(body, sort_keys=True, default=str, separators=(",", ":"))
    return gzip.compress(text.encode("utf-8"), mtime=0)


def decode_record(blob: bytes) -> TraceRecord:
    """The inverse of ``encode_record`` (raises ``ValueError`` on a damaged or foreign blob)."""
    try:
        body = json.loads(gzip.decompress(blob))
    except (OSError, EOFError, json.JSONDecodeError) as exc:
        raise ValueError(f"unreadable trace record: {exc}") from None
    if not isinstance(body, dict) or body.pop("format", None) != RECORD_FORMAT:
        raise ValueError("unknown trace record format")
    spans = [SpanRecord(**span) for span in body.pop("spans")]
    return TraceRecord(spans=spans, **body)
