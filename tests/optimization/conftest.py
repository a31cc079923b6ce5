"""Optimization fixtures: a runtime with scripted serving, judge and reflection models and a
curated dataset of replay-captured, labelled Turns (real sandbox, real SQLite store)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from fleet_core.api import FleetRuntime
from fleet_core.config import load_config
from fleet_core.engine.lm import StaticLmProvider
from fleet_core.optimization.scripted_examples import MARK, add_examples, scripted_models

__all__ = ["MARK", "Models", "add_examples", "build_optimization_state", "make_models"]


@dataclass
class Models:
    root: object
    judge: object
    reflection: object

    def provider(self) -> StaticLmProvider:
        return StaticLmProvider(self.root, judge=self.judge, reflection=self.reflection)


def make_models() -> Models:
    return Models(*scripted_models())


@pytest.fixture
def models() -> Models:
    return make_models()


#: The same three models as a ``FLEET_TEST_SCRIPT`` (fleet_core.api.scripted) for a server or CLI
#: process: rules match in order, so the improved instruction's mark wins over the default.
SCRIPT: dict[str, object] = {
    "root": {"rules": {MARK: {"submit": "str(6 * 7)"}, "": {"submit": "'unknown'"}}},
    "judge": {
        "rules": {
            "[[ ## answer ## ]]\n42\n": {"verdict": True, "critique": "Checked."},
            "": {"verdict": False, "critique": "The answer is not 42."},
        }
    },
    "reflection": {
        "rules": {
            "new_instruction": {
                "fields": {"new_instruction": f"{MARK}. Compute the value with Python."}
            }
        }
    },
}


@pytest.fixture
async def opt_runtime(tmp_path: Path, models: Models) -> AsyncIterator[FleetRuntime]:
    env = {"FLEET_STATE_DIR": str(tmp_path / "state"), "FLEET_MLFLOW_DESTINATION": "off"}
    runtime = await FleetRuntime.open(
        load_config(environ=env, cwd=tmp_path), lm_provider=models.provider()
    )
    yield runtime
    await runtime.close()


async def build_optimization_state(
    cwd: Path,
    groups: dict[str, int] | None = None,
    *,
    sessions: tuple[str, ...] = ("research-1",),
) -> dict[str, str]:
    """A state directory holding a curated dataset (default: 9 examples in 3 groups, ``crit``
    critical) and empty rlm Sessions to optimize, built in this process with the scripted
    models; returns the environment a server or CLI process needs to use it (MLflow off)."""
    env = {"FLEET_STATE_DIR": str(cwd / "state"), "FLEET_MLFLOW_DESTINATION": "off"}
    runtime = await FleetRuntime.open(
        load_config(environ=env, cwd=cwd), lm_provider=make_models().provider()
    )
    try:
        await add_examples(
            runtime, groups or {"alpha": 3, "beta": 3, "crit": 3}, critical=("crit",)
        )
        for session_id in sessions:
            await runtime.new_session(session_id, mode="rlm")
    finally:
        await runtime.close()
    return env
