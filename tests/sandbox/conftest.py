"""Fixtures: sandboxes per backend, created in tmp_path and always destroyed."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from daytona_testing import daytona_fake  # noqa: F401 - the fake Daytona server fixture
from sandbox_support import BACKENDS, TEST_LIMITS, MakeSandbox, build_sandbox

from fleet_core.sandbox import Sandbox, SandboxLimits, SandboxSpec
from fleet_core.sandbox.isolation import find_bwrap


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Daytona runs only the modules that opt in (``RUNS_ON_DAYTONA = True``); the adversarial
    and forged-frame suites are about LocalSandbox's isolation."""
    keep, drop = [], []
    for item in items:
        callspec = getattr(item, "callspec", None)
        backend = callspec.params.get("backend") if callspec is not None else None
        module = getattr(item, "module", None)
        if backend == "daytona" and not getattr(module, "RUNS_ON_DAYTONA", False):
            drop.append(item)
        else:
            keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    if request.param == "local" and find_bwrap() is None:
        pytest.skip("bubblewrap not available")
    if request.param == "daytona":
        request.getfixturevalue("daytona_fake")
    return str(request.param)


@pytest.fixture
async def make_sandbox(tmp_path: Path, backend: str) -> AsyncIterator[MakeSandbox]:
    made: list[Sandbox] = []

    async def make(
        name: str = "ws", *, start: bool = True, limits: SandboxLimits = TEST_LIMITS, **options: Any
    ) -> Sandbox:
        workspace = tmp_path / name
        workspace.mkdir(exist_ok=True)
        spec_fields = {k: options.pop(k) for k in ("network", "readonly_roots") if k in options}
        spec = SandboxSpec(
            session_id="test", agent_id=name, workspace=workspace, limits=limits, **spec_fields
        )
        sandbox = build_sandbox(backend, spec, **options)
        made.append(sandbox)
        if start:
            await sandbox.start()
        return sandbox

    yield make
    for sandbox in made:
        await sandbox.destroy()


@pytest.fixture
async def sandbox(make_sandbox: MakeSandbox) -> Sandbox:
    return await make_sandbox()
