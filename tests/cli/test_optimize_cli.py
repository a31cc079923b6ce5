"""``fleet-lsp optimize`` through the real entry point: a run's progress bars per phase (dataset,
search, validation passes) with rollouts and the best score, the status and approval forms,
``--json``, and one-line errors (scripted serving, judge and reflection models)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fleet_core.optimization.candidates import code_digest
from tests.cli.test_cli import run
from tests.cli.test_eval import one_line_error
from tests.lsp.conftest import write_script
from tests.optimization.conftest import SCRIPT, build_optimization_state


async def test_optimize_shows_progress_per_phase_then_status_and_approve(tmp_path: Path) -> None:
    env = await build_optimization_state(tmp_path)
    env["FLEET_TEST_SCRIPT"] = str(write_script(tmp_path / "script.json", SCRIPT))

    code_before = code_digest.__wrapped__()  # what the CLI process will record
    out = run(tmp_path, "optimize", "--session", "research-1", "--max-metric-calls", "12", env=env)
    assert out.returncode == 0, out.stderr
    err = out.stderr
    assert "6 × (dev + holdout)" in err and "not proof of general improvement" in err
    assert "dataset: train 3, dev 3, holdout 3" in err
    # the bars' final state: every phase complete, with its rollouts and the best score
    assert re.search(r"dataset\s.*1/1", err), err
    assert re.search(r"search\s.*\d+/12 rollouts\s+best 1\.000", err), err
    assert re.search(r"validation passes\s.*36/36 replays\s+best 1\.000", err), err
    assert "saving the candidate and its report" in err
    assert "%|" not in out.stdout + err and "GEPA Optimization" not in err  # no tqdm bars
    version = re.search(r"candidate (research-1-[0-9a-f]{32}) \(saved inactive\)", out.stdout)
    assert version is not None, out.stdout
    assert "changed components: rlm.generate_action" in out.stdout
    assert f"--approve {version.group(1)}" in out.stdout

    status = run(tmp_path, "optimize", "--session", "research-1", "--status", "--json", env=env)
    assert status.returncode == 0, status.stderr
    found = json.loads(status.stdout)
    assert [c["version"] for c in found["candidates"]] == [version.group(1)]
    assert found["candidates"][0]["gatePassed"] is True and found["activeVersion"] is None

    approved = run(
        tmp_path, "optimize", "-s", "research-1", "--approve", version.group(1), "--json", env=env
    )
    if code_digest.__wrapped__() != code_before:
        # fleet_core's files changed on disk meanwhile (a shared checkout): approval must refuse
        assert "the fleet-core code changed" in one_line_error(approved, "InvalidInput")
        pytest.skip("fleet_core changed during the run; approval refused as it must")
    assert approved.returncode == 0, approved.stderr
    assert json.loads(approved.stdout)["active"] is True
    table = run(tmp_path, "optimize", "--session", "research-1", "--status", env=env)
    assert f"active: {version.group(1)}" in table.stdout

    bad = run(tmp_path, "optimize", "--session", "research-1", "--approve", "nope", env=env)
    assert bad.returncode == 2
    assert "is not a candidate version" in one_line_error(bad, "InvalidInput")
    both = run(
        tmp_path,
        "optimize",
        "--session",
        "research-1",
        "--gepa-budget",
        "light",
        "--max-metric-calls",
        "3",
        env=env,
    )
    assert both.returncode == 2 and "not both" in both.stderr


def test_optimize_help_says_the_budget_bounds_the_search_only(tmp_path: Path) -> None:
    out = run(tmp_path, "optimize", "--help")
    assert out.returncode == 0
    text = " ".join(out.stdout.split())
    assert "bounds the search's rollouts only" in text and "--approve" in text
