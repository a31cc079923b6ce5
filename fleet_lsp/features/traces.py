"""``fleet/trace/*``: get (markdown rendered from the stored MLflow trace), list, label; and
:class:`TraceDocuments`, the server's trace state.

The work happens in :class:`fleet_lsp.traces.TraceService` (shared with the CLI); labels are
written by ``LabelService`` to MLflow (expectations on the trace) and the store.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING

from fleet_lsp.protocol import (
    TraceEntry,
    TraceGetParams,
    TraceLabelParams,
    TraceLabelReply,
    TraceListParams,
    TraceListReply,
    TraceReply,
)

if TYPE_CHECKING:
    from fleet_core.api import FleetRuntime
    from fleet_core.events import TurnEvent
    from fleet_lsp.server import FleetServer
    from fleet_lsp.traces import TraceService

#: Turns whose events are kept, and events kept per Turn (for documents rendered from the store).
MAX_LOGGED_TURNS = 50
MAX_EVENTS_PER_TURN = 5_000


class TraceDocuments:
    """Trace documents, lists and labels (the :class:`TraceService`, made on first use) and the
    events of the last Turns this server ran, which a document rendered from the store shows."""

    def __init__(self, opened_runtime: Callable[[], FleetRuntime | None]) -> None:
        self._opened_runtime = opened_runtime
        self._events: OrderedDict[str, list[TurnEvent]] = OrderedDict()
        self._service: TraceService | None = None

    @property
    def service(self) -> TraceService:
        if self._service is None:
            from fleet_lsp.traces import TraceService

            self._service = TraceService(self._events)
        return self._service

    def record(self, event: TurnEvent) -> None:
        """Keep a Turn's event (bounded: the newest Turns, the first events of each)."""
        events = self._events.get(event.turn_id)
        if events is None:
            events = self._events[event.turn_id] = []
            while len(self._events) > MAX_LOGGED_TURNS:
                self._events.popitem(last=False)
        if len(events) < MAX_EVENTS_PER_TURN:
            events.append(event)

    async def stop(self) -> None:
        """Shutdown: stop exporting traces (the queued ones stay for the next process)."""
        runtime = self._opened_runtime()
        if runtime is not None:
            await runtime.stop_exporting()


def register(server: FleetServer) -> None:
    @server.fleet_method("fleet/trace/get")
    async def get(ls: FleetServer, p: TraceGetParams) -> TraceReply:
        from fleet_core.errors import InvalidInput

        if not p.trace_id and not p.turn_id:
            raise InvalidInput("fleet/trace/get needs 'traceId' or 'turnId'")
        runtime = await ls.runtime()
        doc = await ls.trace_documents.service.get(runtime, trace_id=p.trace_id, turn_id=p.turn_id)
        return TraceReply(
            trace_id=doc.trace_id,
            turn_id=doc.turn_id,
            session_id=doc.session_id,
            uri=doc.uri,
            markdown=doc.markdown,
            source=doc.source,
            note=doc.note or None,
        )

    @server.fleet_method("fleet/trace/list")
    async def list_(ls: FleetServer, p: TraceListParams) -> TraceListReply:
        runtime = await ls.runtime()
        docs = await ls.trace_documents.service.list(runtime, p.session_id, p.limit or 50)
        return TraceListReply(
            traces=[
                TraceEntry(
                    trace_id=d.trace_id,
                    turn_id=d.turn_id,
                    session_id=d.session_id,
                    uri=d.uri,
                    source=d.source,
                    label_status=d.label_status,
                )
                for d in docs
            ]
        )

    @server.fleet_method("fleet/trace/label")
    async def label(ls: FleetServer, p: TraceLabelParams) -> TraceLabelReply:
        from fleet_lsp.traces import label_reply, label_update

        update = label_update(
            status=p.status,
            answer=p.answer,
            values=p.values,
            route=p.route,
            critical=p.critical,
            group=p.group,
            expectations=p.expectations,
            reviewer=p.reviewer,
        )
        runtime = await ls.runtime()
        result = await ls.trace_documents.service.label(runtime, p.trace_id, update)
        return label_reply(result)
