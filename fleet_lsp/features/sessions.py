"""``fleet/session/*``: new, load, list, close, delete, setMode, history."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fleet_core.errors import TurnBusy
from fleet_lsp.protocol import (
    HistoryParams,
    HistoryReply,
    SessionListParams,
    SessionListReply,
    SessionNewParams,
    SessionParams,
    SessionReply,
    SetModeParams,
)

if TYPE_CHECKING:
    from fleet_lsp.server import FleetServer


def register(server: FleetServer) -> None:
    @server.fleet_method("fleet/session/new")
    async def new(ls: FleetServer, p: SessionNewParams) -> SessionReply:
        runtime = await ls.runtime()
        info = await runtime.new_session(p.session_id, p.mode)
        ls.session_changed(info.session_id, "created")
        return SessionReply(info)

    @server.fleet_method("fleet/session/load")
    async def load(ls: FleetServer, p: SessionParams) -> SessionReply:
        runtime = await ls.runtime()
        return SessionReply(await runtime.load_session(p.session_id))

    @server.fleet_method("fleet/session/list")
    async def list_(ls: FleetServer, p: SessionListParams) -> SessionListReply:
        runtime = await ls.runtime()
        page = await runtime.sessions_page(
            p.cursor,
            p.limit,
            owner_host=p.owner_host,
            owner_user=p.owner_user,
            updated_since=p.updated_since,
        )
        return SessionListReply(
            sessions=[SessionReply(s) for s in page.sessions], next_cursor=page.next_cursor
        )

    @server.fleet_method("fleet/session/close")
    async def close(ls: FleetServer, p: SessionParams) -> None:
        runtime = await ls.runtime()
        _not_running(ls, p.session_id, "close")
        await runtime.close_session(p.session_id)
        ls.session_changed(p.session_id, "closed")

    @server.fleet_method("fleet/session/delete")
    async def delete(ls: FleetServer, p: SessionParams) -> None:
        runtime = await ls.runtime()
        _not_running(ls, p.session_id, "delete")
        await runtime.delete_session(p.session_id)
        ls.session_changed(p.session_id, "deleted")

    @server.fleet_method("fleet/session/setMode")
    async def set_mode(ls: FleetServer, p: SetModeParams) -> SessionReply:
        runtime = await ls.runtime()
        info = await runtime.set_mode(p.session_id, p.mode)
        ls.session_changed(p.session_id, "updated")
        return SessionReply(info)

    @server.fleet_method("fleet/session/history")
    async def history(ls: FleetServer, p: HistoryParams) -> HistoryReply:
        runtime = await ls.runtime()
        return HistoryReply(turns=await runtime.history(p.session_id, limit=p.limit or 50))


def _not_running(ls: FleetServer, session_id: str, verb: str) -> None:
    running = ls.editor_turns.in_session(session_id)
    if running is not None:
        raise TurnBusy.running(session_id, running.turn_id, f"{verb} the Session")
