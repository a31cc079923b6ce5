"""Integration fixtures: a runtime on SQLite and PostgreSQL whose models are scripted LMs."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from fleet_core.api import FleetRuntime
from fleet_core.config import EffectiveConfig
from fleet_core.engine.testing import SwitchableLms


@pytest.fixture
async def scripted(
    fleet_config: EffectiveConfig,
) -> AsyncIterator[tuple[FleetRuntime, SwitchableLms]]:
    """A runtime and its swappable scripted models; traces stay queued (export deferred)."""
    lms = SwitchableLms()
    opened = await FleetRuntime.open(fleet_config, lm_provider=lms, trace_export="deferred")
    yield opened, lms
    await opened.close()
