"""Migrations are idempotent and safe when several processes start at once."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from sqlalchemy import inspect

from fleet_core.config import EffectiveConfig
from fleet_core.store import Store
from fleet_core.store.database import database_url


def _open_and_close(url: str, state_dir: str) -> str:
    store = Store.open(url, Path(state_dir))
    tables = sorted(inspect(store.engine).get_table_names())
    store.close()
    return ",".join(tables)


def _url(config: EffectiveConfig) -> str:
    secret = config.secrets.database_url
    return database_url(secret.get_secret_value() if secret else None, config.state_dir)


def test_two_processes_migrate_a_fresh_database_at_once(fleet_config: EffectiveConfig) -> None:
    url = _url(fleet_config)
    context = multiprocessing.get_context("spawn")
    with context.Pool(2) as pool:
        results = pool.starmap(_open_and_close, [(url, str(fleet_config.state_dir))] * 2)
    assert results[0] == results[1]
    assert "fleet_sessions" in results[0] and "fleet_alembic_version" in results[0]


def test_migrating_twice_is_a_no_op(fleet_config: EffectiveConfig) -> None:
    url = _url(fleet_config)
    first = _open_and_close(url, str(fleet_config.state_dir))
    assert _open_and_close(url, str(fleet_config.state_dir)) == first


def test_sqlite_runs_in_wal_mode_with_foreign_keys(tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 'fleet.db'}", tmp_path)
    try:
        with store.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    finally:
        store.close()
