"""``[engine] small_fresh_last``: the last program a Turn may run is sampled afresh from the first
prompt alone instead of repaired in the chat (docs/engine.md#the-small-model-profile); the
scripted model, the real local sandbox."""

from __future__ import annotations

from fleet_core.engine.codefirst import REPAIR_TEMPERATURE
from tests.engine.support import (
    BROKEN,
    BROKEN_AGAIN,
    EXPECTED,
    PROGRAM,
    TASK,
    artifact_rows,
    fenced,
    quick_session,
    recording_lm,
    task_cells,
)
from tests.engine.support import (
    small_turn as turn,
)

SMALL = {"FLEET_ENGINE_PROFILE": "small"}


async def test_the_last_program_is_sampled_afresh_from_the_first_prompt_when_asked(
    open_runtime, lms, tmp_path
) -> None:
    runtime = await open_runtime(**SMALL, FLEET_ENGINE__SMALL_FRESH_LAST="true")
    await quick_session(runtime, tmp_path)
    lms.root = recording_lm([fenced(BROKEN), fenced(BROKEN_AGAIN), fenced(PROGRAM)])
    result, events = await turn(runtime, TASK)
    assert result.status == "completed", result.error
    assert await artifact_rows(runtime) == EXPECTED
    first, repair, last = lms.root.engine_script.requests
    assert repair.startswith(first) and "KeyError" in repair  # the first repair is in the chat
    assert last == first  # the last program's chat is the first prompt alone
    assert lms.root.engine_script.configs[2].temperature == REPAIR_TEMPERATURE
    assert len(task_cells(events)) == 3


async def test_without_fresh_last_the_last_program_is_a_repair_in_the_chat(
    open_runtime, lms, tmp_path
) -> None:
    runtime = await open_runtime(**SMALL)
    await quick_session(runtime, tmp_path)
    lms.root = recording_lm([fenced(BROKEN), fenced(BROKEN_AGAIN), fenced(PROGRAM)])
    result, _ = await turn(runtime, TASK)
    assert result.status == "completed", result.error
    first, repair, last = lms.root.engine_script.requests
    assert last.startswith(repair) and last != first


async def test_a_resent_program_is_asked_again_in_the_chat_not_afresh(
    open_runtime, lms, tmp_path
) -> None:
    """The fresh sample replaces the last repair only: a resend of a failed program is still
    told so in the chat (a fresh chat would not say why it is asked again)."""
    runtime = await open_runtime(**SMALL, FLEET_ENGINE__SMALL_FRESH_LAST="true")
    await quick_session(runtime, tmp_path)
    replies = [fenced(BROKEN), fenced(BROKEN_AGAIN), fenced(BROKEN), fenced(PROGRAM)]
    lms.root = recording_lm(replies)
    result, _ = await turn(runtime, TASK)
    assert result.status == "completed", result.error
    requests = lms.root.engine_script.requests
    assert requests[2] == requests[0]  # afresh
    assert "same program again" in requests[3] and requests[3] != requests[0]
