"""Shared fixtures: a Fleet state directory and a runtime on SQLite and on PostgreSQL.

PostgreSQL tests use a fresh database per test run (dropped afterwards) on
``FLEET_TEST_POSTGRES_URL`` (default: the local server, user postgres). When the server is
unreachable they are skipped, unless ``FLEET_REQUIRE_POSTGRES=1`` (set by CI) makes that a failure.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from fleet_core.api import FleetRuntime
from fleet_core.config import EffectiveConfig, load_config
from fleet_core.engine.scripted_lm import SwitchableLms

ADMIN_URL = os.environ.get(
    "FLEET_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--live", action="store_true", help="run the tests marked live (real external services)"
    )


def live_secret(config: pytest.Config, variable: str, service: str) -> str:
    """The secret a live test of ``service`` needs from ``variable``; skips the test unless live
    tests are opted into (``--live`` or ``FLEET_LIVE_TESTS=1``) and the variable is set."""
    enabled = config.getoption("--live") or os.environ.get("FLEET_LIVE_TESTS") == "1"
    secret = os.environ.get(variable)
    if not (enabled and secret):
        pytest.skip(f"live {service} test: set {variable} and FLEET_LIVE_TESTS=1")
    return secret


def _admin_connect() -> psycopg.Connection:
    return psycopg.connect(ADMIN_URL, autocommit=True, connect_timeout=5)


@pytest.fixture(scope="session")
def postgres_database() -> Iterator[str]:
    """A database created for this test run and dropped at its end; yields its base URL."""
    try:
        admin = _admin_connect()
    except psycopg.OperationalError as exc:
        if os.environ.get("FLEET_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"PostgreSQL is required but unreachable at {ADMIN_URL}: {exc}")
        pytest.skip(f"PostgreSQL unreachable at {ADMIN_URL}")
    name = f"fleet_test_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    with admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    info = psycopg.conninfo.conninfo_to_dict(ADMIN_URL)
    url = (
        f"postgresql+psycopg://{info.get('user', 'postgres')}@{info.get('host', '127.0.0.1')}:"
        f"{info.get('port', 5432)}/{name}"
    )
    yield url
    with _admin_connect() as admin:
        admin.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def _reset_schema(url: str) -> None:
    with psycopg.connect(url.replace("+psycopg", ""), autocommit=True) as conn:
        conn.execute("DROP SCHEMA public CASCADE")
        conn.execute("CREATE SCHEMA public")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def fleet_environ(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    """Environment for one test: a private state dir and, for postgres, an emptied database."""
    environ = {"FLEET_STATE_DIR": str(tmp_path / "state")}
    if request.param == "postgres":
        url = request.getfixturevalue("postgres_database")
        _reset_schema(url)
        environ["FLEET_DATABASE_URL"] = url
    return environ


@pytest.fixture
def fleet_config(fleet_environ: dict[str, str], tmp_path: Path) -> EffectiveConfig:
    return load_config(environ=fleet_environ, cwd=tmp_path)


@pytest.fixture
async def runtime(fleet_config: EffectiveConfig) -> AsyncIterator[FleetRuntime]:
    opened = await FleetRuntime.open(fleet_config)
    yield opened
    await opened.close()


@pytest.fixture
async def scripted(
    fleet_config: EffectiveConfig,
) -> AsyncIterator[tuple[FleetRuntime, SwitchableLms]]:
    """A runtime and its swappable scripted models; traces stay queued (export deferred)."""
    lms = SwitchableLms()
    opened = await FleetRuntime.open(fleet_config, lm_provider=lms, trace_export="deferred")
    yield opened, lms
    await opened.close()
