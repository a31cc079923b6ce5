"""Grounded SUBMIT over the protocol: the client sees each ``ungrounded_submit`` didEmit and the
Turn's ``usage.submitRejections``; a figure the sandbox printed is accepted at once."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from pytest_lsp import LanguageClient

from fleet_core.engine.scripted_lm import action, submit
from tests.lsp.conftest import call, scripted_lsp

pytestmark = pytest.mark.asyncio(loop_scope="module")

COMPUTE = "total = sum(range(1000))"  # 499500
TYPED = "'The total is 499500'"  # retyped instead of submitted from `total`
SCRIPT: dict[str, Any] = {
    "root": {
        "rules": {
            "UNPRINTED-SUM": [action(COMPUTE), submit(TYPED), submit(TYPED), submit(TYPED)],
            "PRINTED-SUM": [action(COMPUTE + "\nprint(total)"), submit(TYPED)],
        }
    }
}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def lsp(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[LanguageClient]:
    async for client in scripted_lsp("vscode", tmp_path_factory, SCRIPT, "grounding"):
        yield client


async def turn(lsp: LanguageClient, task: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    sid = f"g-{uuid.uuid4().hex[:8]}"
    await call(lsp, "fleet/session/new", {"sessionId": sid, "mode": "rlm"})
    result = await call(lsp, "fleet/turn/run", {"sessionId": sid, "task": task})
    events = [e for e in lsp.fleet_events if e["turnId"] == result["turnId"]]  # type: ignore[attr-defined]
    return result, events


async def test_ungrounded_submit_events_and_usage_reach_the_client(lsp: LanguageClient) -> None:
    result, events = await turn(lsp, "UNPRINTED-SUM of the integers below 1000")
    assert result["status"] == "completed", result
    assert result["answer"] == "The total is 499500"
    assert result["usage"]["submitRejections"] == 2
    assert result["usage"]["sandboxErrors"] == 0
    flagged = [e for e in events if e["kind"] == "ungrounded_submit"]
    assert [(e["payload"]["figures"], e["payload"]["rejected"]) for e in flagged] == [
        (["499500"], True),
        (["499500"], True),
        (["499500"], False),
    ]
    assert {e["agentId"] for e in flagged} == {"root"}
    outcomes = [e["payload"]["outcome"] for e in events if e["kind"] == "cell_output"]
    assert outcomes.count("submit_rejected") == 2


async def test_printed_figure_is_accepted_first_time(lsp: LanguageClient) -> None:
    result, events = await turn(lsp, "PRINTED-SUM of the integers below 1000")
    assert result["status"] == "completed" and result["answer"] == "The total is 499500"
    assert result["usage"]["submitRejections"] == 0
    assert not [e for e in events if e["kind"] == "ungrounded_submit"]
