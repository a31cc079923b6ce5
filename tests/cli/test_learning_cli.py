"""``fleet-lsp turn`` and ``fleet-lsp memory``, run as a user would, on SQLite and PostgreSQL: a
Turn's ``workspace.remember`` proposes a memory that reaches a later Turn only once reviewed, and
a Turn's ``save_skill`` writes a Skill the next Turn's catalog lists. Each command is its own
process (the script starts afresh in each), so the question rules come before the rules that
write (see tests/lsp/test_learning.py for the model's code)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fleet_core.engine.scripted_lm import action, submit
from tests.cli.test_cli import ok, rlm_answer
from tests.lsp.conftest import write_script
from tests.lsp.test_learning import FACT, REMEMBER, SAVE

SCRIPT: dict[str, Any] = {
    "root": {
        "rules": {
            f"[sandbox] {FACT}": submit("'shown'"),
            '<skill name="gadget-pricing">': submit("'listed'"),
            "How are gadget prices": submit("'hidden'"),
            "Which Skills": submit("'missing'"),
            "REMEMBER-TURN": [action(REMEMBER), submit("'remembered'")],
            "SKILL-TURN": [action(SAVE), submit("'saved'")],
        }
    }
}


@pytest.fixture
def env(fleet_environ: dict[str, str], tmp_path: Path) -> dict[str, str]:
    script = write_script(tmp_path / "learning-script.json", SCRIPT)
    return {**fleet_environ, "FLEET_TEST_SCRIPT": str(script)}


def test_a_remembered_memory_is_reviewed_then_shown(tmp_path: Path, env: dict[str, str]) -> None:
    shown = ok(tmp_path, env, "turn", "REMEMBER-TURN: note the units", "-s", "m", "--mode", "rlm")
    [memory] = json.loads(ok(tmp_path, env, "memory", "list", "-s", "m", "--json"))
    assert (memory["kind"], memory["content"], memory["reviewed"]) == ("sandbox", FACT, False)
    mid = memory["memoryId"]
    assert f"memory proposed: {mid} (units, unreviewed)" in shown
    assert f"fleet-lsp memory review {mid} -s m" in shown

    assert rlm_answer(tmp_path, env, "m", "How are gadget prices shown?") == "hidden"
    ok(tmp_path, env, "memory", "review", mid, "-s", "m")
    assert rlm_answer(tmp_path, env, "m", "How are gadget prices shown?") == "shown"


def test_a_saved_skill_is_in_the_next_turns_catalog(tmp_path: Path, env: dict[str, str]) -> None:
    shown = ok(tmp_path, env, "turn", "SKILL-TURN: save one", "-s", "k", "--mode", "rlm")
    assert "skill saved: skills/gadget-pricing/SKILL.md" in shown
    assert rlm_answer(tmp_path, env, "k", "Which Skills do you see?") == "listed"
    assert rlm_answer(tmp_path, env, "other", "Which Skills do you see?") == "missing"
