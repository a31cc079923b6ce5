"""At run time the product reaches only the endpoints the user configured (issue 9).

A whole Turn runs in a fresh process under a socket guard installed before anything is imported:
the configured model endpoint (a scripted OpenAI-compatible server on loopback), the local
sandbox and the local MLflow store are all the Turn may touch. Every other name lookup or
connection (LiteLLM's cost map, DSPy's model metadata, ...) is recorded and refused, as it would
fail on a machine without a network, and the test asserts there were none.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.cli.fake_models import model_env, scripted_models

REPO = Path(__file__).resolve().parents[2]

GUARD = r"""
import errno, ipaddress, json, os, socket, sys

ALLOWED_HOSTS = set(json.loads(os.environ["GUARD_ALLOWED_HOSTS"]))
FORBIDDEN = []


def _allowed_host(host):
    if host is None or host in ALLOWED_HOSTS or host in ("localhost", ""):
        return True
    if isinstance(host, bytes):
        host = host.decode()
    try:
        return ipaddress.ip_address(str(host).split("%")[0]).is_loopback
    except ValueError:
        return False


def _allowed_address(family, address):
    if family == getattr(socket, "AF_UNIX", None) or not isinstance(address, tuple):
        return True  # unix sockets: the sandbox's channel, the SQLite/flock side
    return _allowed_host(address[0])


def _refuse(what, target):
    FORBIDDEN.append({"call": what, "target": repr(target)})
    raise OSError(errno.ENETUNREACH, f"socket guard: {what} {target!r} is not configured")


_connect, _connect_ex = socket.socket.connect, socket.socket.connect_ex
_getaddrinfo, _create_connection = socket.getaddrinfo, socket.create_connection


def connect(self, address):
    if not _allowed_address(self.family, address):
        _refuse("connect", address)
    return _connect(self, address)


def connect_ex(self, address):
    if not _allowed_address(self.family, address):
        _refuse("connect_ex", address)
    return _connect_ex(self, address)


def getaddrinfo(host, *args, **kwargs):
    if not _allowed_host(host):
        FORBIDDEN.append({"call": "getaddrinfo", "target": repr(host)})
        raise socket.gaierror(socket.EAI_NONAME, "socket guard: name lookups are offline")
    return _getaddrinfo(host, *args, **kwargs)


def create_connection(address, *args, **kwargs):
    if not _allowed_host(address[0]):
        _refuse("create_connection", address)
    return _create_connection(address, *args, **kwargs)


socket.socket.connect, socket.socket.connect_ex = connect, connect_ex
socket.getaddrinfo, socket.create_connection = getaddrinfo, create_connection

import asyncio
from pathlib import Path

# MLflow is imported here, under the guard, so its import-time behaviour is checked too (and
# the Turn's background export and the read below do not race to import it).
import mlflow

from fleet_core.config import load_config
from fleet_core.models import TurnRequest
from fleet_core.api import FleetRuntime


async def main():
    config = load_config(cwd=Path.cwd())
    runtime = await FleetRuntime.open(config)  # the configured model: the real lm15 path
    try:
        await runtime.new_session("offline")
        result = await runtime.run_turn(
            TurnRequest(session_id="offline", task="What is six times seven? Use the sandbox.")
        )
        # Export the queued trace to the local MLflow store and read it back, as `fleet-lsp
        # trace show` would: the store is opened and written in this guarded process too.
        await runtime.traces.flush()
        view = await asyncio.to_thread(runtime.tracer.load_trace, result.trace_id)
    finally:
        await runtime.close()
    return result, view


result, view = asyncio.run(main())
print(json.dumps({
    "status": result.status,
    "answer": result.answer,
    "error": result.error.model_dump() if result.error else None,
    "trace_id": result.trace_id,
    "trace_read": view.trace_id,
    "forbidden": FORBIDDEN,
    "loaded": sorted(m for m in ("dspy", "litellm", "mlflow") if m in sys.modules),
}))
"""


#: Variables by which libraries detect a test or CI run and go quiet (MLflow's telemetry): a
#: user's shell has none of them, so neither does the guarded process.
QUIETING = (
    "PYTEST_CURRENT_TEST",
    "CI",
    "GITHUB_ACTIONS",
    "DO_NOT_TRACK",
    "MLFLOW_DISABLE_TELEMETRY",
)


def run_guarded_turn(tmp_path: Path, server: Any) -> dict[str, Any]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("FLEET_", "LITELLM_")) and k not in QUIETING
    }
    env |= model_env(server) | {
        "FLEET_STATE_DIR": str(tmp_path / "state"),
        "FLEET_MLFLOW_DESTINATION": "local",
        "GUARD_ALLOWED_HOSTS": json.dumps(["127.0.0.1"]),
    }
    out = subprocess.run(
        [sys.executable, "-c", GUARD],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-4000:]
    report: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    report["stderr"] = out.stderr
    return report


def test_a_turn_reaches_only_the_configured_endpoints(tmp_path: Path) -> None:
    with scripted_models() as server:
        report = run_guarded_turn(tmp_path, server)
        calls = server.calls
    assert report["status"] == "completed", report
    assert "42" in report["answer"]
    assert calls == 3  # triage, the cell, SUBMIT: the model really was the configured endpoint
    assert report["trace_read"] == report["trace_id"], "MLflow local tracing was on"
    assert report["forbidden"] == [], report["forbidden"]


# ---------------------------------------------------------------------------------------------
# the switches themselves
# ---------------------------------------------------------------------------------------------


def test_offline_defaults_are_defaults_a_user_can_override() -> None:
    from fleet_core.offline import OFFLINE_DEFAULTS, apply_offline_defaults, offline_environ

    environ: dict[str, str] = {"MLFLOW_DISABLE_TELEMETRY": "false"}
    apply_offline_defaults(environ)
    assert environ == {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "MLFLOW_DISABLE_TELEMETRY": "false"}
    assert offline_environ({"PATH": "/bin"}) == {"PATH": "/bin", **OFFLINE_DEFAULTS}
    # importing fleet_core applied them to this process
    assert all(name in os.environ for name in OFFLINE_DEFAULTS)


def test_a_failed_dspy_metadata_refresh_is_logged_at_debug_only(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A user who opts back in to the refresh (LITELLM_LOCAL_MODEL_COST_MAP=False) on a machine
    that cannot reach it does not see DSPy's warning at the default level."""
    import logging

    from dspy.clients import model_metadata

    import fleet_core  # noqa: F401  (installs the filter)

    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "False")
    monkeypatch.setenv("LITELLM_MODEL_COST_MAP_URL", "http://127.0.0.1:9/closed-port.json")
    monkeypatch.setattr(model_metadata, "_data", None)
    with caplog.at_level(logging.WARNING):
        assert model_metadata._load()  # the bundled snapshot
    assert model_metadata.source_info()["fallback_reason"] == "URLError"
    assert not [r for r in caplog.records if "metadata" in r.getMessage()]
    monkeypatch.setattr(model_metadata, "_data", None)
    with caplog.at_level(logging.DEBUG, logger="dspy.clients.model_metadata"):
        model_metadata._load()
    shown = [r for r in caplog.records if "Model metadata refresh failed" in r.getMessage()]
    assert [r.levelname for r in shown] == ["DEBUG"]
