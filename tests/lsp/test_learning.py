"""What a Turn's code asks the Session to keep, over the protocol (pytest-lsp over stdio, a
VS Code-like client on SQLite and a Neovim-like one on PostgreSQL): ``workspace.remember``
proposes an unreviewed memory that reaches a later Turn only once reviewed, ``save_skill`` writes
a Session Skill the next Turn's catalog lists, and an overwrite without ``replace=True`` is
refused. The scripted model replies by what its prompt holds; its code runs in the sandbox."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from pytest_lsp import LanguageClient

from fleet_core.engine.scripted_lm import action, submit
from tests.lsp.conftest import call, close_client, start_client, write_script

pytestmark = pytest.mark.asyncio(loop_scope="module")

FACT = "Gadget prices are in yen"
SKILL = "---\nname: gadget-pricing\ndescription: Convert gadget prices\n---\n\nDivide by 150."
REMEMBER = f"print(workspace.remember('units', {FACT!r}))"
SAVE = (
    f"print(save_skill('gadget-pricing', {SKILL!r}))\n"
    "try:\n"
    f"    save_skill('gadget-pricing', {SKILL!r})\n"
    "except Exception as exc:\n"
    "    print('refused:', exc)"
)
SCRIPT: dict[str, Any] = {
    "root": {
        "rules": {
            # rules are tried in order; later prompts hold earlier tasks (the history)
            f"[sandbox] {FACT}": submit("'shown'"),
            '<skill name="gadget-pricing">': submit("'listed'"),
            # used up after their two replies, so later prompts fall through to the questions
            "REMEMBER-TURN": [action(REMEMBER), submit("'remembered'")],
            "SKILL-TURN": [action(SAVE), submit("'saved'")],
            "How are gadget prices": submit("'hidden'"),
            "Which Skills": submit("'missing'"),
        }
    }
}
BACKENDS = [("vscode", "sqlite"), pytest.param(("neovim", "postgres"), marks=pytest.mark.postgres)]


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=BACKENDS)
async def lsp(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[LanguageClient]:
    kind, backend = request.param
    state = tmp_path_factory.mktemp("state")
    script = write_script(state.parent / f"learning-{kind}.json", SCRIPT)
    env = {"FLEET_STATE_DIR": str(state), "FLEET_TEST_SCRIPT": str(script)}
    if backend == "postgres":
        env["FLEET_DATABASE_URL"] = request.getfixturevalue("postgres_database")
    client = await start_client(kind, env)
    yield client
    await close_client(client)


async def run(lsp: LanguageClient, session_id: str, task: str) -> dict[str, Any]:
    result = await call(lsp, "fleet/turn/run", {"sessionId": session_id, "task": task})
    assert result["status"] == "completed", result
    return dict(result)


def emitted(lsp: LanguageClient, turn_id: str, kind: str) -> list[dict[str, Any]]:
    events = lsp.fleet_events  # type: ignore[attr-defined]
    return [e["payload"] for e in events if e["turnId"] == turn_id and e["kind"] == kind]


async def test_remembered_memory_reviewed_then_shown(lsp: LanguageClient) -> None:
    sid = f"r-{uuid.uuid4().hex[:8]}"
    await call(lsp, "fleet/session/new", {"sessionId": sid, "mode": "rlm"})
    first = await run(lsp, sid, "REMEMBER-TURN: note the units")
    assert first["answer"] == "remembered"
    [event] = emitted(lsp, first["turnId"], "memory_proposed")
    [memory] = (await call(lsp, "fleet/memory/list", {"sessionId": sid}))["memories"]
    assert (memory["kind"], memory["content"], memory["reviewed"]) == ("sandbox", FACT, False)
    assert memory["memoryId"] == event["memory_id"] and memory["sources"]["name"] == "units"

    assert (await run(lsp, sid, "How are gadget prices shown?"))["answer"] == "hidden"
    await call(lsp, "fleet/memory/review", {"sessionId": sid, "memoryId": memory["memoryId"]})
    assert (await run(lsp, sid, "How are gadget prices shown?"))["answer"] == "shown"


async def test_saved_skill_listed_in_the_next_turns_catalog(lsp: LanguageClient) -> None:
    sid = f"s-{uuid.uuid4().hex[:8]}"
    await call(lsp, "fleet/session/new", {"sessionId": sid, "mode": "rlm"})
    assert (await run(lsp, sid, "Which Skills do you see?"))["answer"] == "missing"
    saved = await run(lsp, sid, "SKILL-TURN: save one")
    [event] = emitted(lsp, saved["turnId"], "skill_saved")
    assert (event["name"], event["path"], event["replaced"]) == (
        "gadget-pricing",
        "skills/gadget-pricing/SKILL.md",
        False,
    )
    outputs = " ".join(str(p.get("output")) for p in emitted(lsp, saved["turnId"], "cell_output"))
    assert "refused: InvalidInput: save_skill: Skill 'gadget-pricing' already exists" in outputs
    assert (await run(lsp, sid, "Which Skills do you see?"))["answer"] == "listed"
