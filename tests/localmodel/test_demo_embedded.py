"""``fleet-lsp demo`` on the embedded model, through the real entry point and the stand-in server
(tests/localmodel/fake_llama_server.py): with no endpoint configured the demo starts the embedded
server, its Turn's model calls reach it, and it is stopped when the demo exits; with an endpoint
configured the embedded model is never started."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from fleet_core.localmodel.weights import QWEN_CODER_1_5B, _write_stamp
from tests.cli.test_cli import run
from tests.localmodel.conftest import FAKE_MODULE, wait_gone


def _records(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture
def embedded_env(tmp_path: Path) -> dict[str, str]:
    """The CLI's embedded home (<state dir>/localmodel) with weights assembled earlier: a sparse
    file of the pinned size and the stamp a verified assembly leaves (the stand-in server never
    reads it), the runtime replaced by the stand-in."""
    home = tmp_path / "state" / "localmodel"
    home.mkdir(parents=True)
    target = home / QWEN_CODER_1_5B.file_name
    with target.open("wb") as out:
        out.truncate(QWEN_CODER_1_5B.size_bytes)
    _write_stamp(QWEN_CODER_1_5B, target)
    return {
        "FLEET_LOCAL_MODEL__SERVER_MODULE": FAKE_MODULE,
        "FAKE_LLAMA_RECORD": str(tmp_path / "fake-server.jsonl"),
        "FLEET_RUNTIME__TURN_TIMEOUT_SECONDS": "60",
    }


def test_demo_without_endpoint_starts_the_embedded_model_and_stops_it_at_exit(
    tmp_path: Path, embedded_env: dict[str, str]
) -> None:
    out = run(tmp_path, "demo", env=embedded_env, timeout=240)
    assert out.returncode in (0, 1), out.stdout + out.stderr
    assert "No model endpoint is configured" not in out.stderr
    assert "starting the embedded model qwen2.5-coder-1.5b" in out.stderr, out.stderr
    assert "embedded model qwen2.5-coder-1.5b ready at http://127.0.0.1:" in out.stderr
    records = _records(tmp_path / "fake-server.jsonl")
    starts = [r for r in records if r["event"] == "start"]
    assert len(starts) == 1, records  # one server: the demo's serve process reused it
    chats = [r for r in records if r.get("path") == "/v1/chat/completions"]
    assert chats and {r["body"]["model"] for r in chats} == {"qwen2.5-coder-1.5b"}
    assert "stopped the embedded model" in out.stderr
    assert wait_gone([starts[0]["pid"]], timeout=20)
    assert not (tmp_path / "state" / "localmodel" / "server.json").exists()


def test_demo_with_a_configured_endpoint_never_starts_the_embedded_model(
    tmp_path: Path, embedded_env: dict[str, str]
) -> None:
    from tests.cli.fake_models import model_env, scripted_models

    with scripted_models() as server:
        out = run(tmp_path, "demo", env={**embedded_env, **model_env(server)}, timeout=240)
        calls = server.calls
    assert out.returncode in (0, 1), out.stdout + out.stderr
    assert calls >= 1  # the Turn's model calls went to the configured endpoint
    assert "embedded model" not in out.stderr
    assert _records(tmp_path / "fake-server.jsonl") == []  # never started
    assert not (tmp_path / "state" / "localmodel" / "server.json").exists()


def test_demo_says_why_when_the_embedded_model_cannot_start(
    tmp_path: Path, embedded_env: dict[str, str]
) -> None:
    env = {**embedded_env, "FLEET_LOCAL_MODEL__SERVER_MODULE": "tests.localmodel.no_such_server"}
    out = run(tmp_path, "demo", env=env, timeout=240)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "The embedded model is not available:" in out.stderr
    assert "exited during start" in out.stderr and "No module named" in out.stderr
    assert "session demo-" not in out.stderr  # no Turn was tried
    assert "Traceback" not in out.stderr
    assert not [p for p in os.listdir(tmp_path / "state" / "localmodel") if p == "server.json"]


def test_kill_9_of_the_demo_mid_turn_leaves_no_model_process(
    tmp_path: Path, embedded_env: dict[str, str]
) -> None:
    import signal
    import subprocess
    import sys
    import time

    env = {  # a user's shell, as tests.cli.test_cli.run builds it
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("FLEET_", "DATABRICKS", "LITELLM_"))
        and k != "MLFLOW_DISABLE_TELEMETRY"
    }
    env.update(embedded_env, FLEET_STATE_DIR=str(tmp_path / "state"), FAKE_LLAMA_REPLY_DELAY="30")
    demo = subprocess.Popen(
        [sys.executable, "-m", "fleet_lsp", "demo"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    record = tmp_path / "fake-server.jsonl"
    try:
        deadline = time.monotonic() + 120
        while not any(r.get("path") == "/v1/chat/completions" for r in _records(record)):
            assert demo.poll() is None, "the demo ended before its Turn reached the model"
            assert time.monotonic() < deadline, "the Turn never reached the embedded model"
            time.sleep(0.2)
        demo.send_signal(signal.SIGKILL)  # mid-Turn: a model call is in flight
        demo.wait(10)
        (start,) = [r for r in _records(record) if r["event"] == "start"]
        assert wait_gone([start["pid"]], timeout=60), "the embedded server outlived the demo"
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
