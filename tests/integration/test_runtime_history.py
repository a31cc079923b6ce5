"""A Session's history tells a client that did not run its Turns how long each took and which
artifacts it wrote (``TurnSummary.duration_seconds``, ``artifact_paths``, ``artifacts_omitted``,
read from the stored result), on SQLite and PostgreSQL. The scripted model's code really runs
in the local sandbox."""

from __future__ import annotations

from fleet_core.api import FleetRuntime
from fleet_core.config import EffectiveConfig
from fleet_core.engine.scripted_lm import SwitchableLms, action, scripted_lm, submit
from fleet_core.models import TurnRequest

WRITE = (
    "import os\n"
    "os.makedirs('artifacts/sub', exist_ok=True)\n"
    "open('artifacts/totals.csv', 'w').write('region,total\\nNorth,150.5\\n')\n"
    "open('artifacts/sub/notes.txt', 'w').write('checked')\n"
    "print('written')"
)


async def test_history_of_an_earlier_process_has_duration_and_artifact_paths(
    fleet_config: EffectiveConfig,
) -> None:
    lms = SwitchableLms()
    first = await FleetRuntime.open(fleet_config, lm_provider=lms, trace_export="deferred")
    try:
        await first.new_session("hist", mode="rlm")
        lms.root = scripted_lm([action(WRITE), submit("'done'")])
        result = await first.run_turn(TurnRequest(session_id="hist", task="write the totals"))
        assert result.status == "completed", result.error
        lms.root = scripted_lm([submit("'nothing written'")])
        plain = await first.run_turn(TurnRequest(session_id="hist", task="answer only"))
        assert plain.status == "completed", plain.error
        running = first.store.claim_turn("hist", "still running", None)
        [*_, live] = await first.history("hist")
        assert live.turn_id == running.turn_id and live.status == "running"
        assert live.duration_seconds is None and "durationSeconds" not in live.wire()
    finally:
        await first.close()

    # a new process (an editor opened later) reads the same facts back from the store
    second = await FleetRuntime.open(fleet_config, trace_export="deferred")
    try:
        history = await second.history("hist")
    finally:
        await second.close()
    written, answered, pending = history
    assert written.turn_id == result.turn_id
    assert written.duration_seconds == result.duration_seconds
    assert written.duration_seconds is not None and written.duration_seconds > 0
    assert sorted(written.artifact_paths) == ["artifacts/sub/notes.txt", "artifacts/totals.csv"]
    assert written.artifacts_omitted == 0
    wire = written.wire()
    assert wire["durationSeconds"] == result.duration_seconds
    assert sorted(wire["artifactPaths"]) == ["artifacts/sub/notes.txt", "artifacts/totals.csv"]
    assert answered.artifact_paths == [] and answered.duration_seconds is not None
    assert answered.wire()["artifactPaths"] == []
    # the process that ran it is gone: marked interrupted, with no duration
    assert pending.turn_id == running.turn_id and pending.status == "failed"
    assert pending.duration_seconds is None and pending.artifact_paths == []
