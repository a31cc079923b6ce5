"""``fleet/turn/run`` and ``fleet/turn/cancel``, and :class:`EditorTurns`, the Turns this
server is running.

A Turn runs as its own asyncio task (``runtime.run_turn``) awaited by the request. The three
cancel routes end in the same place, :meth:`EditorTurn.cancel` / ``task.cancel()``:

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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fleet_core.errors import FleetError, InvalidInput, TurnBusy, TurnNotFound
from fleet_lsp.protocol import TurnCancelParams, TurnRunParams

if TYPE_CHECKING:
    from fleet_core.api import FleetRuntime
    from fleet_core.events import TurnEvent
    from fleet_core.models import TurnRequest, TurnResult
    from fleet_lsp.progress import TurnProgress
    from fleet_lsp.server import FleetServer

log = logging.getLogger(__name__)
CANCEL_GRACE_SECONDS = 15.0


@dataclass
class EditorTurn:
    """A Turn this server runs for its editor (the core's ``RunningTurn`` is the Turn service's
    view of it); every cancel route ends in :meth:`cancel`."""

    session_id: str
    task: asyncio.Future[Any] | None = None
    turn_id: str | None = None
    progress: TurnProgress | None = None
    cancel_route: str | None = None

    def cancel(self, route: str) -> bool:
        """Cancel the Turn; before its task exists, the cancel is kept and applied at start."""
        if self.task is not None and self.task.done():
            return False
        self.cancel_route = self.cancel_route or route
        if self.task is not None:
            self.task.cancel()
        return True


class EditorTurns:
    """The Turns this server is running: one per Session, found by Session or by Turn id."""

    def __init__(self) -> None:
        self._by_session: dict[str, EditorTurn] = {}
        self._by_id: dict[str, EditorTurn] = {}

    def start(self, session_id: str) -> EditorTurn:
        """Hold the Session for a new Turn (``TurnBusy`` while this server runs one there)."""
        busy = self._by_session.get(session_id)
        if busy is not None:
            raise TurnBusy.running(session_id, busy.turn_id)
        turn = self._by_session[session_id] = EditorTurn(session_id=session_id)
        return turn

    def name(self, turn: EditorTurn, turn_id: str) -> None:
        """The Turn's id, from its first event: it can be found (and cancelled) by it now."""
        if turn.turn_id is None:
            turn.turn_id = turn_id
            self._by_id[turn_id] = turn

    def finish(self, turn: EditorTurn) -> None:
        """The Turn's request is over: forget it."""
        self._by_session.pop(turn.session_id, None)
        if turn.turn_id:
            self._by_id.pop(turn.turn_id, None)

    def in_session(self, session_id: str) -> EditorTurn | None:
        return self._by_session.get(session_id)

    def find(self, turn_id: str) -> EditorTurn | None:
        return self._by_id.get(turn_id)

    def running(self) -> list[EditorTurn]:
        return list(self._by_session.values())

    async def stop(self) -> None:
        """Shutdown: cancel every running Turn."""
        for turn in self.running():
            turn.cancel("shutdown")


def register(server: FleetServer) -> None:
    @server.fleet_method("fleet/turn/run")
    async def run(ls: FleetServer, p: TurnRunParams) -> TurnResult:
        return await run_turn(ls, p)

    @server.fleet_method("fleet/turn/cancel")
    async def cancel(ls: FleetServer, p: TurnCancelParams) -> None:
        running = ls.editor_turns.find(p.turn_id)
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


async def run_turn(ls: FleetServer, p: TurnRunParams) -> TurnResult:
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


async def _run_turn(ls: FleetServer, p: TurnRunParams) -> TurnResult:
    runtime = await ls.runtime()
    running = ls.editor_turns.start(p.session_id)  # TurnBusy: this server runs one there
    try:
        runtime.check_not_busy(p.session_id)  # a Turn started here by another route
        request = _turn_request(p)
        progress = _progress(ls, runtime, running, p)
        running.progress = progress

        def on_event(event: TurnEvent) -> None:
            ls.editor_turns.name(running, event.turn_id)
            ls.trace_documents.record(event)
            progress.on_event(event)

        await progress.start()
        inner = asyncio.ensure_future(runtime.run_turn(request, on_event=on_event))
        running.task = inner
        if running.cancel_route is not None:  # cancelled before the Turn started
            inner.cancel()
        return await _outcome(ls, running, progress, inner)
    finally:
        ls.editor_turns.finish(running)


def _turn_request(p: TurnRunParams) -> TurnRequest:
    from pydantic import ValidationError

    from fleet_core.models import TurnRequest

    try:
        return TurnRequest(
            session_id=p.session_id,
            task=p.task,
            mode=p.mode,
            timeout_seconds=p.timeout_seconds,
            record_replay=p.record_replay,
            idempotency_key=p.idempotency_key,
        )
    except ValidationError as exc:
        raise InvalidInput(f"Invalid Turn request: {exc.errors()[0]['msg']}") from None


def _progress(
    ls: FleetServer, runtime: FleetRuntime, running: EditorTurn, p: TurnRunParams
) -> TurnProgress:
    """The Turn's ``$/progress`` and ``fleet/turn/didEmit``, on the client's token if it sent
    one (the request's, else the command's)."""
    from fleet_lsp.progress import TurnProgress

    def cancelled_by_token() -> None:
        running.cancel("window/workDoneProgress/cancel")

    token = p.work_done_token if p.work_done_token is not None else ls.command_work_done_token()
    return TurnProgress(
        ls,
        session_id=p.session_id,
        task=p.task,
        client_token=token,
        supports_create=ls.client.work_done_progress,
        turn_events=ls.client.turn_events,
        supports_content_refresh=ls.client.text_document_content,
        reports_per_second=runtime.config.settings.server.progress_reports_per_second,
        on_cancel=cancelled_by_token,
        seq_lookup=lambda turn_id: _turn_seq(runtime, turn_id),
    )


async def _outcome(
    ls: FleetServer,
    running: EditorTurn,
    progress: TurnProgress,
    inner: asyncio.Future[TurnResult],
) -> TurnResult:
    """Await the Turn task and end its progress: its result, or the cancelled one."""
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
        ls.session_changed(running.session_id, "updated")
        return cancelled
    except FleetError:
        await progress.finish("failed")
        raise
    except Exception:
        log.exception("Turn failed unexpectedly")
        await progress.finish("failed")
        raise
    for artifact in result.artifacts:
        progress.artifact_changed(artifact.path)
    outcome = result.outcome.kind if result.outcome is not None else None
    await progress.finish(result.status, result.turn_id, outcome)
    ls.session_changed(running.session_id, "updated")
    return result


async def _turn_seq(runtime: FleetRuntime, turn_id: str) -> int | None:
    summary = await runtime.get_turn(turn_id)
    return int(summary.seq)


async def _cancelled_result(ls: FleetServer, running: EditorTurn) -> TurnResult:
    """The TurnResult of a Turn cancelled by progress-cancel or fleet/turn/cancel: the one the
    core committed, else (nothing committed yet, e.g. cancelled before it started) the core's
    ``TurnResult.cancelled``."""
    from fleet_core.models import TurnResult

    route = running.cancel_route
    base = TurnResult.cancelled(
        running.turn_id or "",
        running.session_id,
        f"The Turn was cancelled by {route}" if route else "The Turn was cancelled",
    )
    if running.turn_id:
        runtime = await ls.runtime()
        try:
            stored = await runtime.turn_result(running.turn_id)
        except FleetError:
            stored = {}
        if stored.get("status") == "cancelled" and "turnId" in stored:
            try:
                return TurnResult.model_validate({**base.wire(), **stored})
            except ValueError:  # pydantic's ValidationError: not a TurnResult after all
                log.warning("the stored result of Turn %s is not a TurnResult", running.turn_id)
    return base
