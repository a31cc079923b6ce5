"""Exporting finished traces from the durable queue, off every Turn's path.

A Turn's trace record is queued inside the Turn's own commit (``Store.finish_turn``), so a
process that exits or is killed right after answering loses no trace: the next process (a
server's background exporter, or ``fleet-lsp trace ...``) exports what is queued. Exporting is
idempotent (MLflow merges a trace written twice with the same ids), and a row is deleted only
after its write returned, so a crash between the two repeats the write and never duplicates it.

The queue is bounded (``max_pending``: the oldest are dropped, with a warning); a destination
that keeps failing is retried on later passes, and never blocks a Turn: until exported, a trace
is "pending" and reads fall back to the queued record.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from fleet_core.observability.records import TraceRecord, decode_record
from fleet_core.observability.redaction import NO_SECRETS, Redactor

if TYPE_CHECKING:
    from fleet_core.observability.destination import Scope
    from fleet_core.observability.traceview import TraceView
    from fleet_core.observability.tracing import TurnTracer

log = logging.getLogger(__name__)
MAX_PENDING = 10_000
BATCH = 20
RETRY_SECONDS = 30.0
MAX_BACKGROUND_ATTEMPTS = 5


class QueuedTrace(Protocol):
    """One queued row (``fleet_core.store.TraceExport``)."""

    @property
    def trace_id(self) -> str: ...

    @property
    def scope(self) -> str: ...

    @property
    def record(self) -> bytes: ...


class TraceQueue(Protocol):
    """The durable queue (``fleet_core.store.Store`` implements it)."""

    def pending_traces(
        self, limit: int = 20, *, max_attempts: int | None = None
    ) -> Sequence[QueuedTrace]: ...

    def pending_trace(self, trace_id: str) -> QueuedTrace | None: ...

    def trace_exported(self, trace_id: str) -> None: ...

    def trace_export_failed(self, trace_id: str, error: str) -> None: ...

    def prune_pending_traces(self, keep: int) -> int: ...


@dataclass(slots=True)
class ExportStats:
    exported: int = 0
    failed: int = 0
    dropped: int = 0


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
    ) -> None:
        self._queue = queue
        self._tracer = tracer
        self._redactor = redactor
        self._max_pending = max_pending
        self._retry_seconds = retry_seconds
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._lock = threading.Lock()  # one export pass at a time
        self._thread: threading.Thread | None = None

    # on demand ------------------------------------------------------------------------------

    def export_one(self, trace_id: str) -> bool:
        """Export one queued trace now; False when it is not queued (already exported)."""
        with self._lock:
            queued = self._queue.pending_trace(trace_id)
            if queued is None:
                return False
            self._export(queued)
            return True

    def export_pending(self, *, max_attempts: int | None = None) -> ExportStats:
        """Export every queued trace (bounded batches), oldest first; failures stay queued."""
        stats = ExportStats(dropped=self._prune())
        with self._lock:
            failed: set[str] = set()
            while not self._stopping.is_set():
                batch = [
                    row
                    for row in self._queue.pending_traces(
                        BATCH + len(failed), max_attempts=max_attempts
                    )
                    if row.trace_id not in failed
                ]
                if not batch:
                    break
                for row in batch:
                    try:
                        self._export(row)
                        stats.exported += 1
                    except Exception:
                        failed.add(row.trace_id)
                        stats.failed += 1
        return stats

    def queued_record(self, trace_id: str) -> TraceRecord | None:
        """The record of a trace still waiting for export (``None`` when not queued)."""
        queued = self._queue.pending_trace(trace_id)
        return decode_record(queued.record) if queued is not None else None

    def _export(self, row: QueuedTrace) -> None:
        try:
            record = decode_record(row.record)
            self._tracer.export(record, _scope(row.scope))
        except Exception as exc:
            message = self._redactor.error(exc, 500)
            log.warning("trace %s was not exported (it stays queued): %s", row.trace_id, message)
            self._queue.trace_export_failed(row.trace_id, message)
            raise
        self._queue.trace_exported(row.trace_id)

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
        """Start the background thread (idempotent); it exports whatever is queued, then waits
        for ``notify`` (or retries failures every ``retry_seconds``)."""
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
            try:
                self.export_pending(max_attempts=MAX_BACKGROUND_ATTEMPTS)
            except Exception as exc:  # the store itself failed: try again later
                log.warning("trace export pass failed: %s", self._redactor.error(exc, 500))
            self._wake.wait(self._retry_seconds)


def pending_view(record: TraceRecord) -> TraceView:
    """A queued trace as a ``TraceView`` (``pending``: its destination does not have it yet)."""
    from fleet_core.observability.traceview import build_view

    view = build_view(record.trace_id, record.spans)
    view.pending = True
    return view


def _scope(value: str) -> Scope:
    return "evaluation" if value == "evaluation" else "runtime"
