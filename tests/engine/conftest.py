"""Engine fixtures: a runtime whose models are scripted LMs (swappable per test)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from fleet_core.api import FleetRuntime
from fleet_core.config import EffectiveConfig, load_config
from fleet_core.engine.scripted_lm import SwitchableLms

OpenRuntime = Callable[..., Awaitable[FleetRuntime]]


@pytest.fixture
def lms() -> SwitchableLms:
    return SwitchableLms()


@pytest.fixture
def engine_config(tmp_path: Path) -> EffectiveConfig:
    return load_config(environ={"FLEET_STATE_DIR": str(tmp_path / "state")}, cwd=tmp_path)


@pytest.fixture
async def open_runtime(tmp_path: Path, lms: SwitchableLms) -> AsyncIterator[OpenRuntime]:
    """Open a runtime on this test's state dir with extra environment (e.g. budgets)."""
    opened: list[FleetRuntime] = []

    async def make(**environ: str) -> FleetRuntime:
        # Engine tests run untraced (a local MLflow store per test costs seconds); the traced
        # end-to-end tests live in tests/observability.
        env = {
            "FLEET_STATE_DIR": str(tmp_path / "state"),
            "FLEET_MLFLOW_DESTINATION": "off",
            **environ,
        }
        runtime = await FleetRuntime.open(load_config(environ=env, cwd=tmp_path), lm_provider=lms)
        opened.append(runtime)
        return runtime

    yield make
    for runtime in opened:
        await runtime.close()


@pytest.fixture
async def engine_runtime(open_runtime: OpenRuntime) -> FleetRuntime:
    return await open_runtime()
