"""``fleet-lsp memory add|list|review|reject``, run as a user would, on SQLite and PostgreSQL:
a Turn's learned note proposed, a user's memory added, and only reviewed memories reaching the
scripted model (its rules reply by what the prompt holds, see tests/lsp/test_memory.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_cli import ok, rlm_answer, run
from tests.lsp.conftest import write_script
from tests.lsp.test_memory import NOTE, SCRIPT


@pytest.fixture
def env(fleet_environ: dict[str, str], tmp_path: Path) -> dict[str, str]:
    script = write_script(tmp_path / "memory-script.json", SCRIPT)
    return {**fleet_environ, "FLEET_TEST_SCRIPT": str(script)}


def test_memory_commands_add_list_review_reject(tmp_path: Path, env: dict[str, str]) -> None:
    assert rlm_answer(tmp_path, env, "c", "NOTE-TURN: look at the stock") == "noted"
    [proposed] = json.loads(ok(tmp_path, env, "memory", "list", "-s", "c", "--json"))
    assert (proposed["kind"], proposed["content"], proposed["reviewed"]) == (
        "learned_note",
        NOTE,
        False,
    )
    args = ["memory", "add", "[bold]widgets ZZTOP[/bold]", "-s", "c", "--kind", "preference"]
    added = json.loads(ok(tmp_path, env, *args, "--json"))
    assert (added["kind"], added["reviewed"]) == ("preference", False)
    table = ok(tmp_path, env, "memory", "list", "-s", "c")
    assert "[bold]widgets ZZTOP[/bold]" in table and NOTE in table  # printed literally

    assert rlm_answer(tmp_path, env, "c", "How do widgets ship?") == "hidden"
    ok(tmp_path, env, "memory", "review", proposed["memoryId"], "-s", "c")
    assert rlm_answer(tmp_path, env, "c", "How do widgets ship?") == "shown"
    reviewed = json.loads(ok(tmp_path, env, "memory", "list", "-s", "c", "--reviewed", "--json"))
    assert [m["memoryId"] for m in reviewed] == [proposed["memoryId"]]

    ok(tmp_path, env, "memory", "reject", added["memoryId"], "-s", "c")
    left = json.loads(ok(tmp_path, env, "memory", "list", "-s", "c", "--json"))
    assert [m["memoryId"] for m in left] == [proposed["memoryId"]]
    again = run(tmp_path, "memory", "reject", added["memoryId"], "-s", "c", env=env)
    assert again.returncode == 1 and "MemoryNotFound" in again.stderr
    too_long = run(tmp_path, "memory", "add", "x" * 4_001, "-s", "c", env=env)
    assert too_long.returncode == 2 and "at most 4000 characters" in too_long.stderr
