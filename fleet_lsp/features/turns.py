"""``fleet/turn/run`` and ``fleet/turn/cancel``.

A Turn runs as its own asyncio task (``runtime.run_turn``) awaited by the request. The three
cancel routes end in the same place, :meth:`RunningTurn.cancel` / ``task.cancel()``:

- ``$/cancelRequest`` on ``fleet/turn/run``: pygls cancels the request task, which cancels the
  Turn task it awaits; the client gets -32800.
- ``window/workDoneProgress/cancel`` on the Turn's token and ``fleet/turn/cancel {turnId}``:
  the Turn task is cancelled; the request resolves with ``status: "cancelled"``.

Either way the progress tokens end with ``cancelled`` (children first) and are forgotten.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from fleet_core.errors import FleetError, InvalidInput, TurnBusy, TurnNotFound
from fleet_lsp.protocol import TurnCancelParams, TurnRunParams

if TYPE_CHECKING:
    from fleet_core.api import FleetRuntime
    from fleet_core.events import TurnEvent
    from fleet_lsp.server import FleetServer

log = logging.getLogger(__name__)
CANCEL_GRACE_SECONDS = 15.0


def register(server: FleetServer) -> None:
    @server.fleet_method("fleet/turn/run")
    async def run(ls: FleetServer, p: TurnRunParams) -> dict[str, Any]:
        return await run_turn(ls, p)

    @server.fleet_method("fleet/turn/cancel")
    async def cancel(ls: FleetServer, p: TurnCancelParams) -> None:
        running = ls.turns_by_id.get(p.turn_id)
        if running is not None:
            running.cancel("fleet/turn/cancel")
            return
        runtime = await ls.runtime()
        if await runtime.cancel_turn(p.turn_id):
            return
        try:  # a finished Turn: cancelling it is a no-op
            await runtime.get_turn(p.turn_id)
        except TurnNotFound:
            raise TurnNotFound(
                f"No Turn '{p.turn_id}' is running here; see fleet/session/history for its state",
                turn_id=p.turn_id,
            ) from None


async def run_turn(ls: FleetServer, p: TurnRunParams) -> dict[str, Any]:
    held = _hold_client_token(ls, p.work_done_token)
    try:
        return await _run_turn(ls, p)
    finally:
        if held is not None:  # the Turn's progress forgets it too; this covers early errors
            ls.work_done_progress.tokens.pop(held, None)


def _hold_client_token(ls: FleetServer, token: int | str | None) -> int | str | None:
    """Register the client's progress token before the first await, so a
    ``window/workDoneProgress/cancel`` that overtakes the Turn's start is not lost."""
    if token is None:
        return None
    from fleet_lsp.server import FleetProtocol

    future = ls.work_done_progress.tokens.setdefault(token, Future())
    if isinstance(ls.protocol, FleetProtocol) and ls.protocol.take_early_cancel(token):
        future.cancel()  # the Turn's progress sees a cancelled token and cancels at start
    return token


async def _run_turn(ls: FleetServer, p: TurnRunParams) -> dict[str, Any]:
    from fleet_lsp.progress import TurnProgress
    from fleet_lsp.server import RunningTurn

    runtime = await ls.runtime()
    busy = ls.turns_by_session.get(p.session_id)  # this server's request for it, if any
    if busy is not None:
        raise TurnBusy.running(p.session_id, busy.turn_id)
    runtime.check_not_busy(p.session_id)  # a Turn started here by another route
    from pydantic import ValidationError

    from fleet_core.models import TurnRequest

    try:
        request = TurnRequest(
            session_id=p.session_id,
            task=p.task,
            mode=p.mode,
            timeout_seconds=p.timeout_seconds,
            record_replay=p.record_replay,
            idempotency_key=p.idempotency_key,
        )
    except ValidationError as exc:
        raise InvalidInput(f"Invalid Turn request: {exc.errors()[0]['msg']}") from None

    running = RunningTurn(session_id=p.session_id)
    ls.turns_by_session[p.session_id] = running
    token = p.work_done_token if p.work_done_token is not None else ls.command_work_done_token()
    progress = TurnProgress(
        ls,
        session_id=p.session_id,
        task=p.task,
        client_token=token,
        supports_create=ls.client.work_done_progress,
        turn_events=ls.client.turn_events,
        supports_content_refresh=ls.client.text_document_content,
        reports_per_second=runtime.config.settings.server.progress_reports_per_second,
        on_cancel=lambda: _cancel(running, "window/workDoneProgress/cancel"),
        seq_lookup=lambda turn_id: _turn_seq(runtime, turn_id),
    )
    running.progress = progress

    def on_event(event: TurnEvent) -> None:
        if running.turn_id is None:
            running.turn_id = event.turn_id
            ls.turns_by_id[event.turn_id] = running
        ls.log_event(event)
        progress.on_event(event)

    try:
        await progress.start()
        inner = asyncio.ensure_future(runtime.run_turn(request, on_event=on_event))
        running.task = inner
        if running.cancel_route is not None:  # cancelled before the Turn started
            inner.cancel()
        try:
            result = await inner
        except asyncio.CancelledError:
            me = asyncio.current_task()
            if me is not None and me.cancelling():  # $/cancelRequest (or shutdown)
                inner.cancel()
                await asyncio.wait({inner}, timeout=CANCEL_GRACE_SECONDS)
                await progress.finish("cancelled")
                raise
            cancelled = await _cancelled_result(ls, running)
            await progress.finish("cancelled", running.turn_id)
            ls.session_changed(p.session_id, "updated")
            return cancelled
        except FleetError:
            await progress.finish("failed")
            raise
        except Exception:
            log.exception("Turn failed unexpectedly")
            await progress.finish("failed")
            raise
        wire: dict[str, Any] = result.wire()
        for artifact in wire.get("artifacts", []):
            if isinstance(artifact, dict) and isinstance(artifact.get("path"), str):
                progress.artifact_changed(artifact["path"])
        await progress.finish(wire["status"], wire["turnId"])
        ls.session_changed(p.session_id, "updated")
        return wire
    finally:
        ls.turns_by_session.pop(p.session_id, None)
        if running.turn_id:
            ls.turns_by_id.pop(running.turn_id, None)


def _cancel(running: Any, route: str) -> None:
    running.cancel(route)


async def _turn_seq(runtime: FleetRuntime, turn_id: str) -> int | None:
    summary = await runtime.get_turn(turn_id)
    return int(summary.seq)


async def _cancelled_result(ls: FleetServer, running: Any) -> dict[str, Any]:
    """The TurnResult of a Turn cancelled by progress-cancel or fleet/turn/cancel: the one the
    core committed, else (nothing committed yet, e.g. cancelled before it started) the core's
    ``TurnResult.cancelled``."""
    from fleet_core.models import TurnResult

    route = running.cancel_route
    base: dict[str, Any] = TurnResult.cancelled(
        running.turn_id or "",
        running.session_id,
        f"The Turn was cancelled by {route}" if route else "The Turn was cancelled",
    ).wire()
    if running.turn_id:
        runtime = await ls.runtime()
        try:
            stored = await runtime.turn_result(running.turn_id)
        except FleetError:
            stored = {}
        if stored.get("status") == "cancelled" and "turnId" in stored:
            return {**base, **stored}
    return base
