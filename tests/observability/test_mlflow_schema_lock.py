"""MLflow's own schema migrations on a fresh shared PostgreSQL database are serialized: two
servers that start at once on an empty ``fleet_mlflow`` schema both open the in-database trace
store, and MLflow's tables are created once (issue 21). Real PostgreSQL, real MLflow store; two
processes, as two servers would be."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from fleet_core.observability.destination import MLFLOW_SCHEMA

pytestmark = pytest.mark.postgres

ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"

# One "server": resolve the shared destination and create the runtime experiment, starting at
# the same wall-clock instant as its twin.
OPEN = """
import sys, time
from pathlib import Path
from fleet_core.config import load_config
from fleet_core.observability.destination import resolve_destination
from fleet_core.observability.mlflow_backend import MlflowBackend
url, state, start = sys.argv[1], sys.argv[2], float(sys.argv[3])
config = load_config(environ={"FLEET_STATE_DIR": state, "FLEET_DATABASE_URL": url}, cwd=Path(state))
destination = resolve_destination(config, environ={})
assert destination.shared, destination.describe()
import mlflow  # imported before the start line, so both processes race the schema itself
time.sleep(max(0.0, start - time.time()))
print(MlflowBackend(destination).experiment_id("runtime"))
"""


@pytest.fixture
def fresh_database() -> Iterator[str]:
    """An empty database with only the (empty) schema MLflow's tables go in."""
    try:
        admin = psycopg.connect(ADMIN, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        pytest.skip(f"PostgreSQL unreachable: {exc}")
    name = f"fleet_mlflow_lock_{uuid.uuid4().hex[:8]}"
    with admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    with psycopg.connect(f"postgresql://postgres@127.0.0.1:5432/{name}", autocommit=True) as c:
        c.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(MLFLOW_SCHEMA)))
    yield f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
    with psycopg.connect(ADMIN, autocommit=True) as admin:
        drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
        admin.execute(drop.format(sql.Identifier(name)))


def test_two_servers_opening_a_fresh_shared_store_at_once_both_succeed(
    fresh_database: str, tmp_path: Path
) -> None:
    start = time.time() + 12.0  # both processes have imported mlflow by then
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", OPEN, fresh_database, str(tmp_path / name), str(start)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("a", "b")
    ]
    results = [proc.communicate(timeout=240) for proc in procs]
    for proc, (_out, err) in zip(procs, results, strict=True):
        assert proc.returncode == 0, err[-3000:]
    ids = {out.strip().splitlines()[-1] for out, _ in results}
    assert len(ids) == 1  # one experiment, seen by both
    with psycopg.connect(fresh_database.replace("+psycopg", ""), autocommit=True) as conn:
        tables = {
            row[0]
            for row in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
                (MLFLOW_SCHEMA,),
            )
        }
        head = conn.execute(
            sql.SQL("SELECT version_num FROM {}.alembic_version").format(
                sql.Identifier(MLFLOW_SCHEMA)
            )
        ).fetchall()
        public = conn.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'"
        ).fetchone()
    assert {"experiments", "runs", "trace_info", "assessments"} <= tables
    from mlflow.store.db.utils import _get_latest_schema_revision

    assert head == [(_get_latest_schema_revision(),)]  # migrated to MLflow's head, once
    assert public == (0,)  # nothing landed outside the schema
