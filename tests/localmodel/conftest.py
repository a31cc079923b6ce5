"""Fixtures for the embedded model's tests: small fake weights, a LocalModel on the stand-in
server (tests/localmodel/fake_llama_server.py), and process helpers."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from fleet_core.config import LocalModelSettings
from fleet_core.localmodel import procs
from fleet_core.localmodel.supervisor import LocalModel
from fleet_core.localmodel.weights import WeightsSpec, assemble

FAKE_MODULE = "tests.localmodel.fake_llama_server"


def make_parts(
    folder: Path, sizes: tuple[int, ...] = (3000, 5000, 1234)
) -> tuple[list[Path], WeightsSpec]:
    """Part files with distinct bytes and the spec that pins their concatenation."""
    folder.mkdir(parents=True, exist_ok=True)
    parts, digest = [], hashlib.sha256()
    for index, size in enumerate(sizes):
        data = bytes((index * 31 + i) % 251 for i in range(size))
        path = folder / f"part{index + 1:02d}.bin"
        path.write_bytes(data)
        digest.update(data)
        parts.append(path)
    spec = WeightsSpec(
        model_id="fake-coder",
        file_name="fake-coder.gguf",
        size_bytes=sum(sizes),
        sha256=digest.hexdigest(),
        part_modules=tuple(f"fake_part_{n}" for n in range(len(sizes))),
    )
    return parts, spec


def wait_gone(pids: list[int], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(procs.alive(pid, None) for pid in pids):
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "localmodel"


@pytest.fixture
def weights(tmp_path: Path, home: Path) -> WeightsSpec:
    """Fake weights, already assembled and verified in ``home`` (as `model serve` leaves them)."""
    parts, spec = make_parts(tmp_path / "parts")
    assemble(spec, home, parts=parts)
    return spec


@pytest.fixture
def record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "fake-server.jsonl"
    monkeypatch.setenv("FAKE_LLAMA_RECORD", str(path))
    return path


@pytest.fixture
def local_model(home: Path, weights: WeightsSpec, record: Path) -> Iterator[LocalModel]:
    settings = LocalModelSettings(server_module=FAKE_MODULE, start_timeout_seconds=30)
    model = LocalModel(settings, home, weights=weights, poll_seconds=0.2)
    yield model
    model.stop()


@pytest.fixture
def run_owner(home: Path, weights: WeightsSpec) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Start ``tests/localmodel/owner.py`` as another process using the same home."""
    started: list[subprocess.Popen[str]] = []

    def start(then: str, **extra: Any) -> subprocess.Popen[str]:
        spec = {"home": str(home), "weights": dataclasses.asdict(weights), "then": then, **extra}
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.localmodel.owner", json.dumps(spec)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


@dataclasses.dataclass
class Squatter:
    """Another process listening on a port (tests/localmodel/squatter.py)."""

    proc: subprocess.Popen[str]
    port: int
    record: Path

    def received(self) -> list[dict[str, Any]]:
        """Every connection and request it got (none, when fleet-lsp refused it)."""
        if not self.record.exists():
            return []
        return [json.loads(line) for line in self.record.read_text().splitlines() if line]


@pytest.fixture
def squatter(tmp_path: Path) -> Iterator[Callable[..., Squatter]]:
    """``squatter(port=0)`` starts an impostor on 127.0.0.1:``port`` (a free one by default)."""
    started: list[subprocess.Popen[str]] = []

    def start(port: int = 0) -> Squatter:
        record = tmp_path / f"squatter-{len(started)}.jsonl"
        argv = ["--record", str(record), "--port", str(port)]
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.localmodel.squatter", *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        started.append(proc)
        seen = endpoint_line(proc)
        return Squatter(proc, seen["port"], record)

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def endpoint_line(proc: subprocess.Popen[str]) -> dict[str, Any]:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        raise AssertionError(
            f"the owner printed nothing: {proc.stderr.read() if proc.stderr else ''}"
        )
    found: dict[str, Any] = json.loads(line)
    return found
