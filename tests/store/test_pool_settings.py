"""``storage.pool_size`` and ``storage.max_overflow`` size each process's database pool
(PostgreSQL): the engine gets them, a process cannot hold more than their sum, and bad values
are refused naming the key."""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

import pytest
from sqlalchemy.exc import TimeoutError as PoolTimeout

from fleet_core.api import FleetRuntime
from fleet_core.config import load_config
from fleet_core.errors import ConfigError


@pytest.mark.postgres
async def test_the_pool_settings_bound_a_process_s_connections(
    postgres_database: str, tmp_path: Path
) -> None:
    environ = {"FLEET_STATE_DIR": str(tmp_path / "state"), "FLEET_DATABASE_URL": postgres_database}
    config = load_config({"storage": {"pool_size": 2, "max_overflow": 1}}, environ=environ)
    runtime = await FleetRuntime.open(config)
    try:
        engine = runtime.store.engine
        pool = engine.pool
        assert pool.size() == 2  # type: ignore[attr-defined]
        with ExitStack() as held:
            for _ in range(3):  # 2 kept + 1 overflow
                held.enter_context(engine.connect())
            assert pool.checkedout() == 3  # type: ignore[attr-defined]
            pool._timeout = 0.2  # type: ignore[attr-defined]  # QueuePool's checkout wait
            with pytest.raises(PoolTimeout):
                engine.connect()  # no fourth
    finally:
        await runtime.close()


def test_default_and_bad_pool_settings(tmp_path: Path) -> None:
    config = load_config(environ={"FLEET_STATE_DIR": str(tmp_path)}, cwd=tmp_path)
    assert (config.settings.storage.pool_size, config.settings.storage.max_overflow) == (5, 10)
    with pytest.raises(ConfigError, match="pool_size"):
        load_config({"storage": {"pool_size": 0}}, environ={"FLEET_STATE_DIR": str(tmp_path)})
    with pytest.raises(ConfigError, match="max_overflow"):
        load_config({"storage": {"max_overflow": -1}}, environ={"FLEET_STATE_DIR": str(tmp_path)})
