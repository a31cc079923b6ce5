"""Migrations are idempotent and safe when several processes start at once."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
from pathlib import Path

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

from fleet_core.config import EffectiveConfig
from fleet_core.store import Store
from fleet_core.store.database import MIGRATIONS, database_url
from fleet_core.store.schema import metadata


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


# Revision 0001 creates its tables from fleet_core.store.schema as it stood at 0.1.0, so the
# tables it names must not change unless 0001 is first frozen (its tables copied in as they are at
# this digest): fresh databases would skip the change. Every later revision writes its tables out.
# The whole schema's digest is pinned at the newest revision: a schema change without a new
# revision trips it.
# fleet_sessions is frozen in 0001 (0004 changed it), so it is no longer pinned here.
SCHEMA_AT_0001 = "0eaf76b365357acbaa862195a4435141c169053f81fc0e747b11cfb07e7fbd12"
TABLES_OF_0001 = (
    "fleet_turns",
    "fleet_memories",
    "fleet_artifacts",
    "fleet_replay_snapshots",
    "fleet_trace_labels",
    "fleet_optimization_candidates",
)
SCHEMA_AT_HEAD = ("0005_workspace_content.py", "SCHEMA_AT_0005")
SCHEMA_AT_0002 = "2cbda172c4c48167518e1658e964038c4c3b8d4b49ba41a86fb581165912a75e"
SCHEMA_AT_0003 = "9f0d55123fdfc8860b3100dfa9dc5992a1556a350194ad7008f99b5d8afcd303"
SCHEMA_AT_0004 = "45648a59ea4547724e42dd2c2890a7ebea49e27c9600638c9b42d9ae6d95580c"
SCHEMA_AT_0005 = "c7e5983e7d180ca7380aa117893f57af1da5a56398e0434d1b61d7f4cc689595"


def schema_digest(tables: tuple[str, ...] | None = None) -> str:
    shape = {
        table.name: sorted(
            (column.name, str(column.type), column.nullable, column.primary_key)
            for column in table.columns
        )
        for table in metadata.sorted_tables
        if tables is None or table.name in tables
    }
    return hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()


def test_the_tables_revision_0001_builds_from_schema_py_are_unchanged() -> None:
    assert schema_digest(TABLES_OF_0001) == SCHEMA_AT_0001, (
        "a table that revision 0001 builds from schema.py changed: freeze revision 0001 (copy "
        "its tables in as they were) and add an Alembic revision for the change"
    )


def test_schema_changes_come_with_a_migration() -> None:
    revisions = sorted(p.name for p in (MIGRATIONS / "versions").glob("0*.py"))
    newest, pinned = SCHEMA_AT_HEAD
    assert revisions[-1] == newest, f"a new revision {revisions[-1]}: pin its schema digest here"
    assert schema_digest() == globals()[pinned], (
        "fleet_core/store/schema.py changed without a new Alembic revision"
    )


def test_the_migrated_database_matches_the_schema(fleet_config: EffectiveConfig) -> None:
    store = Store.open(_url(fleet_config), fleet_config.state_dir)
    try:
        with store.engine.connect() as conn:
            context = MigrationContext.configure(
                conn, opts={"version_table": "fleet_alembic_version"}
            )
            differences = compare_metadata(context, metadata)
    finally:
        store.close()
    assert differences == []
