"""``fleet/session/*``: new, load, list, close, delete, setMode, history."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fleet_core.errors import TurnBusy
from fleet_lsp.protocol import (
    HistoryParams,
    SessionListParams,
    SessionNewParams,
    SessionParams,
    SetModeParams,
)

if TYPE_CHECKING:
    from fleet_lsp.server import FleetServer


def session_wire(info: Any) -> dict[str, Any]:
    """``SessionInfo`` on the wire (selections are server-side detail)."""
    wire: dict[str, Any] = info.wire()
    wire.pop("selections", None)
    return wire


def register(server: FleetServer) -> None:
    @server.fleet_method("fleet/session/new")
    async def new(ls: FleetServer, p: SessionNewParams) -> dict[str, Any]:
        runtime = await ls.runtime()
        info = await runtime.new_session(p.session_id, p.mode)
        ls.session_changed(info.session_id, "created")
        return session_wire(info)

    @server.fleet_method("fleet/session/load")
    async def load(ls: FleetServer, p: SessionParams) -> dict[str, Any]:
        runtime = await ls.runtime()
        return session_wire(await runtime.load_session(p.session_id))

    @server.fleet_method("fleet/session/list")
    async def list_(ls: FleetServer, p: SessionListParams) -> dict[str, Any]:
        runtime = await ls.runtime()
        page = await runtime.sessions_page(p.cursor, p.limit)
        result: dict[str, Any] = {"sessions": [session_wire(s) for s in page.sessions]}
        if page.next_cursor is not None:
            result["nextCursor"] = page.next_cursor
        return result

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
    async def set_mode(ls: FleetServer, p: SetModeParams) -> dict[str, Any]:
        runtime = await ls.runtime()
        info = await runtime.set_mode(p.session_id, p.mode)
        ls.session_changed(p.session_id, "updated")
        return session_wire(info)

    @server.fleet_method("fleet/session/history")
    async def history(ls: FleetServer, p: HistoryParams) -> dict[str, Any]:
        runtime = await ls.runtime()
        turns = await runtime.history(p.session_id, limit=p.limit or 50)
        return {"turns": [t.wire() for t in turns]}


def _not_running(ls: FleetServer, session_id: str, verb: str) -> None:
    running = ls.turns_by_session.get(session_id)
    if running is not None:
        raise TurnBusy.running(session_id, running.turn_id, f"{verb} the Session")
