"""``fleet/optimize/status``, ``fleet/optimize/run`` and ``fleet/optimize/approve``.

A run is ``FleetRuntime.optimization.run`` awaited by the request, with ``$/progress`` on the
client's ``workDoneToken`` (or a server-created one). Both cancel routes set the run's cancel
flag and wait for it to stop between rollouts (no candidate is saved, the active program is
unchanged):

- ``$/cancelRequest``: pygls cancels the request task; the client gets -32800.
- ``window/workDoneProgress/cancel`` on the run's token: the request answers -32800 too
  (``data.kind`` ``RequestCancelled``), with the route in the message.

One run per Session, and at most ``MAX_RUNS`` runs, at a time on this server
(:class:`OptimizationRuns`). Reports open as
read-only documents (``fleet:/sessions/<id>/optimization/<version>.md``, see
``fleet_lsp.documents``).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from pygls.exceptions import JsonRpcException

from fleet_core.errors import FleetError, InvalidInput
from fleet_lsp.documents import optimization_report_uri
from fleet_lsp.features.turns import _hold_client_token
from fleet_lsp.protocol import (
    REQUEST_CANCELLED,
    CandidateWire,
    OptimizeApproveParams,
    OptimizeRunParams,
    OptimizeRunReply,
    OptimizeStatusReply,
    SessionParams,
    candidate_wire,
    gate_wire,
)

if TYPE_CHECKING:
    from fleet_core.api import CandidateInfo, OptimizationRun
    from fleet_lsp.progress import OptimizeProgress
    from fleet_lsp.server import FleetServer

#: Optimization runs at once on one server (each replays many Turns).
MAX_RUNS = 2


class OptimizationRuns:
    """The ``fleet/optimize/run`` requests this server is running, each with its cancel flag:
    one per Session and at most ``max_runs`` at once."""

    def __init__(self, max_runs: int = MAX_RUNS) -> None:
        self.max_runs = max_runs
        self._cancels: dict[str, threading.Event] = {}

    def start(self, session_id: str) -> threading.Event:
        """The cancel flag of a new run of the Session; ``InvalidInput`` while the Session has
        one here or ``max_runs`` are running."""
        if session_id in self._cancels:
            raise InvalidInput(
                f"An optimization of Session '{session_id}' is already running on this server; "
                "cancel it or wait for it"
            )
        if len(self._cancels) >= self.max_runs:
            raise InvalidInput(
                f"{len(self._cancels)} optimizations are already running on this server (at "
                f"most {self.max_runs}: each runs many Turns); cancel one or wait for it"
            )
        cancel = self._cancels[session_id] = threading.Event()
        return cancel

    def finish(self, session_id: str) -> None:
        self._cancels.pop(session_id, None)

    async def stop(self) -> None:
        """Shutdown: every run stops between rollouts (no candidate is saved)."""
        for cancel in list(self._cancels.values()):
            cancel.set()


def register(server: FleetServer) -> None:
    @server.fleet_method("fleet/optimize/status")
    async def status(ls: FleetServer, p: SessionParams) -> OptimizeStatusReply:
        runtime = await ls.runtime()
        found = await runtime.optimization.status(p.session_id)
        return OptimizeStatusReply(
            session_id=found.session_id,
            active_digest=found.active_digest,
            active_version=found.active_version,
            candidates=[_candidate(p.session_id, c) for c in found.candidates],
        )

    @server.fleet_method("fleet/optimize/run")
    async def run(ls: FleetServer, p: OptimizeRunParams) -> OptimizeRunReply:
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


async def _run(ls: FleetServer, p: OptimizeRunParams) -> OptimizeRunReply:
    if p.budget is not None and p.max_metric_calls is not None:
        raise InvalidInput("Give either 'budget' or 'maxMetricCalls', not both")
    runtime = await ls.runtime()
    cancel = ls.optimization_runs.start(p.session_id)
    routes: list[str] = []

    def cancelled_by_token() -> None:
        routes.append("window/workDoneProgress/cancel")
        cancel.set()

    try:
        progress = _progress(ls, p, cancelled_by_token)
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
        return _run_reply(p.session_id, result)
    finally:
        ls.optimization_runs.finish(p.session_id)


def _progress(
    ls: FleetServer, p: OptimizeRunParams, on_cancel: Callable[[], None]
) -> OptimizeProgress:
    """The run's ``$/progress``, on the client's token if it sent one (the request's, else the
    command's)."""
    from fleet_lsp.progress import OptimizeProgress

    token = p.work_done_token if p.work_done_token is not None else ls.command_work_done_token()
    return OptimizeProgress(
        ls,
        session_id=p.session_id,
        client_token=token,
        supports_create=ls.client.work_done_progress,
        on_cancel=on_cancel,
    )


def _run_reply(session_id: str, result: OptimizationRun) -> OptimizeRunReply:
    return OptimizeRunReply(
        session_id=session_id,
        version=result.version,
        gate_passed=result.gate_passed,
        gate=gate_wire(result.gate),
        changed_components=list(result.changed_components),
        candidate_digest=result.candidate_digest,
        report_uri=optimization_report_uri(session_id, result.version),
        rollouts=result.rollouts,
        host_seconds=round(result.host_seconds, 3),
        dataset_sizes=dict(result.dataset_sizes),
        mlflow_run_id=result.mlflow_run_id,
        notes=list(result.notes),
    )


def _cancelled(route: str) -> JsonRpcException:
    return JsonRpcException(
        f"The optimization was cancelled ({route}): no candidate was saved and the active "
        "program is unchanged",
        code=REQUEST_CANCELLED,
        data={"kind": "RequestCancelled"},
    )
