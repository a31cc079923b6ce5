"""The promotion gate's conditions one by one, the dataset refusal, and approval's checks."""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

import pytest

from fleet_core.api import FleetRuntime
from fleet_core.config import load_config
from fleet_core.errors import InvalidInput
from fleet_core.models import TurnRequest
from fleet_core.optimization import candidates as cands
from fleet_core.optimization.gate import evaluate_gate
from fleet_core.optimization.program import DEFAULT_PROGRAM_DIGEST, ProgramState, active_path
from fleet_core.optimization.validation import Observation

from .conftest import Models, add_examples

DEV, HOLD = ["d1", "d2"], ["h1", "h2"]


def observations() -> list[Observation]:
    out = []
    for stage in ("baseline", "candidate"):
        for i in range(3):
            for split, ids in (("dev", DEV), ("holdout", HOLD)):
                for example_id in ids:
                    good = stage == "candidate" or split == "holdout"
                    fields = {
                        "stage": stage,
                        "pass_index": i,
                        "split": split,
                        "example_id": example_id,
                        "critical": example_id == "h1",
                        "score": 1.0 if good else 0.0,
                        "quality": 1.0 if good else 0.0,
                        "usage_available": 1.0,
                        "error": False,
                    }
                    out.append(Observation(**fields))
    return out


def altered(update: dict[str, object], **where: object) -> list[Observation]:
    """The reference observations with ``update`` where every attribute in ``where`` matches."""
    return [
        o.model_copy(update=update) if all(getattr(o, k) == v for k, v in where.items()) else o
        for o in observations()
    ]


def gate(obs: list[Observation], changed: tuple[str, ...] = ("triage",)) -> dict[str, bool]:
    verdict = evaluate_gate(obs, changed=list(changed), dev_ids=DEV, holdout_ids=HOLD)
    return {c.name: c.passed for c in verdict.checks}


def test_the_reference_observations_pass_every_check() -> None:
    assert all(gate(observations()).values())


@pytest.mark.parametrize(
    ("name", "obs", "changed"),
    [
        ("passes", observations()[:-1], ("triage",)),
        ("passes", altered({"quality": 1.5}, stage="candidate", example_id="h2"), ("triage",)),
        (
            "usage",
            altered({"usage_available": 0.0}, stage="baseline", pass_index=0, example_id="d1"),
            ("triage",),
        ),
        (
            "holdout_errors",
            altered(
                {"error": True, "score": 1.0}, stage="candidate", example_id="h2", pass_index=1
            ),
            ("triage",),
        ),
        (
            "critical",
            # the baseline's too, so only the critical rule (not aggregate quality) fails
            altered({"quality": 0.0, "score": 1.0}, example_id="h1", pass_index=2),
            ("triage",),
        ),
        ("dev_improved", altered({"score": 0.0}, stage="candidate", split="dev"), ("triage",)),
        (
            "holdout_no_regression",
            altered({"score": 0.95}, stage="candidate", example_id="h2"),
            ("triage",),
        ),
        (
            "quality_no_regression",
            altered({"quality": 0.0}, stage="candidate", example_id="h2"),
            ("triage",),
        ),
        ("changed", observations(), ()),
    ],
)
def test_each_gate_condition_fails_on_its_own(
    name: str, obs: list[Observation], changed: tuple[str, ...]
) -> None:
    result = gate(obs, changed)
    assert [k for k, ok in result.items() if not ok] == [name]


def test_a_dataset_without_critical_holdout_cases_cannot_pass() -> None:
    obs = [o.model_copy(update={"critical": False}) for o in observations()]
    assert [k for k, ok in gate(obs).items() if not ok] == ["critical"]


async def test_refusal_below_eight_examples_or_three_groups(opt_runtime: FleetRuntime) -> None:
    await add_examples(opt_runtime, {"a": 4, "b": 3}, critical=("b",))
    await add_examples(opt_runtime, {"c": 2}, status="benchmark")  # excluded
    await opt_runtime.new_session("research-1")
    with pytest.raises(InvalidInput, match="found 7 example\\(s\\) in 2 group\\(s\\)"):
        await opt_runtime.optimization.run("research-1", max_metric_calls=4)
    await add_examples(opt_runtime, {"a": 1})  # 8 examples, still 2 groups
    with pytest.raises(InvalidInput, match="found 8 example\\(s\\) in 2 group\\(s\\)"):
        await opt_runtime.optimization.run("research-1", max_metric_calls=4)


async def _candidate(runtime: FleetRuntime, session_id: str) -> tuple[str, Path]:
    config = await runtime.effective_config(session_id)
    state_dir = config.state_dir
    from fleet_core.optimization.service import identity

    program = ProgramState(components={"triage": "Prefer rlm for anything numeric."})
    obs = observations()
    manifest = cands.Manifest(
        version=cands.new_version(session_id),
        session_id=session_id,
        created_at=cands.now(),
        candidate_digest=hashlib.sha256(program.canonical()).hexdigest(),
        identity=identity(state_dir, session_id, config),
        dataset={},
        search={},
        changed_components=["triage"],
        evaluation=obs,
        gate=evaluate_gate(obs, changed=["triage"], dev_ids=DEV, holdout_ids=HOLD),
    )
    path = cands.save_candidate(state_dir, manifest, program, "# report", "<svg/>")
    return manifest.version, path


async def test_approval_refuses_changed_bytes_incumbent_and_identities(
    opt_runtime: FleetRuntime,
) -> None:
    runtime = opt_runtime
    await runtime.new_session("s1")
    state_dir = (await runtime.effective_config("s1")).state_dir

    version, path = await _candidate(runtime, "s1")
    (path / "program.json").write_bytes((path / "program.json").read_bytes() + b" ")
    with pytest.raises(InvalidInput, match="bytes do not match"):
        await runtime.optimization.approve("s1", version)

    version, path = await _candidate(runtime, "s1")
    active_path(state_dir, "s1").write_bytes(ProgramState(components={"direct": "x"}).canonical())
    with pytest.raises(InvalidInput, match=r"active program changed.*reevaluate"):
        await runtime.optimization.approve("s1", version)
    active_path(state_dir, "s1").unlink()

    recorded_dependencies = {**cands.dependency_versions(), "dspy": "0.0.1"}
    for field, value, message in (
        ("code_digest", "0" * 64, "code changed"),
        ("configuration_digest", "0" * 64, "configuration"),
        ("dependencies", recorded_dependencies, r"dependency versions changed \(dspy\)"),
    ):
        version, path = await _candidate(runtime, "s1")
        manifest = json.loads((path / "manifest.json").read_text())
        manifest["identity"][field] = value
        (path / "manifest.json").write_text(json.dumps(manifest))
        with pytest.raises(InvalidInput, match=rf"{message}.*reevaluate"):
            await runtime.optimization.approve("s1", version)
    assert (await runtime.optimization.status("s1")).active_digest == DEFAULT_PROGRAM_DIGEST

    version, _ = await _candidate(runtime, "s1")
    approved = await runtime.optimization.approve("s1", version)
    assert (await runtime.optimization.status("s1")).active_digest == approved.candidate_digest


async def test_every_turns_trace_names_the_program_that_served_it(
    tmp_path: Path, models: Models
) -> None:
    """The digest is on the trace record itself (queued, not exported): the built-in default's
    before any approval, the approved candidate's after."""
    env = {"FLEET_STATE_DIR": str(tmp_path / "state")}  # tracing on (local), traces stay queued
    runtime = await FleetRuntime.open(
        load_config(environ=env, cwd=tmp_path),
        lm_provider=models.provider(),
        trace_export="deferred",
    )
    try:
        await runtime.new_session("served", mode="rlm")

        async def traced_digest() -> object:
            result = await runtime.run_turn(TurnRequest(session_id="served", task="six times 7?"))
            assert result.status == "completed" and result.trace_id, result.error
            record = await runtime.traces.pending(result.trace_id)
            assert record is not None
            [root] = [s for s in record.spans if s.parent_id is None]
            assert root.attributes["fleet.compiled_program_digest"] == (
                result.compiled_program_digest
            )
            return result.compiled_program_digest

        assert await traced_digest() == DEFAULT_PROGRAM_DIGEST
        version, _ = await _candidate(runtime, "served")
        approved = await runtime.optimization.approve("served", version)
        assert approved.candidate_digest != DEFAULT_PROGRAM_DIGEST
        assert await traced_digest() == approved.candidate_digest
    finally:
        await runtime.close()


def test_a_run_sweeps_only_stale_staging_directories(tmp_path: Path) -> None:
    """Another process's candidate being staged right now is left alone; a crashed run's is
    removed."""
    root = tmp_path / "optimization" / "s-1" / "candidates"
    fresh, stale = root / ".staging-s-1-aa", root / ".staging-s-1-bb"
    for directory in (fresh, stale):
        directory.mkdir(parents=True)
        (directory / "program.json").write_text("{}")
    old = time.time() - cands.STAGING_STALE_SECONDS - 60
    os.utime(stale, (old, old))

    cands.sweep_staging(tmp_path, "s-1")

    assert fresh.is_dir() and not stale.exists()
