"""``fleet-lsp model status|stop`` through the real entry point, on the stand-in server; doctor
and ``config show`` say which model is in use."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleet_core.localmodel.weights import QWEN_CODER_1_5B, parts_installed
from tests.cli.test_cli import run
from tests.localmodel.conftest import endpoint_line, wait_gone


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """The CLI's embedded home: <FLEET_STATE_DIR>/localmodel (tests.cli.test_cli.run)."""
    return tmp_path / "state" / "localmodel"


def test_status_and_stop_of_a_server_another_process_started(tmp_path: Path, run_owner) -> None:
    # the CLI's embedded home is <state dir>/localmodel: the run_owner fixture's home
    owner = run_owner("release", pin=True)
    seen = endpoint_line(owner)
    assert owner.wait(30) == 0
    status = run(tmp_path, "model", "status", "--json")
    assert status.returncode == 0, status.stderr
    record = json.loads(status.stdout)
    assert record["running"] and record["pinned"] and record["apiBase"] == seen["apiBase"]
    assert record["serverPid"] == seen["serverPid"] and record["rssBytes"] > 0
    table = run(tmp_path, "model", "status")
    assert "running at " + seen["apiBase"] in table.stdout.replace("\n", "")
    stopped = run(tmp_path, "model", "stop")
    assert stopped.returncode == 0 and "stopped the embedded model server" in stopped.stdout
    assert wait_gone([seen["guardPid"], seen["serverPid"]], timeout=20)
    again = run(tmp_path, "model", "stop", "--json")
    assert again.returncode == 0 and json.loads(again.stdout) == {"stopped": False}


def test_status_without_the_extra_says_how_to_install(tmp_path: Path) -> None:
    env = {"FLEET_LOCAL_MODEL__SERVER_MODULE": "no_such_runtime_pkg"}
    out = run(tmp_path, "model", "status", "--json", env=env)
    assert out.returncode == 0, out.stderr
    record = json.loads(out.stdout)
    assert record["running"] is False and record["runtimeInstalled"] is False
    assert record["available"] is False
    assert "FLEET_LM_API_BASE" in record["inUse"]["root"]["problem"]
    assert "local-model" in record["inUse"]["root"]["problem"]
    table = run(tmp_path, "model", "status", env=env)
    assert "uv sync --extra local-model" in table.stdout


def test_a_configured_endpoint_is_reported_and_nothing_starts(tmp_path: Path) -> None:
    env = {
        "FLEET_LM_API_BASE": "http://127.0.0.1:9/v1",
        "FLEET_LM_MODEL": "hosted-model",
        "FLEET_LM_API_KEY": "sk-cli-secret",
    }
    out = run(tmp_path, "model", "status", "--json", env=env)
    record = json.loads(out.stdout)
    assert record["inUse"]["root"] == {
        "model": "hosted-model",
        "apiBase": "http://127.0.0.1:9/v1",
        "embedded": False,
        "problem": None,
    }
    shown = run(tmp_path, "config", "show", "--json", env=env)
    models = json.loads(shown.stdout)["models"]
    assert models["root"] == "hosted-model at http://127.0.0.1:9/v1"
    assert "sk-cli-secret" not in out.stdout + shown.stdout
    assert not (tmp_path / "state" / "localmodel" / "server.json").exists()


@pytest.mark.skipif(
    parts_installed(QWEN_CODER_1_5B), reason="the weights' part packages are installed here"
)
def test_config_show_says_no_model_and_how_to_install_without_weights(tmp_path: Path) -> None:
    """The runtime is found (the stand-in's package) but the weights' part packages are not
    installed (as in CI): no model is in use, and the line says how to get the embedded one."""
    env = {"FLEET_LOCAL_MODEL__SERVER_MODULE": "tests.localmodel.fake_llama_server"}
    shown = run(tmp_path, "config", "show", "--json", env=env)
    assert shown.returncode == 0, shown.stderr
    root = json.loads(shown.stdout)["models"]["root"]
    assert root.startswith("none") and "FLEET_LM_API_BASE" in root
    table = run(tmp_path, "config", "show", env=env)
    assert "root role uses" in table.stdout
