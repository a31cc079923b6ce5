"""Each routing rule, with the chosen route's code really running in the LocalSandbox."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet_core.engine.scripted_lm import action, fields, route, scripted_lm, submit
from tests.engine.support import run_turn

TASK = "What is 6*7?"


def _decision(events):
    return next(e.data for e in events if e.kind == "triage_decision")


async def test_hybrid_triage_direct_answers_without_code(engine_runtime, lms) -> None:
    await engine_runtime.new_session("s")
    lms.root = scripted_lm([route("direct"), fields(reasoning="Arithmetic.", answer="42")])
    result, events = await run_turn(engine_runtime, "s", TASK)
    assert result.status == "completed" and result.answer == "42" and result.route == "direct"
    assert _decision(events).override_reason is None
    assert not [e for e in events if e.kind == "code_cell"]
    assert result.usage.calls_by_category == {"routing": 1, "generation": 1}


async def test_session_mode_rlm_skips_triage(engine_runtime, lms) -> None:
    await engine_runtime.new_session("s", mode="rlm")
    lms.root = scripted_lm([action("x = 6 * 7\nprint(x)"), submit("str(x)")])
    result, events = await run_turn(engine_runtime, "s", TASK)
    assert result.status == "completed" and result.answer == "42" and result.route == "rlm"
    decision = _decision(events)
    assert decision.override_reason == "session_mode"
    assert "routing" not in result.usage.calls_by_category


async def test_session_mode_flex_runs_code_in_sandbox(engine_runtime, lms) -> None:
    await engine_runtime.new_session("s", mode="flex")
    lms.root = scripted_lm(
        [action("import os\nx = len(os.listdir('skills'))\nprint(x)"), submit("str(x)")]
    )
    result, events = await run_turn(engine_runtime, "s", TASK)
    assert result.status == "completed", result.error
    assert result.route == "flex" and result.answer == "3"  # the three bundled Skills
    assert _decision(events).override_reason == "session_mode"


async def test_request_mode_overrides_session_mode(engine_runtime, lms) -> None:
    await engine_runtime.new_session("s", mode="hybrid")
    lms.root = scripted_lm([submit("'7'")])
    result, _ = await run_turn(engine_runtime, "s", TASK, mode="rlm")
    assert result.route == "rlm" and result.answer == "7"


@pytest.mark.parametrize("reply", [route("banana"), "not a parseable reply"])
async def test_unknown_label_or_routing_error_falls_back_to_rlm(engine_runtime, lms, reply) -> None:
    await engine_runtime.new_session("s")
    replies = [reply] if "banana" in reply else [reply, reply]  # unparseable: one re-ask
    lms.root = scripted_lm([*replies, submit("'ok'")])
    result, events = await run_turn(engine_runtime, "s", TASK)
    assert result.status == "completed" and result.route == "rlm" and result.answer == "ok"
    decision = _decision(events)
    assert decision.override_reason == "routing_error"
    assert decision.evidence.error


async def test_selected_dataset_turns_direct_into_rlm(engine_runtime, lms, tmp_path: Path) -> None:
    await engine_runtime.new_session("s")
    source = tmp_path / "log.txt"
    source.write_text("".join(f"line {i}\n" for i in range(1, 501)) + "ERROR disk full\n")
    await engine_runtime.attach("s", source)
    await engine_runtime.set_dataset("s", "files/log.txt", "service log")
    lms.root = scripted_lm(
        [
            route("direct"),
            action("hits = context.search('error')\nprint(context.metadata['size_bytes'], hits)"),
            submit("f'line {hits[0][0]}: {hits[0][1]}'"),
        ]
    )
    result, events = await run_turn(engine_runtime, "s", "Which line has the error?")
    assert result.status == "completed", result.error
    assert result.route == "rlm" and result.answer == "line 501: ERROR disk full"
    assert _decision(events).override_reason == "selected_context"
    prompt = lms.root.engine_script.requests[1]
    assert "FleetDataset files/log.txt" in prompt and "line 250" not in prompt


async def test_bare_fenced_code_reply_is_accepted(engine_runtime, lms) -> None:
    await engine_runtime.new_session("s", mode="rlm")
    lms.root = scripted_lm(
        ["Let me compute.\n```python\ny = 2 ** 10\nprint(y)\n```", submit("str(y)")]
    )
    result, _ = await run_turn(engine_runtime, "s", TASK)
    assert result.status == "completed" and result.answer == "1024"
    assert result.usage.model_calls == 2  # no re-ask, no JSON fallback
