"""Another local user must not be able to impersonate the embedded model (docs/security.md,
"Another local user and the embedded model"): a process that holds the server's port, before the
start, during the model load, or after the server died, is refused with one message and
receives nothing (not a connection, not ``/v1/models``, not a prompt); the real path sends the
server's per-start key, which is in no argv, is kept only in a ``0600`` server.json and is
redacted everywhere."""

from __future__ import annotations

import json
import os
import re
import signal
import stat
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from fleet_core.config import load_config
from fleet_core.engine.lm import ConfiguredLmProvider
from fleet_core.errors import ModelUnavailable
from fleet_core.localmodel import procs, supervisor
from fleet_core.localmodel.supervisor import LocalModel
from fleet_core.observability.redaction import NO_SECRETS, Redactor
from tests.localmodel.conftest import Squatter, wait_gone


def _refused(port: int) -> str:
    """The one message an impostor on ``port`` gets (a pattern for ``pytest.raises``)."""
    return (
        re.escape(
            f"Refusing the embedded model server on 127.0.0.1:{port}: the listening socket does "
            "not belong to the server fleet-lsp started (another process"
        )
        + r"(, uid \d+,)? "
        + re.escape("holds the port). Nothing was sent to it.")
        + "$"
    )


def _records(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def _get_models(api_base: str, key: str | None) -> int:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    request = urllib.request.Request(f"{api_base}/models", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def _bind_again(squatter: Callable[..., Squatter], port: int) -> Squatter:
    """A squatter on ``port`` as soon as the dead server's listener is gone."""
    for _attempt in range(50):
        try:
            return squatter(port)
        except AssertionError:  # still bound: the squatter exited without a port line
            time.sleep(0.1)
    raise AssertionError(f"could not bind 127.0.0.1:{port} again")


def _embedded_lm(tmp_path: Path, local_model: LocalModel) -> Any:
    environ = {"FLEET_STATE_DIR": str(tmp_path / "state"), "FLEET_MLFLOW_DESTINATION": "off"}
    provider = ConfiguredLmProvider.from_config(
        load_config(environ=environ, cwd=tmp_path), embedded=local_model
    )
    return provider.lm("root")


@pytest.fixture
def sleepers() -> Iterator[Callable[[], subprocess.Popen[bytes]]]:
    """Live processes a hand-written server.json can name as its guard and server."""
    started: list[subprocess.Popen[bytes]] = []

    def start() -> subprocess.Popen[bytes]:
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def test_a_squatter_on_the_port_is_refused_and_receives_nothing(
    local_model: LocalModel, squatter: Callable[..., Squatter], record: Path, monkeypatch
) -> None:
    impostor = squatter()  # it holds the port before the server is even started
    monkeypatch.setattr(supervisor, "_free_port", lambda: impostor.port)
    with pytest.raises(ModelUnavailable, match=_refused(impostor.port)) as info:
        local_model.ensure()
    assert info.value.kind == "ModelUnavailable"
    assert impostor.received() == []  # not a connection, not /v1/models, not a prompt
    assert not local_model.status().running
    starts = [r for r in _records(record) if r["event"] == "start"]
    assert wait_gone([r["pid"] for r in starts], timeout=20)  # our server is not left behind
    assert not (local_model.home / "server.json").exists()


def test_a_squatter_that_takes_the_port_during_the_model_load_is_refused(
    local_model: LocalModel, squatter: Callable[..., Squatter], record: Path, monkeypatch
) -> None:
    """The attack as it happens: the port is in the server's argv, and the server listens only
    after loading the model (5-9 s); another process binds the port meanwhile."""
    monkeypatch.setenv("FAKE_LLAMA_START_DELAY", "3")  # the model load
    chosen: list[int] = []
    free_port = supervisor._free_port

    def choose() -> int:
        chosen.append(free_port())
        return chosen[-1]

    monkeypatch.setattr(supervisor, "_free_port", choose)
    outcome: dict[str, Any] = {}

    def start() -> None:
        try:
            outcome["endpoint"] = local_model.ensure()
        except ModelUnavailable as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=start)
    thread.start()
    deadline = time.monotonic() + 20
    while not any(r["event"] == "start" for r in _records(record)):  # the server is loading
        assert time.monotonic() < deadline and thread.is_alive(), outcome
        time.sleep(0.02)
    impostor = squatter(chosen[0])
    thread.join(30)
    assert not thread.is_alive()
    assert "endpoint" not in outcome, "the impostor was accepted as the embedded server"
    assert re.match(_refused(chosen[0]), outcome["error"].message), outcome["error"].message
    assert impostor.received() == []
    assert not local_model.status().running


def test_a_reused_server_json_pointing_at_a_squatter_is_refused(
    local_model: LocalModel,
    squatter: Callable[..., Squatter],
    sleepers: Callable[[], subprocess.Popen[bytes]],
    home: Path,
    record: Path,
) -> None:
    """server.json names a live guard and server, but the port is another process's (the
    server died and the port was taken before the guard noticed): a second fleet-lsp process
    that would reuse it is refused the same way and sends nothing."""
    impostor = squatter()
    guard, server = sleepers(), sleepers()
    state = {
        "guard_pid": guard.pid,
        "guard_start": procs.start_time(guard.pid),
        "server_pid": server.pid,
        "server_start": procs.start_time(server.pid),
        "port": impostor.port,
        "api_base": f"http://127.0.0.1:{impostor.port}/v1",
        "api_key": "k" * 43,
        "model_id": "fake-coder",
        "pinned": False,
        "started_at": time.time(),
    }
    home.chmod(0o700)
    fd = os.open(home / "server.json", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump(state, out)
    with pytest.raises(ModelUnavailable, match=_refused(impostor.port)):
        local_model.ensure()
    assert impostor.received() == []
    assert not (home / "server.json").exists()  # the stale record is gone: a next start is new
    assert _records(record) == []  # and this attempt started nothing


def test_a_turns_lm_sends_nothing_to_a_squatter_that_took_the_port_after_the_server_died(
    tmp_path: Path, local_model: LocalModel, squatter: Callable[..., Squatter], record: Path
) -> None:
    lm = _embedded_lm(tmp_path, local_model)
    assert "42" in str(lm("Say 42"))
    (chat,) = [r for r in _records(record) if r.get("path") == "/v1/chat/completions"]
    assert chat["auth"] is True  # the per-start key went with the prompt
    port, server_pid, _start = lm.fleet_server
    assert server_pid is not None
    os.kill(server_pid, signal.SIGKILL)
    assert wait_gone([server_pid])
    impostor = _bind_again(squatter, port)
    with pytest.raises(ModelUnavailable, match=_refused(port)):
        lm("Say 42 again")  # the Turn's next model call
    assert impostor.received() == []


def test_a_retry_proves_the_server_again(
    tmp_path: Path,
    local_model: LocalModel,
    squatter: Callable[..., Squatter],
    record: Path,
    monkeypatch,
) -> None:
    """A failed model call is retried (a 503 here), and the retry is proven again: DSPy's own
    retry, a second later, would have gone to whoever took the port meanwhile."""
    monkeypatch.setenv("FAKE_LLAMA_FAIL_CHATS", "1")
    lm = _embedded_lm(tmp_path, local_model)
    assert "42" in str(lm("Say 42"))  # the 503, then the answer
    chats = [r for r in _records(record) if r.get("path") == "/v1/chat/completions"]
    assert len(chats) == 2 and all(r["auth"] for r in chats)

    monkeypatch.setenv("FAKE_LLAMA_FAIL_CHATS", "1")
    local_model.stop()
    lm = _embedded_lm(tmp_path, local_model)  # a new server: its first chat fails again
    proofs: list[int] = []
    taken: list[Squatter] = []
    verify = supervisor.verify_server

    def verify_then_lose_the_port(port: int, pid: int | None, start: int | None) -> None:
        proofs.append(port)
        if len(proofs) == 2:  # between the attempts the server dies and its port is taken
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
            assert wait_gone([pid])
            taken.append(_bind_again(squatter, port))
        verify(port, pid, start)

    monkeypatch.setattr(supervisor, "verify_server", verify_then_lose_the_port)
    before = len(_records(record))
    with pytest.raises(ModelUnavailable, match=_refused(lm.fleet_server[0])):
        lm("Say 42")
    assert len(proofs) == 2 and taken[0].received() == []
    chats = [r for r in _records(record)[before:] if r.get("path") == "/v1/chat/completions"]
    assert len(chats) == 1  # only the first attempt, to the real server


def test_the_server_requires_its_key_and_the_key_is_in_no_argv(
    local_model: LocalModel, home: Path, record: Path, monkeypatch
) -> None:
    overrides = (("HOST", "0.0.0.0"), ("PORT", "1"), ("CONFIG_FILE", "/nonexistent"))
    for name, value in (*overrides, ("LLAMA_ARG_HOST", "0.0.0.0")):
        monkeypatch.setenv(name, value)  # a runtime would take these over its argv
    before = Redactor.from_values(())  # made before the key existed
    endpoint = local_model.ensure()
    key = endpoint.api_key
    assert len(key) >= 43 and key not in repr(endpoint)
    # the key is in no process's argv (ps shows argv to every local user), guard and server
    # included; the server has it in its environment, which only its own user can read
    cmdlines = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdlines[int(entry.name)] = (entry / "cmdline").read_bytes()
            except OSError:
                continue
    assert b"fleet_core.localmodel.guard" in cmdlines[endpoint.guard_pid]
    assert endpoint.server_pid is not None
    assert b"tests.localmodel.fake_llama_server" in cmdlines[endpoint.server_pid]
    assert not [pid for pid, line in cmdlines.items() if key.encode() in line]
    environ = Path(f"/proc/{endpoint.server_pid}/environ").read_bytes().split(b"\0")
    assert f"LLAMA_API_KEY={key}".encode() in environ  # the variable llama.cpp's server reads
    assert not [
        v for v in environ if v.startswith((b"HOST=", b"PORT=", b"CONFIG_FILE=", b"LLAMA_ARG_"))
    ]
    # the server answers only with the key
    assert _get_models(endpoint.api_base, None) == 401
    assert _get_models(endpoint.api_base, "not-the-key") == 401
    assert _get_models(endpoint.api_base, key) == 200
    start = next(r for r in _records(record) if r["event"] == "start")
    assert start["keyed"] is True and key not in json.dumps(start)
    # kept only in server.json, 0600 in a 0700 home
    state = json.loads((home / "server.json").read_text())
    assert state["api_key"] == key
    assert stat.S_IMODE((home / "server.json").stat().st_mode) == 0o600
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    # a secret wherever the process redacts, by redactors made before and after it existed
    assert before.text(f"key {key} ok") == "key [redacted] ok"
    assert NO_SECRETS.text(f'{{"k": "{key}"}}') == '{"k": "[redacted]"}'
    assert before.contains_secret(key.encode())


def test_a_second_process_reuses_the_server_with_its_key(
    local_model: LocalModel, run_owner, record: Path
) -> None:
    mine = local_model.ensure()
    other = run_owner("release")
    assert other.stdout is not None
    seen = json.loads(other.stdout.readline())
    assert other.wait(30) == 0
    assert seen["reused"] is True and seen["apiBase"] == mine.api_base
    requests = [r for r in _records(record) if r["event"] == "request"]
    # only this process's start sent anything: the readiness check (with the key) and the
    # check that the server refuses a request without it; reuse is proven without a request
    assert [(r["path"], r["auth"]) for r in requests] == [
        ("/v1/models", True),
        ("/v1/models", False),
    ]


def test_a_server_json_without_a_key_is_not_trusted(
    local_model: LocalModel, home: Path, record: Path
) -> None:
    """An older version's server.json (no key: its server answers every local user) is not
    reused: that server is stopped and a keyed one started."""
    first = local_model.ensure()
    path = home / "server.json"
    state = json.loads(path.read_text())
    del state["api_key"]
    path.write_text(json.dumps(state))
    path.chmod(0o600)
    other = LocalModel(local_model.settings, home, weights=local_model.weights, poll_seconds=0.2)
    try:
        again = other.ensure()
        assert not again.reused and again.guard_pid != first.guard_pid
        assert again.api_key and again.api_key != first.api_key
        assert wait_gone([first.guard_pid, first.server_pid], timeout=20)
        assert _get_models(again.api_base, again.api_key) == 200
    finally:
        other.release()
    assert len([r for r in _records(record) if r["event"] == "start"]) == 2


@pytest.mark.parametrize("mode", [0o644, 0o664])
def test_a_server_json_other_users_could_read_or_write_is_not_trusted(
    local_model: LocalModel, home: Path, record: Path, mode: int
) -> None:
    """Readable by others (as an older version left it): its key is no secret, so that server
    is restarted with a new key. Writable by others: nothing in it is believed (not even which
    process to stop), and a new server is started."""
    first = local_model.ensure()
    (home / "server.json").chmod(mode)
    other = LocalModel(local_model.settings, home, weights=local_model.weights, poll_seconds=0.2)
    try:
        again = other.ensure()
        assert not again.reused and again.guard_pid != first.guard_pid
        assert again.api_key != first.api_key
        assert stat.S_IMODE((home / "server.json").stat().st_mode) == 0o600
        if not mode & 0o022:
            assert wait_gone([first.guard_pid, first.server_pid], timeout=20)
    finally:
        other.release()
        procs.terminate(first.guard_pid, None)


def test_a_server_that_answers_without_its_key_is_stopped(
    local_model: LocalModel, record: Path, monkeypatch
) -> None:
    monkeypatch.setenv("FAKE_LLAMA_OPEN", "1")  # a runtime that ignores LLAMA_API_KEY
    with pytest.raises(ModelUnavailable, match="answers requests without its API key"):
        local_model.ensure()
    starts = [r for r in _records(record) if r["event"] == "start"]
    assert wait_gone([r["pid"] for r in starts], timeout=20)
    assert not local_model.status().running
