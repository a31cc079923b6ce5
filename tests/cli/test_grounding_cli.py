"""Grounded SUBMIT through ``fleet-lsp turn`` (the real entry point, scripted models, the real
sandbox): ``--json`` carries ``usage.submitRejections``; the live view names each ungrounded
SUBMIT and the summary counts the rejections."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_cli import run
from tests.lsp.conftest import write_script
from tests.lsp.test_grounding_lsp import SCRIPT

TASK = "UNPRINTED-SUM of the integers below 1000"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"FLEET_TEST_SCRIPT": str(write_script(tmp_path / "grounding.json", SCRIPT))}


def test_turn_json_counts_submit_rejections(tmp_path: Path, env: dict[str, str]) -> None:
    out = run(tmp_path, "turn", TASK, "-s", "g", "--mode", "rlm", "--json", env=env)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["status"] == "completed" and result["answer"] == "The total is 499500"
    assert result["usage"]["submitRejections"] == 2
    assert result["usage"]["sandboxErrors"] == 0


def test_turn_prints_ungrounded_submits(tmp_path: Path, env: dict[str, str]) -> None:
    out = run(tmp_path, "turn", TASK, "-s", "g", "--mode", "rlm", env=env)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    rejected = [line for line in lines if line.startswith("ungrounded SUBMIT rejected (root")]
    flagged = [line for line in lines if line.startswith("ungrounded SUBMIT accepted, flagged")]
    assert len(rejected) == 2 and len(flagged) == 1, out.stdout
    assert all(line.endswith(": 499500") for line in rejected + flagged)
    assert "ungrounded SUBMITs rejected: 2" in lines


def test_printed_figure_is_not_flagged(tmp_path: Path, env: dict[str, str]) -> None:
    out = run(tmp_path, "turn", "PRINTED-SUM below 1000", "-s", "p", "--mode", "rlm", env=env)
    assert out.returncode == 0, out.stderr
    assert "The total is 499500" in out.stdout
    assert "ungrounded" not in out.stdout
