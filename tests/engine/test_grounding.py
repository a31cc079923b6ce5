"""Grounded SUBMIT in real Turns: scripted models, code really running in the LocalSandbox."""

from __future__ import annotations

from fleet_core.engine.scripted_lm import action, scripted_lm, submit
from tests.engine.support import payloads, run_turn

TASK = "Sum the integers below 1000"

COMPUTE = "total = sum(range(1000))"  # 499500, never printed
TYPED = "'The total is 499500'"  # the model retypes the figure instead of using `total`


async def test_unobserved_typed_figure_is_rejected_twice_then_accepted_and_flagged(
    engine_runtime, lms
) -> None:
    await engine_runtime.new_session("s", mode="rlm")
    lms.root = scripted_lm([action(COMPUTE), submit(TYPED), submit(TYPED), submit(TYPED)])
    result, events = await run_turn(engine_runtime, "s", TASK)

    assert result.status == "completed", result.error
    assert result.answer == "The total is 499500"  # the third submission was accepted
    assert result.usage.submit_rejections == 2
    assert result.usage.sandbox_errors == 0  # a rejection is not a sandbox error
    flagged = payloads(events, "ungrounded_submit")
    assert [(p.figures, p.rejected) for p in flagged] == [
        (["499500"], True),
        (["499500"], True),
        (["499500"], False),
    ]
    assert all(e.agent_id == "root" for e in events if e.kind == "ungrounded_submit")
    outcomes = [p.outcome for p in payloads(events, "cell_output") if p.phase == "task"]
    assert outcomes == ["completed", "submit_rejected", "submit_rejected", "submitted"]
    # the model was told why, with the figure, before each retry
    prompts = lms.root.engine_script.requests
    assert any("SUBMIT rejected (1 of 2" in p and "499500" in p for p in prompts)
    assert any("SUBMIT rejected (2 of 2" in p for p in prompts)


async def test_observed_figure_is_accepted_first_time(engine_runtime, lms) -> None:
    await engine_runtime.new_session("s", mode="rlm")
    lms.root = scripted_lm([action(COMPUTE + "\nprint(total)"), submit(TYPED)])
    result, events = await run_turn(engine_runtime, "s", TASK)

    assert result.status == "completed", result.error
    assert result.answer == "The total is 499500"
    assert result.usage.submit_rejections == 0
    assert payloads(events, "ungrounded_submit") == []


async def test_figure_printed_in_the_submitting_cell_is_observed(engine_runtime, lms) -> None:
    await engine_runtime.new_session("s", mode="rlm")
    lms.root = scripted_lm(
        [action(COMPUTE + f"\nprint(total)\nSUBMIT(answer={TYPED}, learned_skill_note='')")]
    )
    result, events = await run_turn(engine_runtime, "s", TASK)

    assert result.status == "completed" and result.answer == "The total is 499500"
    assert result.usage.submit_rejections == 0 and payloads(events, "ungrounded_submit") == []


async def test_figure_from_the_task_is_observed(engine_runtime, lms) -> None:
    await engine_runtime.new_session("s", mode="rlm")
    lms.root = scripted_lm([submit("'Yes, 15% of 2,400 is 360'")])
    result, events = await run_turn(engine_runtime, "s", "Is 15% of 2,400 equal to 360?")

    assert result.status == "completed" and result.usage.submit_rejections == 0
    assert payloads(events, "ungrounded_submit") == []
