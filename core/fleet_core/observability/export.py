"""Exporting finished traces from the durable queue, off every Turn's path.

A Turn's trace record is queued inside the Turn's own commit (``Store.finish_turn``), so a
process that exits or is killed right after answering loses no trace: the next process (a
server's background exporter, or ``fleet-lsp trace ...``) exports what is queued. Exporting is
idempotent (MLflow merges a trace written twice with the same ids), and a row is deleted only
after its write returned, so a crash between the two repeats the write and never duplicates it.

Every exporter on the database shares the queue: an exporter first *claims* a due row (its
``next_attempt_at`` moves ahead by ``claim_seconds``, in one conditional UPDATE), so two servers
never write the same trace at once, and a crashed exporter's claim lapses. A failed attempt puts
the row back with its own backoff (doubling per attempt from ``Backoff.base`` up to
``Backoff.maximum``, with jitter), so an outage costs each row one attempt per backoff period
across all servers, not one per commit per server. Nothing is ever given up: the background
exporter keeps retrying until the row is exported or an operator drops it (``fleet-lsp trace
export --drop``). The queue is bounded (``max_pending``: the oldest are dropped, with a warning).
Until exported, a trace is "pending" and reads answer from the queued record.

Labels written while MLflow is unreachable queue the same way: the store's label row and a queue
row ``labels:<trace id>`` (scope ``labels``, the expectations to log) commit together, so the
label is saved at once; the exporter logs them once the trace itself is in MLflow (right after
the trace's own export, else with the same per-row backoff).
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from fleet_core.observability.errors import TracingUnavailable
from fleet_core.observability.records import TraceRecord, decode_record
from fleet_core.observability.redaction import NO_SECRETS, Redactor

if TYPE_CHECKING:
    from fleet_core.observability.destination import Scope
    from fleet_core.observability.traceview import TraceView
    from fleet_core.observability.tracing import TurnTracer

log = logging.getLogger(__name__)
MAX_PENDING = 10_000
BATCH = 20
RETRY_SECONDS = 30.0  # the background exporter looks at the queue at least this often
CLAIM_SECONDS = 120.0  # an attempt's claim on a row; longer than any bounded MLflow call
ONE_WAIT_SECONDS = 30.0  # export_one waits this long for another exporter's write
_FOREVER = datetime.max.replace(tzinfo=UTC)
LABELS_SCOPE = "labels"  # a queued label's row (its trace's own row has its Turn's scope)
_LABELS_PREFIX = "labels:"


def labels_queue_id(trace_id: str) -> str:
    """The queue row of a label saved while MLflow was unreachable."""
    return f"{_LABELS_PREFIX}{trace_id}"


def encode_labels(labels: dict[str, Any], *, source_type: str, source_id: str) -> bytes:
    """A queued label's record: what ``MlflowBackend.log_labels`` is called with."""
    payload = {"labels": labels, "source_type": source_type, "source_id": source_id}
    return json.dumps(payload, sort_keys=True).encode()


class LabelWriter(Protocol):
    """Where queued labels go (``MlflowBackend``)."""

    def log_labels(
        self, trace_id: str, labels: dict[str, Any], *, source_type: str, source_id: str
    ) -> None: ...


class QueuedTrace(Protocol):
    """One queued row (``fleet_core.store.TraceExport``)."""

    @property
    def trace_id(self) -> str: ...

    @property
    def scope(self) -> str: ...

    @property
    def record(self) -> bytes: ...

    @property
    def attempts(self) -> int: ...


class TraceQueue(Protocol):
    """The durable queue (``fleet_core.store.Store`` implements it)."""

    def pending_traces(
        self, limit: int = 20, *, due: datetime | None = None
    ) -> Sequence[QueuedTrace]: ...

    def pending_trace(self, trace_id: str) -> QueuedTrace | None: ...

    def claim_trace(self, trace_id: str, until: datetime, due: datetime | None = None) -> bool: ...

    def next_trace_due(self) -> datetime | None: ...

    def trace_exported(self, trace_id: str) -> None: ...

    def trace_export_failed(
        self, trace_id: str, error: str, retry_at: datetime | None = None
    ) -> None: ...

    def prune_pending_traces(self, keep: int) -> int: ...


@dataclass(slots=True)
class Backoff:
    """Per-row retry delays: ``base * 2**(attempts-1)`` capped at ``maximum``, jittered to
    between half and all of it (so servers that failed together do not retry together)."""

    base: float = 2.0
    maximum: float = 300.0
    rng: random.Random = field(default_factory=random.Random)

    def delay(self, attempts: int) -> float:
        cap = min(self.maximum, self.base * 2 ** min(max(attempts - 1, 0), 30))
        return self.rng.uniform(cap / 2, cap)


@dataclass(slots=True)
class ExportStats:
    exported: int = 0
    failed: int = 0
    dropped: int = 0


def _now() -> datetime:
    return datetime.now(UTC)


class TraceExporter:
    """Drains the queue into the tracer's destination: on demand, or from a background thread."""

    def __init__(
        self,
        queue: TraceQueue,
        tracer: TurnTracer,
        *,
        redactor: Redactor = NO_SECRETS,
        max_pending: int = MAX_PENDING,
        retry_seconds: float = RETRY_SECONDS,
        backoff: Backoff | None = None,
        claim_seconds: float = CLAIM_SECONDS,
    ) -> None:
        self._queue = queue
        self._tracer = tracer
        self._redactor = redactor
        self._max_pending = max_pending
        self._retry_seconds = retry_seconds
        self._backoff = backoff or Backoff()
        self._claim = timedelta(seconds=claim_seconds)
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    # on demand ------------------------------------------------------------------------------

    def export_one(self, trace_id: str, wait_seconds: float = ONE_WAIT_SECONDS) -> bool:
        """Export one queued trace now; False when it is not queued (already exported, perhaps
        by another exporter meanwhile). A row another exporter is writing is waited for (up to
        ``wait_seconds``, then ``TracingUnavailable``); a row backing off after a failure is
        tried at once (a person asked for it)."""
        deadline = time.monotonic() + wait_seconds
        while True:
            queued = self._queue.pending_trace(trace_id)
            if queued is None:
                return False
            force = _FOREVER if queued.attempts > 0 else None
            if self._queue.claim_trace(trace_id, _now() + self._claim, force):
                self._export(queued)
                return True
            if time.monotonic() > deadline:
                raise TracingUnavailable(
                    f"Trace '{trace_id}' is being exported by another process; read it from "
                    "the queue meanwhile"
                )
            time.sleep(0.1)

    def export_pending(self, *, due_only: bool = False) -> ExportStats:
        """Export queued traces (bounded batches), oldest first; failures stay queued with
        their backoff. ``due_only``: skip rows that are backing off (the background pass); on
        demand (``fleet-lsp trace export``) every row not claimed by another exporter is tried
        once."""
        stats = ExportStats(dropped=self._prune())
        tried: set[str] = set()
        while not self._stopping.is_set():
            due = _now() if due_only else None
            batch = [
                row
                for row in self._queue.pending_traces(BATCH + len(tried), due=due)
                if row.trace_id not in tried
            ]
            if not batch:
                break
            for row in batch:
                tried.add(row.trace_id)
                if not self._claim_for_pass(row, due_only):
                    continue
                try:
                    self._export(row)
                    stats.exported += 1
                except Exception:
                    stats.failed += 1
                if self._stopping.is_set():
                    break
        return stats

    def _claim_for_pass(self, row: QueuedTrace, due_only: bool) -> bool:
        """Claim the row for this attempt; on demand, a row backing off (or claimed by another
        exporter: the write is idempotent) is taken anyway."""
        force = None if due_only else _FOREVER
        return self._queue.claim_trace(row.trace_id, _now() + self._claim, force)

    def queued_record(self, trace_id: str) -> TraceRecord | None:
        """The record of a trace still waiting for export (``None`` when not queued)."""
        queued = self._queue.pending_trace(trace_id)
        return decode_record(queued.record) if queued is not None else None

    def _export(self, row: QueuedTrace) -> None:
        try:
            if row.scope == LABELS_SCOPE:
                self._write_labels(row)
            else:
                record = decode_record(row.record)
                self._tracer.export(record, _scope(row.scope))
        except Exception as exc:
            message = self._redactor.error(exc, 500)
            delay = self._backoff.delay(row.attempts + 1)
            log.warning(
                "trace %s was not exported (it stays queued; next attempt in %.0f s): %s",
                row.trace_id,
                delay,
                message,
            )
            self._queue.trace_export_failed(
                row.trace_id, message, _now() + timedelta(seconds=delay)
            )
            raise
        self._queue.trace_exported(row.trace_id)
        if row.scope != LABELS_SCOPE:
            self._follow_labels(row.trace_id)

    def _write_labels(self, row: QueuedTrace) -> None:
        """Log a queued label's expectations; its trace must be in MLflow first."""
        trace_id = row.trace_id.removeprefix(_LABELS_PREFIX)
        if self._queue.pending_trace(trace_id) is not None:
            raise TracingUnavailable(
                f"trace '{trace_id}' is not exported yet; its label is written right after it"
            )
        writer: LabelWriter | None = getattr(self._tracer, "backend", None)
        if writer is None:
            raise TracingUnavailable("tracing is off: queued labels wait for a destination")
        payload = json.loads(row.record)
        writer.log_labels(
            trace_id,
            payload["labels"],
            source_type=str(payload["source_type"]),
            source_id=str(payload["source_id"]),
        )

    def _follow_labels(self, trace_id: str) -> None:
        """A trace just exported: write its queued label now, even if it is backing off (a
        failure keeps it queued with its backoff)."""
        queue_id = labels_queue_id(trace_id)
        queued = self._queue.pending_trace(queue_id)
        if queued is None or not self._queue.claim_trace(queue_id, _now() + self._claim, _FOREVER):
            return
        try:
            self._export(queued)
        except Exception:  # logged and queued with its backoff by _export
            return

    def _prune(self) -> int:
        dropped = self._queue.prune_pending_traces(self._max_pending)
        if dropped:
            log.warning(
                "the trace export queue is full: dropped the %d oldest traces (limit %d)",
                dropped,
                self._max_pending,
            )
        return dropped

    # background -----------------------------------------------------------------------------

    def start(self) -> None:
        """Start the background thread (idempotent); it exports whatever is due, then sleeps
        until the next row is due (at most ``retry_seconds``) or ``notify`` wakes it."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._loop, name="fleet-trace-export", daemon=True
            )
            self._thread.start()

    def notify(self) -> None:
        """A trace was queued: wake the background thread (never blocks)."""
        self._wake.set()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the thread; an export in progress may finish within ``timeout`` (what is left
        stays queued for the next process)."""
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _loop(self) -> None:
        while not self._stopping.is_set():
            self._wake.clear()
            wait = self._retry_seconds
            try:
                self.export_pending(due_only=True)
                due = self._queue.next_trace_due()
                if due is not None:
                    wait = min(wait, max(0.2, (due - _now()).total_seconds()))
            except Exception as exc:  # the store itself failed: try again later
                log.warning("trace export pass failed: %s", self._redactor.error(exc, 500))
            self._wake.wait(wait)


def pending_view(record: TraceRecord) -> TraceView:
    """A queued trace as a ``TraceView`` (``pending``: its destination does not have it yet)."""
    from fleet_core.observability.traceview import build_view

    view = build_view(record.trace_id, record.spans)
    view.pending = True
    return view


def _scope(value: str) -> Scope:
    return "evaluation" if value == "evaluation" else "runtime"
