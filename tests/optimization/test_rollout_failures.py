"""A rollout that cannot even start (its replay no longer fits the current settings) is a failed
observation, not the end of the run: the validation passes finish and the gate says why."""

from __future__ import annotations

import json
from pathlib import Path

from fleet_core.api import FleetRuntime
from fleet_core.config import load_config

from .conftest import add_examples


async def test_a_rollout_that_fails_to_start_is_an_error_observation(
    opt_runtime: FleetRuntime, tmp_path: Path
) -> None:
    await add_examples(opt_runtime, {"alpha": 3, "beta": 3, "crit": 3}, critical=("crit",))
    await opt_runtime.new_session("research-1", mode="rlm")
    # the replays' input files ("alpha 0", 7 bytes) exceed the current file limit
    env = {
        "FLEET_STATE_DIR": str(tmp_path / "state"),
        "FLEET_MLFLOW_DESTINATION": "off",
        "FLEET_STORAGE__MAX_FILE_BYTES": "4",
    }
    await opt_runtime.reconfigure(load_config(environ=env, cwd=tmp_path))

    run = await opt_runtime.optimization.run("research-1", max_metric_calls=6)

    gate = {name: (ok, detail) for name, ok, detail in run.gate}
    assert not run.gate_passed
    assert gate["holdout_errors"] == (False, "9 candidate holdout rollout(s) failed")
    manifest = json.loads((run.report_path.parent / "manifest.json").read_text())
    assert len(manifest["evaluation"]) == 6 * (3 + 3)  # every pass ran to the end
    assert all(o["error"] for o in manifest["evaluation"])
    assert (
        "FileTooLarge: 'files/input.txt' would be 7 bytes" in manifest["evaluation"][0]["feedback"]
    )
    report = await opt_runtime.optimization.report("research-1", run.version)
    assert "FAIL `holdout_errors`" in report
