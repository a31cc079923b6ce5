"""Trace documents, lists and labels for the language server and the CLI, from MLflow.

A Turn's trace document is rendered from the **stored** MLflow trace (``runtime.load_trace``,
``runtime.trace_markdown``), so it is the same in every process and after a restart. Only when
tracing is off or the destination cannot be read does it fall back to the store's Turn outcome
(:class:`fleet_lsp.documents.StoreTraceSource`), with a note at the top saying why; both are
rendered by the one renderer, ``fleet_core.observability.traceview``. Labels go
through ``FleetRuntime.traces.label``: MLflow expectations on the trace and the store's
``fleet_trace_labels`` row.

Ids: a trace id (``tr-...``) or, where a Turn had no MLflow trace, its Turn id. ``fleet/trace/get``
and ``fleet-lsp trace show`` accept either; labels need a real MLflow trace.

Everything goes through the ``FleetRuntime`` facade, which runs the store and MLflow in worker
threads; mlflow is imported on the first trace read, never at server start.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from fleet_core.errors import FleetError, InvalidInput, TurnNotFound
from fleet_core.modes import REVIEW_STATUSES, ROUTES, ReviewStatus
from fleet_lsp.documents import StoreTraceSource, TraceDocument, trace_uri
from fleet_lsp.protocol import TraceLabelReply, to_wire

if TYPE_CHECKING:
    from fleet_core.api import FleetRuntime
    from fleet_core.api.evaluation import LabelResult, LabelUpdate
    from fleet_core.events import TurnEvent
    from fleet_core.models import TurnSummary

log = logging.getLogger(__name__)
Source = Literal["mlflow", "store"]

#: Wire names of label fields (request and result) and the ``TraceLabels`` field behind each.
LABEL_WIRE: dict[str, str] = {
    "status": "review_status",
    "answer": "expected_answer",
    "values": "expected_values",
    "route": "route",
    "critical": "critical",
    "group": "source_group",
    "expectations": "structured_expectations",
    "reviewer": "reviewer",
}


@dataclass(frozen=True, slots=True)
class TraceDoc(TraceDocument):
    """A trace document plus where it was rendered from (``mlflow`` or ``store``)."""

    source: Source = "mlflow"
    note: str | None = None
    label_status: ReviewStatus | None = None  # a labelled trace's review status (listings)


def labels_to_wire(labels: Mapping[str, Any]) -> dict[str, Any]:
    """``TraceLabels`` fields in the protocol's vocabulary (``status``, ``answer``, ...)."""
    back = {field: name for name, field in LABEL_WIRE.items()}
    return {back.get(key, key): value for key, value in labels.items()}


def label_reply(result: LabelResult) -> TraceLabelReply:
    """A label update's outcome as ``fleet/trace/label`` answers it: labels in the request's
    names, and the trace document's URI when the trace's Session is known."""
    return TraceLabelReply(
        trace_id=result.trace_id,
        turn_id=result.turn_id,
        session_id=result.session_id,
        labels=labels_to_wire(result.labels.wire()),
        eligible=result.eligible,
        ineligible_reason=result.ineligible_reason,
        messages=list(result.messages),
        uri=trace_uri(result.session_id, result.trace_id) if result.session_id else None,
    )


def label_result_wire(result: LabelResult) -> dict[str, Any]:
    """The JSON of :func:`label_reply`, as the server sends it (``fleet-lsp eval label --json``)."""
    wire: dict[str, Any] = to_wire(label_reply(result))
    return wire


class TraceService:
    """Trace documents (MLflow first), lists and labels, all through the runtime's facade."""

    def __init__(self, events: Mapping[str, Sequence[TurnEvent]] | None = None) -> None:
        self.fallback = StoreTraceSource(events)

    # documents --------------------------------------------------------------------------------

    async def get(
        self, runtime: FleetRuntime, *, trace_id: str | None = None, turn_id: str | None = None
    ) -> TraceDoc:
        """The trace document of a Turn: from MLflow, or the store's outcome with a note."""
        from fleet_core.api.traces import TraceNotFound, TracingUnavailable

        if turn_id:
            try:
                turn: TurnSummary | None = await runtime.get_turn(turn_id)
            except TurnNotFound:
                raise TraceNotFound(
                    f"No Turn '{turn_id}' and so no trace for it; list a Session's traces with "
                    "fleet/trace/list (fleet-lsp sessions)",
                    turn_id=turn_id,
                ) from None
        elif trace_id:
            turn = await runtime.traces.find_turn(trace_id)
        else:
            raise InvalidInput("Give a traceId or a turnId")
        mlflow_id = turn.trace_id if turn is not None else trace_id
        note: str | None
        if mlflow_id is None:
            note = (
                "This Turn has no MLflow trace (tracing was off when it ran, or its trace "
                "could not be written); this document shows the stored outcome only."
            )
        else:
            try:
                view = await runtime.traces.load(mlflow_id)
            except TraceNotFound as exc:
                if turn is None:
                    raise TraceNotFound(
                        f"No trace '{trace_id}' in this store or at the MLflow destination; "
                        "list a Session's traces with fleet/trace/list",
                        trace_id=trace_id,
                    ) from None
                note = f"{exc.message}; this document shows the stored outcome only."
            except TracingUnavailable as exc:
                if turn is None:
                    raise TraceNotFound(
                        f"No trace '{trace_id}' in this store, and MLflow traces are "
                        f"unavailable: {exc.message}",
                        trace_id=trace_id,
                    ) from None
                note = (
                    f"MLflow traces are unavailable ({exc.message}); this document shows the "
                    "stored Turn outcome only."
                )
            else:
                session_id = view.session_id or (await _session_of(runtime, turn))
                return TraceDoc(
                    trace_id=mlflow_id,
                    turn_id=view.turn_id or (turn.turn_id if turn else ""),
                    session_id=session_id or "",
                    uri=trace_uri(session_id, mlflow_id) if session_id else "",
                    markdown=await runtime.traces.markdown(view),
                    source="mlflow",
                )
        assert turn is not None
        doc = await self.fallback.get(runtime, turn, note)
        return TraceDoc(
            trace_id=doc.trace_id,
            turn_id=doc.turn_id,
            session_id=doc.session_id,
            uri=doc.uri,
            markdown=doc.markdown,
            source="store",
            note=note,
        )

    async def list(self, runtime: FleetRuntime, session_id: str, limit: int) -> list[TraceDoc]:
        """The Session's Turns, oldest first, each with its trace id (or Turn id) and URI."""
        docs = []
        statuses = await runtime.traces.review_statuses(session_id)
        for turn in await runtime.history(session_id, limit=limit):
            tid = turn.trace_id or turn.turn_id
            docs.append(
                TraceDoc(
                    trace_id=tid,
                    turn_id=turn.turn_id,
                    session_id=session_id,
                    uri=trace_uri(session_id, tid),
                    markdown="",
                    source="mlflow" if turn.trace_id else "store",
                    label_status=statuses.get(tid),
                )
            )
        return docs

    # labels -----------------------------------------------------------------------------------

    async def label(self, runtime: FleetRuntime, trace_id: str, update: LabelUpdate) -> LabelResult:
        """Apply a partial label update (a trace id or a Turn id) in MLflow and the store."""
        return await runtime.traces.label(trace_id, update)


def label_update(
    *,
    status: str | None = None,
    answer: str | None = None,
    values: Sequence[Any] | Mapping[str, Any] | None = None,
    route: str | None = None,
    critical: bool | None = None,
    group: str | None = None,
    expectations: Mapping[str, Any] | None = None,
    reviewer: str | None = None,
) -> LabelUpdate:
    """A ``LabelUpdate`` from protocol/CLI values; ``InvalidInput`` (-32602) names the field."""
    from fleet_core.api.evaluation import LabelUpdate, parse_expectations

    if status is not None and status not in REVIEW_STATUSES:
        raise InvalidInput(
            f"'status' must be one of: {', '.join(REVIEW_STATUSES)}; got {status!r}", field="status"
        )
    if route is not None and route not in ROUTES:
        raise InvalidInput(
            f"'route' must be one of: {', '.join(ROUTES)}; got {route!r}", field="route"
        )
    expected: list[str] | None = None
    if values is not None:
        items = list(values.values()) if isinstance(values, Mapping) else list(values)
        expected = []
        for item in items:
            if isinstance(item, bool) or not isinstance(item, str | int | float):
                raise InvalidInput(
                    f"'values' must be a list of strings or numbers; got {item!r}", field="values"
                )
            text = str(item).strip()
            if not text:
                raise InvalidInput("'values' must not contain blank values", field="values")
            expected.append(text)
    if expectations is not None:
        parse_expectations(dict(expectations))  # LabelInvalid names the offending field
    if group is not None and not group.strip():
        raise InvalidInput("'group' must not be blank", field="group")
    fields: dict[str, Any] = {
        "review_status": status,
        "expected_answer": answer,
        "expected_values": expected,
        "route": route,
        "critical": critical,
        "source_group": group,
        "structured_expectations": dict(expectations) if expectations is not None else None,
        "reviewer": reviewer,
    }
    if all(value is None for value in fields.values()):
        raise InvalidInput(
            "Give at least one label: "
            + ", ".join(name for name in LABEL_WIRE if name != "reviewer")
        )
    return LabelUpdate(**{k: v for k, v in fields.items() if v is not None})


async def _session_of(runtime: FleetRuntime, turn: TurnSummary | None) -> str | None:
    if turn is None:
        return None
    try:
        return await runtime.turn_session(turn.turn_id)
    except FleetError:
        return None
