"""``[engine] small_extra_repairs`` (0 by default; 2 here): after ``small_repairs`` failed
repairs, up to that many more, each begun only while the Turn's budget allows a call and, at
its pace, the repair would end within ``EXTRA_REPAIR_BEFORE`` seconds (docs/engine.md). The
scripted model and the real local sandbox."""

from __future__ import annotations

from fleet_core.engine import codefirst
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
)
from tests.engine.support import small_turn as turn

SMALL = {"FLEET_ENGINE_PROFILE": "small", "FLEET_ENGINE__SMALL_EXTRA_REPAIRS": "2"}
#: Three distinct failing programs, then a right one: the fourth is the first extra repair.
FAILED_THRICE_THEN_RIGHT = [
    fenced(BROKEN),
    fenced(BROKEN_AGAIN),
    fenced(BROKEN.replace("totals", "per_region")),
    fenced(PROGRAM),
]
FAILING_FIVE = [fenced(BROKEN.replace("amount", f"amount{i}")) for i in range(6)]


async def test_a_third_repair_answers_when_the_turn_has_time(open_runtime, lms, tmp_path) -> None:
    runtime = await open_runtime(**SMALL)
    await quick_session(runtime, tmp_path)
    lms.root = recording_lm(FAILED_THRICE_THEN_RIGHT)
    result, _ = await turn(runtime, TASK)
    assert result.status == "completed", result.error
    assert await artifact_rows(runtime) == EXPECTED
    requests = lms.root.engine_script.requests
    assert len(requests) == 4
    assert "per_region" in requests[3]  # a repair: it sees the third program's failure
    assert result.outcome.kind == "partial"  # three programs failed on the way: said so


async def test_the_extra_repairs_are_bounded(open_runtime, lms, tmp_path) -> None:
    runtime = await open_runtime(**SMALL)
    await quick_session(runtime, tmp_path)
    lms.root = recording_lm(FAILING_FIVE)
    result, _ = await turn(runtime, TASK)
    assert result.status == "failed"
    assert len(lms.root.engine_script.requests) == 5  # 1 program, 2 repairs, 2 extra


async def test_no_extra_repair_is_begun_that_would_end_late(
    open_runtime, lms, tmp_path, monkeypatch
) -> None:
    monkeypatch.setattr(codefirst, "EXTRA_REPAIR_BEFORE", 0.0)
    runtime = await open_runtime(**SMALL)
    await quick_session(runtime, tmp_path)
    lms.root = recording_lm(FAILED_THRICE_THEN_RIGHT)
    result, _ = await turn(runtime, TASK)
    assert result.status == "failed"
    assert len(lms.root.engine_script.requests) == 3


async def test_none_by_default(open_runtime, lms, tmp_path) -> None:
    runtime = await open_runtime(FLEET_ENGINE_PROFILE="small")
    await quick_session(runtime, tmp_path)
    lms.root = recording_lm(FAILED_THRICE_THEN_RIGHT)
    result, _ = await turn(runtime, TASK)
    assert result.status == "failed"
    assert len(lms.root.engine_script.requests) == 3
