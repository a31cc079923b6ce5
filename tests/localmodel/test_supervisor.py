"""The supervised local server, on a stand-in for llama_cpp.server started through the real code
path: start and health check, one server shared by several processes, stop on release or exit,
no orphan after ``kill -9`` of its user, ``stop`` whoever started it."""

from __future__ import annotations

import json
import os
import signal
import urllib.request
from pathlib import Path

import pytest

from fleet_core.errors import ModelUnavailable
from fleet_core.localmodel import procs
from fleet_core.localmodel.supervisor import LocalEndpoint, LocalModel
from tests.localmodel.conftest import endpoint_line, wait_gone


def _models(endpoint: LocalEndpoint) -> dict:
    """``GET /v1/models`` with the server's key (it answers nothing without)."""
    request = urllib.request.Request(
        f"{endpoint.api_base}/models", headers={"Authorization": f"Bearer {endpoint.api_key}"}
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        return json.loads(response.read())


def test_start_health_check_and_flags(local_model: LocalModel, record: Path) -> None:
    endpoint = local_model.ensure()
    assert endpoint.api_base.startswith("http://127.0.0.1:") and not endpoint.reused
    assert _models(endpoint)["data"][0]["id"] == "fake-coder"
    start = json.loads(record.read_text().splitlines()[0])
    argv = start["argv"]
    flags = {
        flag: (value if not value.startswith("--") else True)
        for flag, value in zip(argv, [*argv[1:], "--"], strict=True)
        if flag.startswith("--")
    }
    assert flags["--host"] == "127.0.0.1" and flags["--port"] == str(endpoint.port)
    assert flags["--threads"] == "2" and flags["--threads-batch"] == "2"
    assert flags["--ctx-size"] == "8192" and flags["--alias"] == "fake-coder"
    # one slot, a bounded host prompt cache, llama_cpp.server's repeat penalty as the default,
    # slot save/restore beside the weights
    assert flags["--parallel"] == "1" and flags["--cache-ram"] == "256"
    assert flags["--repeat-penalty"] == "1.1"
    assert flags["--slot-save-path"] == str(local_model.home / "slots")
    assert flags["--metrics"] is True and flags["--slots"] is True
    assert start["pid"] == endpoint.server_pid
    status = local_model.status()
    assert status.running and status.api_base == endpoint.api_base
    assert status.users == (os.getpid(),) and status.rss_bytes and status.rss_bytes > 0


def test_server_environment_has_no_secrets(
    local_model: LocalModel, monkeypatch, record: Path
) -> None:
    monkeypatch.setenv("FLEET_LM_API_KEY", "sk-never-in-the-model-server")
    endpoint = local_model.ensure()
    environ = Path(f"/proc/{endpoint.server_pid}/environ").read_bytes()
    assert b"sk-never-in-the-model-server" not in environ
    # OpenMP's threads sleep between kernels rather than spin (a shared machine's cores)
    assert b"OMP_WAIT_POLICY=PASSIVE" in environ.split(b"\0")


def test_ensure_again_reuses_without_a_second_server(local_model: LocalModel, record: Path) -> None:
    first = local_model.ensure()
    again = local_model.ensure()
    assert again.api_base == first.api_base
    starts = [line for line in record.read_text().splitlines() if '"start"' in line]
    assert len(starts) == 1


def test_a_second_process_reuses_the_server(
    local_model: LocalModel, run_owner, record: Path
) -> None:
    mine = local_model.ensure()
    other = run_owner("release")
    seen = endpoint_line(other)
    assert other.wait(30) == 0
    assert seen["reused"] is True and seen["apiBase"] == mine.api_base
    # the other process released, but this one still uses it: the server keeps running
    assert procs.alive(mine.guard_pid, None) and _models(mine)["data"]
    assert len([line for line in record.read_text().splitlines() if '"start"' in line]) == 1


def test_release_by_the_last_user_stops_the_server(local_model: LocalModel) -> None:
    endpoint = local_model.ensure()
    local_model.release()
    assert wait_gone([endpoint.guard_pid, endpoint.server_pid], timeout=20)
    assert not local_model.status().running


def test_exit_without_release_stops_the_server(run_owner) -> None:
    owner = run_owner("exit")
    seen = endpoint_line(owner)
    assert owner.wait(30) == 0
    assert wait_gone([seen["guardPid"], seen["serverPid"]], timeout=10)


def test_kill_9_of_the_owner_leaves_no_orphan(run_owner, home: Path) -> None:
    owner = run_owner("sleep")
    seen = endpoint_line(owner)
    assert procs.alive(seen["serverPid"], None)
    os.kill(owner.pid, signal.SIGKILL)
    owner.wait()
    assert wait_gone([seen["guardPid"], seen["serverPid"]], timeout=10)
    assert not (home / "server.json").exists()


def test_kill_9_of_the_guard_takes_the_server_with_it(local_model: LocalModel) -> None:
    endpoint = local_model.ensure()
    os.kill(endpoint.guard_pid, signal.SIGKILL)
    assert wait_gone([endpoint.server_pid], timeout=10)  # PR_SET_PDEATHSIG
    restarted = local_model.ensure()  # the dead state is noticed: a new server
    assert restarted.api_base != endpoint.api_base or restarted.guard_pid != endpoint.guard_pid
    assert _models(restarted)["data"]


def test_a_pinned_server_outlives_its_starter_until_stop(
    run_owner, local_model: LocalModel
) -> None:
    owner = run_owner("release", pin=True)
    seen = endpoint_line(owner)
    assert owner.wait(30) == 0
    status = local_model.status()
    assert status.running and status.pinned and status.users == ()
    assert local_model.stop() is True
    assert wait_gone([seen["guardPid"], seen["serverPid"]], timeout=20)
    assert local_model.stop() is False


def test_a_server_that_dies_at_start_is_reported_with_its_log(
    local_model: LocalModel, weights, home: Path
) -> None:
    broken = LocalModel(
        local_model.settings.model_copy(
            update={"server_module": "tests.localmodel.no_such_module"}
        ),
        home,
        weights=weights,
        poll_seconds=0.2,
    )
    with pytest.raises(ModelUnavailable, match="exited during start") as info:
        broken.ensure()
    assert "No module named" in info.value.message and "server.log" in info.value.message
    assert not broken.status().running


def test_a_busy_server_is_reused_not_restarted(
    local_model: LocalModel, run_owner, monkeypatch
) -> None:
    """A server answering nothing over HTTP (busy with another process's completion: it serves
    one request at a time) but alive and listening is reused, never killed."""
    from fleet_core.localmodel import supervisor

    mine = local_model.ensure()
    monkeypatch.setattr(supervisor, "_healthy", lambda api_base, api_key, timeout=2.0: False)
    other = LocalModel(local_model.settings, local_model.home, weights=local_model.weights)
    try:
        again = other.ensure()
        assert again.reused and again.guard_pid == mine.guard_pid
        assert procs.alive(mine.server_pid, None)
    finally:
        other.release()
