"""The Turn's one cell wrapper: bootstrap cells known by how the host submitted them, raw str values
(Flex's result comes back without any rewrite of the code), the sandbox described once."""

from __future__ import annotations

from pathlib import Path

from fleet_core.engine.interpreter import (
    FACADE_SHOWN,
    SKILL_HELPERS_SHOWN,
    TURN_EXECUTION_INSTRUCTIONS,
)
from fleet_core.engine.scripted_lm import action, scripted_lm, submit
from fleet_core.engine.signatures import ChildTask, FleetTask
from fleet_core.sandbox.interpreter import EXECUTION_INSTRUCTIONS
from tests.engine.support import run_turn

TASK = "Compute it."

TRICKY = "a 'quoted' \"answer\"\nsecond line \\ ünïcødé 🚀"


def _cells(events):
    """(phase, code) of every code_cell event, and the phase of every cell_output, in order."""
    cells = [(e.data.phase, e.data.code) for e in events if e.kind == "code_cell"]
    outputs = [e.data for e in events if e.kind == "cell_output"]
    return cells, outputs


async def test_bootstrap_is_known_by_submission_not_by_code_text(engine_runtime, lms) -> None:
    await engine_runtime.new_session("s", mode="rlm")
    # A model cell that *contains* every bootstrap marker the host's own cells have, and fails.
    lookalike = (
        "import hashlib as _fleet_hashlib, json as _fleet_json\n"
        f"# {SKILL_HELPERS_SHOWN} {FACADE_SHOWN}\n"
        "def run_skill_script(name, path):\n    pass\n"
        "raise ValueError('model error')"
    )
    lms.root = scripted_lm([action(lookalike), submit("'done'")])
    result, events = await run_turn(engine_runtime, "s", TASK)
    assert result.status == "completed", result.error
    cells, outputs = _cells(events)
    assert cells[:2] == [("bootstrap", FACADE_SHOWN), ("bootstrap", SKILL_HELPERS_SHOWN)]
    assert cells[2] == ("task", lookalike)
    assert [o.phase for o in outputs] == ["bootstrap", "bootstrap", "task", "task"]
    assert outputs[2].ok is False and outputs[2].outcome == "error"
    assert result.usage.sandbox_errors == 1  # the model's failed cell, marker text or not


async def test_dataset_setup_is_a_bootstrap_cell(engine_runtime, lms, tmp_path: Path) -> None:
    await engine_runtime.new_session("s", mode="rlm")
    source = tmp_path / "log.txt"
    source.write_text("one\ntwo\n")
    await engine_runtime.attach("s", source)
    await engine_runtime.set_dataset("s", "files/log.txt", "a log")
    lms.root = scripted_lm([submit("str(len(list(context.lines())))")])
    result, events = await run_turn(engine_runtime, "s", TASK)
    assert result.status == "completed" and result.answer == "2", result.error
    cells, _ = _cells(events)
    phases = [phase for phase, _ in cells]
    assert phases == ["bootstrap", "bootstrap", "bootstrap", "task"]  # facade, helpers, dataset
    assert "class FleetDataset" in cells[2][1]


async def test_flex_string_result_comes_back_raw_without_a_rewrite(engine_runtime, lms) -> None:
    await engine_runtime.new_session("s", mode="flex")
    lms.root = scripted_lm([action(f"x = {TRICKY!r}\nprint(len(x))"), submit("x")])
    result, events = await run_turn(engine_runtime, "s", TASK)
    assert result.status == "completed", result.error
    assert result.route == "flex" and result.answer == TRICKY
    cells, _ = _cells(events)
    driver = next(code for _, code in cells if "__dspy_flex_json" in code)
    assert driver.rstrip().splitlines()[-1].startswith("__dspy_flex_json.dumps(")  # as dspy sent it
    assert "print(" not in driver


def test_the_sandbox_is_described_once() -> None:
    assert TURN_EXECUTION_INSTRUCTIONS.startswith(EXECUTION_INSTRUCTIONS)
    for fact in ("files/", "artifacts/", "keyword arguments", "no network"):
        assert fact in EXECUTION_INSTRUCTIONS
        assert fact not in TURN_EXECUTION_INSTRUCTIONS[len(EXECUTION_INSTRUCTIONS) :]
    assert "run_skill_script" in TURN_EXECUTION_INSTRUCTIONS
    for signature in (FleetTask, ChildTask):
        instructions = signature.instructions
        assert "(read-only)" not in instructions and "keyword arguments" not in instructions
