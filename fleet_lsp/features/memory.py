"""``fleet/memory/*``: list a Session's memories, add one, review (or un-review) and reject one."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fleet_lsp.protocol import (
    MemoryAddParams,
    MemoryAddReply,
    MemoryListParams,
    MemoryListReply,
    MemoryRejectParams,
    MemoryReviewParams,
)

if TYPE_CHECKING:
    from fleet_lsp.server import FleetServer


def register(server: FleetServer) -> None:
    @server.fleet_method("fleet/memory/list")
    async def list_(ls: FleetServer, p: MemoryListParams) -> MemoryListReply:
        runtime = await ls.runtime()
        memories = await runtime.memories(p.session_id, reviewed=p.reviewed)
        summary = await runtime.memory_summary(p.session_id)
        return MemoryListReply(memories=memories, summary=summary)

    @server.fleet_method("fleet/memory/add")
    async def add(ls: FleetServer, p: MemoryAddParams) -> MemoryAddReply:
        runtime = await ls.runtime()
        memory = await runtime.add_memory(p.session_id, p.content, kind=p.kind)
        return MemoryAddReply(memory=memory)

    @server.fleet_method("fleet/memory/review")
    async def review(ls: FleetServer, p: MemoryReviewParams) -> None:
        runtime = await ls.runtime()
        await runtime.review_memory(p.session_id, p.memory_id, p.reviewed)

    @server.fleet_method("fleet/memory/reject")
    async def reject(ls: FleetServer, p: MemoryRejectParams) -> None:
        runtime = await ls.runtime()
        await runtime.reject_memory(p.session_id, p.memory_id)
