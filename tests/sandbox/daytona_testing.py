"""Fixtures and helpers for running DaytonaSandbox against the fake server (no network)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from daytona_fake import FakeDaytona

from fleet_core.sandbox import SandboxSpec
from fleet_core.sandbox.daytona import DaytonaOptions, DaytonaSandbox

FAKE_KEY = "fake-daytona-key-0123456789"
SNAPSHOT = "fleet-test-snapshot"
_CURRENT: list[FakeDaytona] = []


def current_fake() -> FakeDaytona:
    assert _CURRENT, "the daytona_fake fixture is not active"
    return _CURRENT[-1]


@pytest.fixture(scope="session")
def daytona_fake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeDaytona]:
    """One fake server per test session, on its own thread and a random loopback port."""
    fake = FakeDaytona(tmp_path_factory.mktemp("daytona-fake")).start()
    fake.add_snapshot(SNAPSHOT)
    _CURRENT.append(fake)
    try:
        yield fake
    finally:
        _CURRENT.remove(fake)
        fake.close()


def fake_options(fake: FakeDaytona, state_dir: Path, **overrides: Any) -> DaytonaOptions:
    values: dict[str, Any] = {
        "api_key": FAKE_KEY,
        "api_url": fake.url,
        "target": "us",  # explicit, so the SDK reads no DAYTONA_TARGET from env/.env
        "snapshot": SNAPSHOT,
        "state_dir": state_dir,
        "retry_wait_s": 0.01,
    }
    return DaytonaOptions(**(values | overrides))


def build_daytona_sandbox(spec: SandboxSpec, **overrides: Any) -> DaytonaSandbox:
    state_dir = spec.workspace.parent / f".fleet-{spec.agent_id}"
    return DaytonaSandbox(spec, options=fake_options(current_fake(), state_dir, **overrides))
