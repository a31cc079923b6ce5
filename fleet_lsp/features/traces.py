"""``fleet/trace/*``: get (markdown rendered from the stored MLflow trace), list, label.

The work happens in :class:`fleet_lsp.traces.TraceService` (shared with the CLI); labels are
written by ``LabelService`` to MLflow (expectations on the trace) and the store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fleet_lsp.protocol import TraceGetParams, TraceLabelParams, TraceListParams

if TYPE_CHECKING:
    from fleet_lsp.server import FleetServer


def register(server: FleetServer) -> None:
    @server.fleet_method("fleet/trace/get")
    async def get(ls: FleetServer, p: TraceGetParams) -> dict[str, Any]:
        from fleet_core.errors import InvalidInput

        if not p.trace_id and not p.turn_id:
            raise InvalidInput("fleet/trace/get needs 'traceId' or 'turnId'")
        runtime = await ls.runtime()
        doc = await ls.trace_source.get(runtime, trace_id=p.trace_id, turn_id=p.turn_id)
        result: dict[str, Any] = {
            "traceId": doc.trace_id,
            "turnId": doc.turn_id,
            "sessionId": doc.session_id,
            "uri": doc.uri,
            "markdown": doc.markdown,
            "source": doc.source,
        }
        if doc.note:
            result["note"] = doc.note
        return result

    @server.fleet_method("fleet/trace/list")
    async def list_(ls: FleetServer, p: TraceListParams) -> dict[str, Any]:
        runtime = await ls.runtime()
        docs = await ls.trace_source.list(runtime, p.session_id, p.limit or 50)
        return {
            "traces": [
                {
                    "traceId": d.trace_id,
                    "turnId": d.turn_id,
                    "sessionId": d.session_id,
                    "uri": d.uri,
                    "source": d.source,
                }
                for d in docs
            ]
        }

    @server.fleet_method("fleet/trace/label")
    async def label(ls: FleetServer, p: TraceLabelParams) -> dict[str, Any]:
        from fleet_lsp.traces import label_result_wire, label_update

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
        result = await ls.trace_source.label(runtime, p.trace_id, update)
        return label_result_wire(result)
