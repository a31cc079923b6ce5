"""A Turn with the optional Jev over the protocol: the real server over stdio, its Jev a local
fake. Jev triages (the scripted model has no triage reply), preloads Skills and answers the
sandbox's ``jev_decide_batched``; the result's usage and the didEmit events show each decision
by category, and no message the client receives carries the key."""

from __future__ import annotations

import ast
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from pytest_lsp import LanguageClient

from fleet_core.engine.scripted_lm import action, submit
from tests.fake_jev import KEY, fake_jev
from tests.lsp.conftest import CLIENTS, call, close_client, start_client, write_script

pytestmark = pytest.mark.asyncio(loop_scope="module")

DECIDE = (
    "r = jev_decide_batched(['apple', 'pear'], 'Does it start with a vowel?', ['yes', 'no'])\n"
    "print(r)"
)
SCRIPT: dict[str, Any] = {"root": {"replies": [action(DECIDE), submit("repr(r)")]}}


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=CLIENTS)
async def jev_lsp(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[tuple[LanguageClient, Any]]:
    state = tmp_path_factory.mktemp("state")
    script = write_script(state.parent / f"jev-{request.param}.json", SCRIPT)
    with fake_jev(route="rlm") as fake:
        env = {
            "FLEET_STATE_DIR": str(state),
            "FLEET_TEST_SCRIPT": str(script),
            "FLEET_JEV_API_KEY": KEY,
            "FLEET_JEV_BASE_URL": fake.url,
        }
        client = await start_client(request.param, env)
        yield client, fake
        await close_client(client)


async def test_a_turn_triaged_preloaded_and_deciding_with_jev(jev_lsp) -> None:
    lsp, fake = jev_lsp
    sid = f"j-{uuid.uuid4().hex[:8]}"
    await call(lsp, "fleet/session/new", {"sessionId": sid})  # hybrid: Jev triages
    result = await call(lsp, "fleet/turn/run", {"sessionId": sid, "task": "classify fruit"})
    assert result["status"] == "completed", result
    assert result["route"] == "rlm"
    decisions = ast.literal_eval(result["answer"])  # the repr of the sandbox's list of dicts
    assert [(d["item"], d["decision"], d["backend"]) for d in decisions] == [
        ("apple", "yes", "jev"),
        ("pear", "no", "jev"),
    ]
    usage = result["usage"]
    assert usage["jevDecisionsByCategory"] == {
        "routing": 1,
        "skill_selection": 3,  # the three bundled Skills, one batch
        "other_decisions": 2,
    }
    assert usage["callsByCategory"]["other_decisions"] == 2
    assert len(fake.systemone_calls()) == 3  # triage, preloading, the sandbox's batch
    events = [e for e in lsp.fleet_events if e["turnId"] == result["turnId"]]
    kinds = [e["kind"] for e in events]
    assert "skill_selection" in kinds and kinds.count("jev_decision") == 3
    [triage] = [e for e in events if e["kind"] == "triage_decision"]
    assert triage["payload"]["evidence"]["backend"] == "jev"
    assert KEY not in json.dumps(result) + json.dumps(events)
