"""Shared fixtures: one real local MLflow store per test session (mlflow imports once)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from fleet_core.api import FleetRuntime
from fleet_core.config import EffectiveConfig, load_config
from fleet_core.engine.scripted_lm import SwitchableLms
from fleet_core.observability.tracing import MlflowTracer, create_tracer

os.environ.setdefault("MLFLOW_ENABLE_ASYNC_TRACE_LOGGING", "false")

CANARY = "canary-SECRET-7f3a9e1d2c"


def make_config(state_dir: Path, **environ: str) -> EffectiveConfig:
    env = {"FLEET_STATE_DIR": str(state_dir), **environ}
    return load_config(environ=env, cwd=state_dir)


@pytest.fixture(scope="session")
def mlflow_state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fleet-mlflow")


@pytest.fixture(scope="session")
def obs_config(mlflow_state: Path) -> EffectiveConfig:
    return make_config(mlflow_state, FLEET_LM_API_KEY=CANARY)


@pytest.fixture(scope="session")
def tracer(obs_config: EffectiveConfig) -> Iterator[MlflowTracer]:
    os.environ.setdefault("MLFLOW_ENABLE_ASYNC_TRACE_LOGGING", "false")
    created = create_tracer(obs_config)
    assert isinstance(created, MlflowTracer)
    yield created
    created.close()


@pytest.fixture
def lms() -> SwitchableLms:
    """Scripted models for the runtime Turns of a test (swap ``lms.root`` / ``lms.sub``)."""
    return SwitchableLms()


@pytest.fixture
async def traced_runtime(
    obs_config: EffectiveConfig, lms: SwitchableLms
) -> AsyncIterator[FleetRuntime]:
    """A runtime on ``obs_config`` with its default tracer (the local MLflow store)."""
    runtime = await FleetRuntime.open(obs_config, lm_provider=lms)
    yield runtime
    await runtime.close()
