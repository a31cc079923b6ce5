"""GEPA end to end with scripted serving, judge and reflection models on a replay dataset."""

from __future__ import annotations

import json

from fleet_core.api import FleetRuntime
from fleet_core.models import TurnRequest
from fleet_core.optimization.program import DEFAULT_PROGRAM_DIGEST

from .conftest import MARK, add_examples


async def test_search_validation_gate_approval_and_serving(opt_runtime: FleetRuntime) -> None:
    runtime = opt_runtime
    await add_examples(runtime, {"alpha": 3, "beta": 3, "crit": 3}, critical=("crit",))
    await runtime.new_session("research-1", mode="rlm")
    before = await runtime.run_turn(TurnRequest(session_id="research-1", task="six times seven?"))
    assert before.compiled_program_digest == DEFAULT_PROGRAM_DIGEST
    assert before.answer == "unknown"
    progress = []

    run = await runtime.optimization.run(
        "research-1", max_metric_calls=12, on_progress=progress.append
    )

    # search proposed a changed instruction; three validation passes; the gate passed
    assert "rlm.generate_action" in run.changed_components
    assert run.gate_passed, run.gate
    manifest = json.loads((run.report_path.parent / "manifest.json").read_text())
    passes = {(o["stage"], o["pass_index"]) for o in manifest["evaluation"]}
    assert passes == {(s, i) for s in ("baseline", "candidate") for i in range(3)}
    assert len(manifest["evaluation"]) == 6 * (3 + 3)
    assert manifest["dataset"]["groups"]["holdout"] == ["crit"]
    phases = [p.phase for p in progress]
    assert phases[0] == "dataset" and "search" in phases and "validation" in phases
    assert phases[-1] == "done"
    last_validation = [p for p in progress if p.phase == "validation"][-1]
    assert (last_validation.done, last_validation.total) == (36, 36)
    report = await runtime.optimization.report("research-1", run.version)
    assert "| dev |" in report and "rlm.generate_action" in report

    # saved inactive: the next Turn still serves the default
    status = await runtime.optimization.status("research-1")
    assert status.active_digest == DEFAULT_PROGRAM_DIGEST and status.active_version is None
    assert [c.version for c in status.candidates] == [run.version]

    approved = await runtime.optimization.approve("research-1", run.version)
    assert approved.candidate_digest == run.candidate_digest
    after = await runtime.run_turn(TurnRequest(session_id="research-1", task="six times seven?"))
    assert after.answer == "42"
    assert after.compiled_program_digest == run.candidate_digest != DEFAULT_PROGRAM_DIGEST
    status = await runtime.optimization.status("research-1")
    assert status.active_version == run.version
    active = (run.report_path.parents[2] / "active.json").read_text()
    assert MARK in active
