"""Engine fixtures: a runtime whose models are scripted LMs (swappable per test)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from fleet_core.config import EffectiveConfig, load_config
from fleet_core.runtime import FleetRuntime


class SwitchableLms:
    """An ``LmProvider`` whose role LMs a test sets (``lms.root = scripted_lm([...])``)."""

    def __init__(self) -> None:
        self.root: Any = None
        self.sub: Any = None

    def check(self, *roles: str) -> None:
        return None

    def lm(self, role: str) -> Any:
        if role == "root":
            return self.root
        return self.sub if self.sub is not None else self.root


@pytest.fixture
def lms() -> SwitchableLms:
    return SwitchableLms()


@pytest.fixture
def engine_config(tmp_path: Path) -> EffectiveConfig:
    return load_config(environ={"FLEET_STATE_DIR": str(tmp_path / "state")}, cwd=tmp_path)


@pytest.fixture
async def engine_runtime(
    engine_config: EffectiveConfig, lms: SwitchableLms
) -> AsyncIterator[FleetRuntime]:
    runtime = await FleetRuntime.open(engine_config, lm_provider=lms)
    yield runtime
    await runtime.close()
