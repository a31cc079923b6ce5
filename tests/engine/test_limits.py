"""Budget exhaustion, deadline, cancellation (mid-cell), and the model-unavailable fast failure."""

from __future__ import annotations

import asyncio
import time

import pytest

from fleet_core.api import FleetRuntime
from fleet_core.config import load_config
from fleet_core.engine.lm import ConfiguredLmProvider
from fleet_core.engine.scripted_lm import action, scripted_lm, submit
from fleet_core.errors import ModelUnavailable, TurnBusy
from fleet_core.models import TurnRequest

SLEEP_CELL = action("import time\nprint('sleeping', flush=True)\ntime.sleep(60)\nprint('woke')")


async def test_budget_exhaustion_ends_the_turn(open_runtime, lms) -> None:
    runtime = await open_runtime(FLEET_MAX_LLM_CALLS_PER_TURN="3")
    await runtime.new_session("b", mode="rlm")
    # the model swallows the budget error inside the sandbox; the host still ends the Turn
    lms.root = scripted_lm(
        [
            action(
                "for i in range(5):\n"
                "    try:\n        llm_query('hi')\n"
                "    except Exception as e:\n        print('refused:', e)"
            ),
            submit("'unreachable'"),
        ]
    )
    lms.sub = scripted_lm(["hello"] * 5)
    events = []
    result = await runtime.run_turn(
        TurnRequest(session_id="b", task="spend"), on_event=events.append
    )
    assert result.status == "failed"
    assert result.error.kind == "BudgetExhausted" and "budget is exhausted" in result.error.message
    assert result.usage.model_calls == 3
    assert result.usage.calls_by_category == {"generation": 1, "sub_query": 2}
    assert events[-1].kind == "turn_failed"
    stored = await runtime.history("b")
    assert stored[-1].status == "failed" and stored[-1].error.kind == "BudgetExhausted"


async def test_deadline_interrupts_the_cell_and_fails_the_turn(engine_runtime, lms) -> None:
    await engine_runtime.new_session("t", mode="rlm")
    lms.root = scripted_lm([SLEEP_CELL, submit("'late'")])
    started = time.monotonic()
    result = await engine_runtime.run_turn(
        TurnRequest(session_id="t", task="sleep", timeout_seconds=10)
    )
    elapsed = time.monotonic() - started
    assert result.status == "failed" and result.error.kind == "TurnDeadlineExceeded"
    assert 9.5 < elapsed < 16


async def _wait_for_cell(events: list, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not any(e.kind == "code_cell" and "sleep" in e.data.code for e in events):
        assert time.monotonic() < deadline, "the cell never started"
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.3)  # let the cell really enter time.sleep


async def test_cancelling_the_awaiting_task_cancels_mid_cell(engine_runtime, lms) -> None:
    runtime = engine_runtime
    await runtime.new_session("c", mode="rlm")
    lms.root = scripted_lm([SLEEP_CELL, submit("'late'")])
    events: list = []
    task = asyncio.create_task(
        runtime.run_turn(TurnRequest(session_id="c", task="sleep"), on_event=events.append)
    )
    await _wait_for_cell(events)
    started = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert time.monotonic() - started < 5
    [turn] = await runtime.history("c")
    assert turn.status == "cancelled"
    assert events[-1].kind == "turn_cancelled"
    output = next(e.data for e in events if e.kind == "cell_output" and e.data.phase == "task")
    assert output.outcome == "cancelled"
    # the Session is free again
    lms.root = scripted_lm([submit("'again'")])
    again = await runtime.run_turn(TurnRequest(session_id="c", task="again"))
    assert again.answer == "again"


async def test_cancel_turn_by_id_and_turn_busy(engine_runtime, lms) -> None:
    runtime = engine_runtime
    await runtime.new_session("k", mode="rlm")
    lms.root = scripted_lm([SLEEP_CELL, submit("'late'")])
    events: list = []
    task = asyncio.create_task(
        runtime.run_turn(TurnRequest(session_id="k", task="sleep"), on_event=events.append)
    )
    await _wait_for_cell(events)
    with pytest.raises(TurnBusy):
        await runtime.run_turn(TurnRequest(session_id="k", task="second"))
    assert await runtime.cancel_turn(events[0].turn_id) is True
    result = await asyncio.wait_for(task, 10)
    assert result.status == "cancelled" and result.error.kind == "TurnCancelled"
    assert await runtime.cancel_turn(events[0].turn_id) is False


async def test_no_model_configured_fails_fast_with_what_to_set(tmp_path) -> None:
    environ = {"FLEET_STATE_DIR": str(tmp_path / "st"), "FLEET_LOCAL_MODEL__ENABLED": "false"}
    config = load_config(environ=environ, cwd=tmp_path)  # no embedded model, even if installed
    runtime = await FleetRuntime.open(config)
    try:
        await runtime.new_session("m")
        started = time.monotonic()
        with pytest.raises(ModelUnavailable) as caught:
            await runtime.run_turn(TurnRequest(session_id="m", task="hello"))
        assert time.monotonic() - started < 1
        for name in ("FLEET_LM_API_BASE", "FLEET_LM_MODEL", "FLEET_LM_API_KEY"):
            assert name in caught.value.message
        assert await runtime.history("m") == []  # nothing claimed
    finally:
        await runtime.close()


def test_model_endpoints_https_except_loopback(tmp_path) -> None:
    def provider(base: str) -> ConfiguredLmProvider:
        env = {"FLEET_LM_API_BASE": base, "FLEET_LM_MODEL": "m1", "FLEET_LM_API_KEY": "sk-test"}
        return ConfiguredLmProvider.from_config(load_config(environ=env, cwd=tmp_path))

    with pytest.raises(ModelUnavailable, match="https"):
        provider("http://models.example.com/v1").check()
    provider("http://127.0.0.1:8000/v1").check()
    lm = provider("https://models.example.com/v1").lm("root")
    assert lm.model == "openai/m1" and lm.cache is False
    assert "sk-test" not in repr(lm.kwargs.get("api_base"))
