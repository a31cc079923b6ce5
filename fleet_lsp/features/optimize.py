"""``fleet/optimize/status``, ``fleet/optimize/run`` and ``fleet/optimize/approve``.

A run is ``FleetRuntime.optimization.run`` awaited by the request, with ``$/progress`` on the
client's ``workDoneToken`` (or a server-created one). Both cancel routes set the run's cancel
flag and wait for it to stop between rollouts (no candidate is saved, the active program is
unchanged):

- ``$/cancelRequest``: pygls cancels the request task; the client gets -32800.
- ``window/workDoneProgress/cancel`` on the run's token: the request answers -32800 too
  (``data.kind`` ``RequestCancelled``), with the route in the message.

One run per Session, and at most ``MAX_RUNS`` runs, at a time on this server. Reports open as
read-only documents (``fleet:/sessions/<id>/optimization/<version>.md``, see
``fleet_lsp.documents``).
"""

from __future__ import annotations

import asyncio
import threading
from typing import TYPE_CHECKING, Any

from pygls.exceptions import JsonRpcException

from fleet_core.errors import FleetError, InvalidInput
from fleet_lsp.documents import optimization_report_uri
from fleet_lsp.features.turns import _hold_client_token
from fleet_lsp.protocol import (
    REQUEST_CANCELLED,
    CandidateWire,
    OptimizeApproveParams,
    OptimizeRunParams,
    SessionParams,
    candidate_wire,
    gate_wire,
)

if TYPE_CHECKING:
    from fleet_core.api import CandidateInfo
    from fleet_lsp.server import FleetServer

#: Optimization runs at once on one server (each replays many Turns).
MAX_RUNS = 2


def register(server: FleetServer) -> None:
    @server.fleet_method("fleet/optimize/status")
    async def status(ls: FleetServer, p: SessionParams) -> dict[str, Any]:
        runtime = await ls.runtime()
        found = await runtime.optimization.status(p.session_id)
        return {
            "sessionId": found.session_id,
            "activeDigest": found.active_digest,
            "activeVersion": found.active_version,
            "candidates": [_candidate(p.session_id, c) for c in found.candidates],
        }

    @server.fleet_method("fleet/optimize/run")
    async def run(ls: FleetServer, p: OptimizeRunParams) -> dict[str, Any]:
        held = _hold_client_token(ls, p.work_done_token)
        try:
            return await _run(ls, p)
        finally:
            if held is not None:
                ls.work_done_progress.tokens.pop(held, None)

    @server.fleet_method("fleet/optimize/approve")
    async def approve(ls: FleetServer, p: OptimizeApproveParams) -> CandidateWire:
        runtime = await ls.runtime()
        approved = await runtime.optimization.approve(p.session_id, p.version)
        ls.session_changed(p.session_id, "updated")
        return _candidate(p.session_id, approved)


def _candidate(session_id: str, c: CandidateInfo) -> CandidateWire:
    return candidate_wire(c, optimization_report_uri(session_id, c.version))


async def _run(ls: FleetServer, p: OptimizeRunParams) -> dict[str, Any]:
    from fleet_lsp.progress import OptimizeProgress

    if p.budget is not None and p.max_metric_calls is not None:
        raise InvalidInput("Give either 'budget' or 'maxMetricCalls', not both")
    runtime = await ls.runtime()
    if p.session_id in ls.optimizations:
        raise InvalidInput(
            f"An optimization of Session '{p.session_id}' is already running on this server; "
            "cancel it or wait for it"
        )
    if len(ls.optimizations) >= MAX_RUNS:
        raise InvalidInput(
            f"{len(ls.optimizations)} optimizations are already running on this server (at most "
            f"{MAX_RUNS}: each runs many Turns); cancel one or wait for it"
        )
    cancel = threading.Event()
    routes: list[str] = []

    def cancelled_by_token() -> None:
        routes.append("window/workDoneProgress/cancel")
        cancel.set()

    ls.optimizations[p.session_id] = cancel
    token = p.work_done_token if p.work_done_token is not None else ls.command_work_done_token()
    progress = OptimizeProgress(
        ls,
        session_id=p.session_id,
        client_token=token,
        supports_create=ls.client.work_done_progress,
        on_cancel=cancelled_by_token,
    )
    try:
        await progress.start(f"Optimizing {p.session_id}")  # a cancelled token cancels at once
        try:
            result = await runtime.optimization.run(
                p.session_id,
                budget=p.budget if p.max_metric_calls is None else None,
                max_metric_calls=p.max_metric_calls,
                seed=p.seed or 0,
                on_progress=progress.report,
                cancel=cancel,
            )
        except asyncio.CancelledError:  # $/cancelRequest (or shutdown): the run has stopped
            progress.finish("cancelled")
            raise
        except FleetError:
            progress.finish("cancelled" if cancel.is_set() else "failed")
            if cancel.is_set():
                raise _cancelled(routes[0] if routes else "shutdown") from None
            raise
        except Exception:
            progress.finish("failed")
            raise
        progress.finish("done", result.version)
        ls.session_changed(p.session_id, "updated")
        return {
            "sessionId": p.session_id,
            "version": result.version,
            "gatePassed": result.gate_passed,
            "gate": gate_wire(result.gate),
            "changedComponents": list(result.changed_components),
            "candidateDigest": result.candidate_digest,
            "reportUri": optimization_report_uri(p.session_id, result.version),
            "rollouts": result.rollouts,
            "hostSeconds": round(result.host_seconds, 3),
            "datasetSizes": dict(result.dataset_sizes),
            "mlflowRunId": result.mlflow_run_id,
            "notes": list(result.notes),
        }
    finally:
        ls.optimizations.pop(p.session_id, None)


def _cancelled(route: str) -> JsonRpcException:
    return JsonRpcException(
        f"The optimization was cancelled ({route}): no candidate was saved and the active "
        "program is unchanged",
        code=REQUEST_CANCELLED,
        data={"kind": "RequestCancelled"},
    )
