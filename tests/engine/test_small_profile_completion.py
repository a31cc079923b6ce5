"""The small-model profile's RLM route with host-recognized completion (engine/completion.py,
``CompletingRLM``), and the tolerant parsing of replies every profile uses (engine/adapter.py);
with the scripted model and the real local sandbox."""

from __future__ import annotations

from typing import Any

import dspy
import pytest

from fleet_core.engine.adapter import FleetChatAdapter
from fleet_core.engine.scripted_lm import action, fields, scripted_lm
from fleet_core.engine.signatures import FleetTask
from fleet_core.models import TurnRequest
from tests.engine.support import (
    EXPECTED,
    PROGRAM,
    TASK,
    artifact_rows,
    fenced,
    quick_session,
    recording_lm,
    task_cells,
)

# --- tolerant parsing (every profile) ---------------------------------------------------------


def test_a_reply_without_learned_skill_note_parses_to_an_empty_note() -> None:
    extract = dspy.RLM(FleetTask).extract.signature
    parsed = FleetChatAdapter().parse(extract, fields(answer="north: 150.5"))
    assert parsed == {"answer": "north: 150.5", "learned_skill_note": ""}


async def test_extract_without_the_note_completes_the_turn(open_runtime, lms, tmp_path) -> None:
    runtime = await open_runtime(FLEET_RUNTIME__MAX_RLM_ITERATIONS="1")
    await quick_session(runtime, tmp_path, select=False)
    lms.root = scripted_lm([action("print(150.5)"), fields(answer="150.5")])
    result = await runtime.run_turn(TurnRequest(session_id="s", task="sum", mode="rlm"))
    assert result.status == "completed", result.error
    assert result.answer == "150.5"
    assert result.usage.calls_by_category == {"generation": 2}  # no re-ask


def test_adapter_accepts_unfenced_python_only_when_it_parses() -> None:
    step = dspy.RLM(FleetTask).generate_action.signature
    adapter = FleetChatAdapter()
    assert adapter.parse(step, "x = 1\nprint(x)")["code"] == "x = 1\nprint(x)"
    with pytest.raises(Exception, match="parse"):
        adapter.parse(step, "I will now print the totals of each region.")


# --- RLM with host-recognized completion ------------------------------------------------------


async def test_small_rlm_finalizes_when_a_successful_cell_repeats(
    open_runtime, lms, tmp_path
) -> None:
    runtime = await open_runtime(FLEET_ENGINE_PROFILE="small")
    await quick_session(runtime, tmp_path)
    lms.root = scripted_lm([action(PROGRAM), action(PROGRAM), action(PROGRAM)])
    events: list[Any] = []
    request = TurnRequest(session_id="s", task="Calculate revenue by region.", mode="rlm")
    result = await runtime.run_turn(request, on_event=events.append)
    assert result.status == "completed", result.error
    assert "150.5" in result.answer and "250.5" in result.answer
    assert len(task_cells(events)) == 1  # the repeat was recognized, never run
    assert result.usage.calls_by_category == {"generation": 2}


async def test_small_rlm_submit_without_the_note_completes(open_runtime, lms, tmp_path) -> None:
    runtime = await open_runtime(FLEET_ENGINE_PROFILE="small")
    await quick_session(runtime, tmp_path)
    lms.root = scripted_lm([action("n = 5\nprint(n)"), action("SUBMIT(answer=str(n))")])
    request = TurnRequest(session_id="s", task="Count the rows.", mode="rlm")
    result = await runtime.run_turn(request)
    assert result.status == "completed", result.error
    assert result.answer == "5"
    assert result.usage.calls_by_category == {"generation": 2}
    lms.root = scripted_lm([action("SUBMIT('six')")])  # one positional value: the answer
    result = await runtime.run_turn(request)
    assert result.status == "completed", result.error
    assert result.answer == "six"


async def test_a_cells_last_expression_is_shown_like_a_notebook(
    open_runtime, lms, tmp_path
) -> None:
    runtime = await open_runtime(FLEET_ENGINE_PROFILE="small")
    await quick_session(runtime, tmp_path)
    lms.root = scripted_lm([action("x = 41\nx + 1"), action("SUBMIT(answer=str(x + 1))")])
    request = TurnRequest(session_id="s", task="Compute.", mode="rlm")
    result = await runtime.run_turn(request)
    assert result.answer == "42"
    seen = lms.root.engine_script.requests[1].split("[[ ## repl_history ## ]]", 1)[1]
    assert "42" in seen and "no output" not in seen


async def test_small_rlm_asks_for_code_only_and_accepts_bare_code(
    open_runtime, lms, tmp_path
) -> None:
    runtime = await open_runtime(FLEET_ENGINE_PROFILE="small")
    await quick_session(runtime, tmp_path)
    lms.root = scripted_lm([fenced("n = 6\nprint(n)"), "SUBMIT(answer=str(n + 1))"])
    request = TurnRequest(session_id="s", task="Count.", mode="rlm")
    result = await runtime.run_turn(request)
    assert result.status == "completed", result.error
    assert result.answer == "7"
    assert result.usage.calls_by_category == {"generation": 2}  # no re-ask
    assert "[[ ## reasoning ## ]]" not in lms.root.engine_script.requests[0]


async def test_default_rlm_runs_a_repeated_cell_again(open_runtime, lms, tmp_path) -> None:
    runtime = await open_runtime(FLEET_RUNTIME__MAX_RLM_ITERATIONS="2")
    await quick_session(runtime, tmp_path)
    lms.root = scripted_lm([action(PROGRAM), action(PROGRAM), fields(answer="x")])
    events: list[Any] = []
    request = TurnRequest(session_id="s", task="Calculate revenue by region.", mode="rlm")
    await runtime.run_turn(request, on_event=events.append)
    assert len(task_cells(events)) == 2


async def test_small_rlm_finalizes_when_the_named_artifact_is_unchanged(
    open_runtime, lms, tmp_path
) -> None:
    runtime = await open_runtime(FLEET_ENGINE_PROFILE="small")
    await quick_session(runtime, tmp_path)
    lms.root = scripted_lm(
        [action(PROGRAM), action("print('checked')"), action("print('never run')")]
    )
    events: list[Any] = []
    result = await runtime.run_turn(
        TurnRequest(session_id="s", task=TASK, mode="rlm"), on_event=events.append
    )
    assert result.status == "completed", result.error
    assert task_cells(events) == [PROGRAM, "print('checked')"]
    assert "north,150.5" in result.answer  # the artifact's head
    assert "Saved artifacts/revenue_by_region.csv:" in result.answer
    assert await artifact_rows(runtime) == EXPECTED


async def test_small_rlm_action_prompt_is_bounded_and_prefix_stable(
    open_runtime, lms, tmp_path
) -> None:
    runtime = await open_runtime(FLEET_ENGINE_PROFILE="small")
    await quick_session(runtime, tmp_path)
    lms.root = recording_lm([action("x = 1\nprint(x)"), action("print(x + 1)"), action("x")])
    request = TurnRequest(session_id="s", task="Count the rows.", mode="rlm")
    await runtime.run_turn(request)
    first, second = lms.root.engine_script.requests[:2]
    assert len(first) / 3.5 < 1_500  # ~1.5k tokens at 3.5 characters a token
    cut = first.index("[[ ## repl_history ## ]]")
    assert second[:cut] == first[:cut]  # only the new step follows the cached prefix
    assert all(c.max_tokens == 300 for c in lms.root.engine_script.configs)


async def test_default_rlm_action_prompt_is_larger(open_runtime, lms, tmp_path) -> None:
    """The bound above can fail: the default profile's first prompt carries the previews."""
    runtime = await open_runtime()
    await quick_session(runtime, tmp_path)
    lms.root = scripted_lm([action("x = 1\nprint(x)"), action("SUBMIT(answer='1')")])
    request = TurnRequest(session_id="s", task="Count the rows.", mode="rlm")
    await runtime.run_turn(request)
    small_bound = 1_500 * 3.5
    assert len(lms.root.engine_script.requests[0]) > small_bound
