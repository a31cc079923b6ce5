"""``fleet/memory/*`` over the protocol: a Turn's learned note proposed as a memory, a user's
memory added, reviewed and rejected, and only reviewed memories that the task mentions reaching
the scripted model (its rules reply by what the prompt holds)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from pytest_lsp import LanguageClient

from fleet_core.engine.scripted_lm import submit
from fleet_lsp.protocol import ERROR_CODES
from tests.lsp.conftest import CLIENTS, call, call_error, scripted_lsp

pytestmark = pytest.mark.asyncio(loop_scope="module")

NOTE = "Widgets ship from Lyon"
SCRIPT: dict[str, Any] = {
    "root": {
        "rules": {
            # the reviewed-memories section shows a memory as "- [kind] content"
            "ZZTOP": submit("'leaked'"),
            f"[learned_note] {NOTE}": submit("'shown'"),
            # later prompts hold earlier tasks (the history): the later task's rule comes first
            "How do widgets": submit("'hidden'"),
            "NOTE-TURN": submit("'noted'", note=NOTE),
        }
    }
}


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=CLIENTS)
async def lsp(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[LanguageClient]:
    async for client in scripted_lsp(request.param, tmp_path_factory, SCRIPT, "memory"):
        yield client


async def run(lsp: LanguageClient, session_id: str, task: str) -> str:
    result = await call(lsp, "fleet/turn/run", {"sessionId": session_id, "task": task})
    assert result["status"] == "completed", result
    return str(result["answer"])


async def test_memories_from_a_turn_and_the_user_reviewed_then_shown(lsp: LanguageClient) -> None:
    sid = f"m-{uuid.uuid4().hex[:8]}"
    await call(lsp, "fleet/session/new", {"sessionId": sid, "mode": "rlm"})
    assert await run(lsp, sid, "NOTE-TURN: look at the stock") == "noted"
    listed = await call(lsp, "fleet/memory/list", {"sessionId": sid})
    [proposed] = listed["memories"]
    assert (proposed["kind"], proposed["content"], proposed["reviewed"]) == (
        "learned_note",
        NOTE,
        False,
    )
    assert set(proposed["sources"]) == {"turnId"}
    assert NOTE in listed["summary"]

    added = (
        await call(
            lsp,
            "fleet/memory/add",
            {"sessionId": sid, "content": "widgets ZZTOP secret", "kind": "preference"},
        )
    )["memory"]
    assert (added["kind"], added["reviewed"]) == ("preference", False)

    # nothing reviewed: neither memory reaches the model
    assert await run(lsp, sid, "How do widgets ship?") == "hidden"
    await call(lsp, "fleet/memory/review", {"sessionId": sid, "memoryId": proposed["memoryId"]})
    assert await run(lsp, sid, "How do widgets ship?") == "shown"
    reviewed = await call(lsp, "fleet/memory/list", {"sessionId": sid, "reviewed": True})
    assert [m["memoryId"] for m in reviewed["memories"]] == [proposed["memoryId"]]

    await call(lsp, "fleet/memory/reject", {"sessionId": sid, "memoryId": added["memoryId"]})
    remaining = await call(lsp, "fleet/memory/list", {"sessionId": sid})
    assert [m["memoryId"] for m in remaining["memories"]] == [proposed["memoryId"]]
    missing = await call_error(
        lsp, "fleet/memory/reject", {"sessionId": sid, "memoryId": added["memoryId"]}
    )
    assert missing.code == ERROR_CODES["MemoryNotFound"]


async def test_memory_add_bounds(lsp: LanguageClient) -> None:
    sid = f"b-{uuid.uuid4().hex[:8]}"
    await call(lsp, "fleet/session/new", {"sessionId": sid})
    too_long = await call_error(lsp, "fleet/memory/add", {"sessionId": sid, "content": "x" * 4_001})
    assert too_long.code == ERROR_CODES["InvalidInput"]
    assert "at most 4000 characters" in too_long.message
    empty = await call_error(lsp, "fleet/memory/add", {"sessionId": sid, "content": ""})
    assert empty.code == ERROR_CODES["InvalidInput"]
