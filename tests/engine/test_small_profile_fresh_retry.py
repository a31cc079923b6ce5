"""``[engine] small_fresh_retry`` (off by default): when every program of a Turn failed, one more
is sampled afresh from the first prompt alone, in the Turn's first ``FRESH_RETRY_BEFORE``
seconds (docs/engine.md#the-small-model-profile); the scripted model, the real local sandbox."""

from __future__ import annotations

from fleet_core.engine import codefirst
from fleet_core.engine.codefirst import VOTE_TEMPERATURE
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
#: the fresh retry follows the last repair: no extra repair here (test_small_profile_extra_repairs)
NO_EXTRA = {**SMALL, "FLEET_ENGINE__SMALL_EXTRA_REPAIRS": "0"}
RETRY = {**NO_EXTRA, "FLEET_ENGINE__SMALL_FRESH_RETRY": "true"}
BROKEN_THIRD = BROKEN.replace("totals", "per_region")
#: Three programs that fail, then a right one: the fourth is asked only by the fresh retry.
FAILED_THRICE_THEN_RIGHT = [
    fenced(BROKEN),
    fenced(BROKEN_AGAIN),
    fenced(BROKEN_THIRD),
    fenced(PROGRAM),
]


async def test_after_every_program_failed_a_fresh_one_answers(open_runtime, lms, tmp_path) -> None:
    runtime = await open_runtime(**RETRY)
    await quick_session(runtime, tmp_path)
    lms.root = recording_lm(FAILED_THRICE_THEN_RIGHT)
    result, events = await turn(runtime, TASK)
    assert result.status == "completed", result.error
    assert await artifact_rows(runtime) == EXPECTED
    requests = lms.root.engine_script.requests
    assert len(requests) == 4
    assert requests[3] == requests[0]  # the first prompt alone: no failed program, no error
    assert lms.root.engine_script.configs[3].temperature == VOTE_TEMPERATURE
    assert len(task_cells(events)) == 4
    assert result.outcome.kind == "partial"  # three programs failed on the way: said so


async def test_by_default_the_turn_fails_after_its_repairs(open_runtime, lms, tmp_path) -> None:
    runtime = await open_runtime(**NO_EXTRA)  # the retry off, its default
    await quick_session(runtime, tmp_path)
    lms.root = recording_lm(FAILED_THRICE_THEN_RIGHT)
    result, _ = await turn(runtime, TASK)
    assert result.status == "failed"
    assert len(lms.root.engine_script.requests) == 3


async def test_a_late_turn_is_not_retried(open_runtime, lms, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(codefirst, "FRESH_RETRY_BEFORE", 0.0)
    runtime = await open_runtime(**RETRY)
    await quick_session(runtime, tmp_path)
    lms.root = recording_lm(FAILED_THRICE_THEN_RIGHT)
    result, _ = await turn(runtime, TASK)
    assert result.status == "failed"
    assert len(lms.root.engine_script.requests) == 3


async def test_a_fresh_program_that_repeats_a_failed_one_is_not_run(
    open_runtime, lms, tmp_path
) -> None:
    runtime = await open_runtime(**RETRY)
    await quick_session(runtime, tmp_path)
    replies = [fenced(BROKEN), fenced(BROKEN_AGAIN), fenced(BROKEN_THIRD), fenced(BROKEN)]
    lms.root = recording_lm(replies)
    result, events = await turn(runtime, TASK)
    assert result.status == "failed"
    assert len(lms.root.engine_script.requests) == 4
    assert len(task_cells(events)) == 3  # the repeat was never run
