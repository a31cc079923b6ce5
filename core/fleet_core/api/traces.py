"""``FleetRuntime.traces``: a Turn's trace read back, rendered and labelled, and the export
queue (docs/observability.md). mlflow loads lazily, on the first trace read or exported."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from fleet_core.api.host import RuntimeHost
from fleet_core.api.records import TRACING_OFF, TracingStatus
from fleet_core.api.threads import in_thread
from fleet_core.errors import FleetError, TurnNotFound
from fleet_core.models import TurnSummary
from fleet_core.observability.errors import TraceNotFound, TracingUnavailable
from fleet_core.observability.traceview import stored_trace_view

__all__ = ["TraceNotFound", "Traces", "TracingUnavailable", "stored_trace_view"]
# a trace read waits at most this long for a queued trace's export, then answers from the queue
INLINE_EXPORT_SECONDS = 1.5

if TYPE_CHECKING:
    from fleet_core.api.records import QueuedExport
    from fleet_core.evaluation.labels import LabelResult, LabelUpdate
    from fleet_core.modes import ReviewStatus
    from fleet_core.observability.export import ExportStats
    from fleet_core.observability.records import TraceRecord
    from fleet_core.observability.traceview import TraceView


class Traces:
    """The traces of one runtime's Turns (its tracer, exporter and store)."""

    def __init__(self, runtime: RuntimeHost) -> None:
        self._runtime = runtime

    def status(self) -> TracingStatus:
        """Whether Turns are traced to MLflow, where, and if not, why."""
        tracer: Any = self._runtime.tracer
        destination = getattr(tracer, "destination", None)
        if getattr(tracer, "enabled", False) and destination is not None:
            scope = getattr(tracer, "scope", "runtime")
            return TracingStatus(True, destination.kind, destination.experiment(scope))
        reason = getattr(tracer, "reason", None) or TRACING_OFF
        if reason.startswith("Tracing is off"):
            reason += "; set FLEET_MLFLOW_DESTINATION=local to record traces"
        return TracingStatus(False, self._runtime.config.settings.mlflow.destination, None, reason)

    async def load(self, trace_id: str) -> TraceView:
        """A stored MLflow trace (``TraceNotFound``; ``TracingUnavailable`` when tracing is off
        or the destination is invalid: the message says which). A trace still queued for export
        is exported first, for at most ``INLINE_EXPORT_SECONDS``; if its destination cannot take
        it by then (down, slow, or the row is backing off), it is read from the queue
        (``view.pending``) and the background exporter keeps trying."""
        tracer = self._mlflow_tracer()
        pending = await self.pending(trace_id)
        if pending is not None:
            try:
                with anyio.fail_after(INLINE_EXPORT_SECONDS):
                    await anyio.to_thread.run_sync(
                        self._runtime.exporter.export_one, trace_id, abandon_on_cancel=True
                    )
            except Exception:  # TimeoutError, TracingUnavailable, the destination's own error
                from fleet_core.observability.export import pending_view

                view = await in_thread(pending_view, pending)
                return await self._with_queued_labels(view)
        return await self._with_queued_labels(await in_thread(tracer.load_trace, trace_id))

    async def _with_queued_labels(self, view: TraceView) -> TraceView:
        """A queued trace carries the store's labels; so does one whose label is still queued
        for MLflow (saved during an outage)."""
        from fleet_core.observability.export import labels_queue_id

        store = self._runtime.store
        if (
            not view.pending
            and await in_thread(store.pending_trace, labels_queue_id(view.trace_id)) is None
        ):
            return view
        row = await in_thread(store.get_trace_labels, view.trace_id)
        if row is not None:
            view.labels = dict(row["labels"])
        return view

    async def markdown(self, trace: str | TraceView) -> str:
        """A stored trace (by id, or as loaded) rendered as a markdown document."""
        from fleet_core.observability.traceview import render_trace_markdown

        view = await self.load(trace) if isinstance(trace, str) else trace
        return await in_thread(render_trace_markdown, view)

    async def label(self, trace_id: str, update: LabelUpdate) -> LabelResult:
        """Apply a partial label update to a trace (or the trace of a Turn id): MLflow
        expectations on the trace and the store's row, with optimization eligibility. While
        MLflow is unreachable the label is saved in the store and queued (the result's messages
        say so); the exporter writes it to MLflow once the trace is there."""
        from fleet_core.evaluation.labels import LabelService, LabelWriteFailed
        from fleet_core.observability.redaction import Redactor

        resolved = await self._labelled_trace_id(trace_id)
        service = LabelService(self._runtime.store, self._mlflow_tracer().backend)
        try:
            # labels are MLflow expectations on the trace: a write in progress (the export a
            # trace read started, or another server's) is waited for until its claim lapses
            from fleet_core.observability.export import CLAIM_SECONDS

            await self.export(resolved, wait_seconds=CLAIM_SECONDS)
            return await service.label(resolved, update)
        except (LabelWriteFailed, TracingUnavailable) as exc:  # MLflow down, slow or refusing
            failure: Exception = exc
        except FleetError:
            raise  # not found, an invalid label, the store's own failure
        except Exception as exc:  # MLflow's own error while exporting: the trace stays queued
            failure = exc
        reason = Redactor.from_config(self._runtime.config).error(failure, 300)
        return await service.queue(resolved, update, await self.pending(resolved), reason)

    async def labels(self, trace_id: str) -> dict[str, Any] | None:
        """The store's label row of a trace (or of a Turn id's trace), ``None`` if unlabelled."""
        resolved = await self._labelled_trace_id(trace_id)
        return await in_thread(self._runtime.store.get_trace_labels, resolved)

    async def review_statuses(self, session_id: str) -> dict[str, ReviewStatus]:
        """Each labelled trace of a Session and its review status (``approved``, ...)."""
        from fleet_core.modes import REVIEW_STATUSES

        rows = await in_thread(lambda: self._runtime.store.list_trace_labels(session_id=session_id))
        statuses: dict[str, ReviewStatus] = {}
        for row in rows:
            status = row["labels"].get("review_status")
            if status in REVIEW_STATUSES:
                statuses[row["trace_id"]] = status
        return statuses

    async def flush(self) -> ExportStats:
        """Export every queued trace now (``fleet-lsp trace``, evaluation); failures stay
        queued. With tracing off, queued traces wait for a configuration that has it on."""
        from fleet_core.observability.export import ExportStats

        if not self._runtime.tracer.enabled:
            return ExportStats()
        return await in_thread(self._runtime.exporter.export_pending)

    async def queue(self, limit: int = 100) -> list[QueuedExport]:
        """The export queue, oldest first (``fleet-lsp trace export --status``)."""
        from fleet_core.api.records import QueuedExport

        rows = await in_thread(self._runtime.store.pending_traces, limit)
        return [
            QueuedExport(
                trace_id=row.trace_id,
                session_id=row.session_id,
                turn_id=row.turn_id,
                origin_host=row.origin_host,
                attempts=row.attempts,
                last_error=row.last_error,
                next_attempt_at=row.next_attempt_at,
                created_at=row.created_at,
            )
            for row in rows
        ]

    async def queue_size(self) -> int:
        return await in_thread(self._runtime.store.count_pending_traces)

    async def drop(self, trace_id: str) -> bool:
        """Remove a queued trace without exporting it (an operator's decision); False when it
        is not queued."""
        return await in_thread(self._runtime.store.drop_trace, trace_id)

    async def pending(self, trace_id: str) -> TraceRecord | None:
        """A trace a Turn queued that is not exported yet (``None`` when not queued)."""
        return await in_thread(self._runtime.exporter.queued_record, trace_id)

    async def export(self, trace_id: str, wait_seconds: float | None = None) -> bool:
        """Export one queued trace now (False when it is not queued: already exported); a write
        another exporter has in progress is waited for up to ``wait_seconds`` (the exporter's
        default when ``None``)."""
        if not self._runtime.tracer.enabled:
            return False
        exporter = self._runtime.exporter
        if wait_seconds is None:
            return await in_thread(exporter.export_one, trace_id)
        return await in_thread(exporter.export_one, trace_id, wait_seconds)

    async def find_turn(self, trace_id: str) -> TurnSummary | None:
        """The Turn behind a trace id: the Turn whose trace it is, else the Turn with that id
        (a Turn without a recorded trace is addressed by its Turn id); ``None`` when neither."""
        found = await in_thread(self._runtime.store.find_turn_by_trace, trace_id)
        if found is not None:
            return found
        try:
            return await self._runtime.get_turn(trace_id)
        except TurnNotFound:
            return None

    def _mlflow_tracer(self) -> Any:
        """The tracer when it records to MLflow, else ``TracingUnavailable`` saying why."""
        status = self.status()
        if not status.enabled:
            raise TracingUnavailable(status.reason or TRACING_OFF)
        return self._runtime.tracer

    async def _labelled_trace_id(self, trace_id: str) -> str:
        """The MLflow trace id for a trace id or a Turn id (clear error when it has none)."""
        turn = await self.find_turn(trace_id)
        if turn is None or turn.trace_id == trace_id:
            return trace_id
        if turn.trace_id is None:
            raise TraceNotFound(
                f"Turn '{turn.turn_id}' has no MLflow trace (tracing was off when it ran), "
                "so it cannot be labelled; labels are stored on traces",
                turn_id=turn.turn_id,
            )
        return turn.trace_id
