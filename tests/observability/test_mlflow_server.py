"""Traces in one place through a real ``mlflow server`` (PostgreSQL backend store), from two
fleet-lsp servers (two state directories, one PostgreSQL database): every trace arrives once, and
an MLflow stopped and restarted loses nothing, strands nothing, and never makes
``fleet/trace/get`` wait more than 2 s (issue 21)."""

from __future__ import annotations

import asyncio
import socket
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import pytest_asyncio
from psycopg import sql
from pytest_lsp import LanguageClient

from fleet_core.engine.scripted_lm import action, route, submit
from fleet_core.observability.destination import MlflowDestination
from fleet_core.observability.mlflow_backend import MlflowBackend
from tests.conftest import ADMIN_URL
from tests.lsp.conftest import SALES, call, close_client, start_client, write_script
from tests.lsp.test_turns import QUICK_CODE
from tests.lsp.test_turns import SCRIPT as TURNS_SCRIPT
from tests.observability.mlflow_server import MlflowServer

pytestmark = pytest.mark.postgres
ROUNDS = ("on-a", "on-b", "down-a", "down-b")
# one scripted conversation per Turn (a rule's replies are used up by the Turn that matches it)
SCRIPT = {
    "root": {
        "rules": {
            f"[{name}]": [action(QUICK_CODE), submit("totals.to_string(index=False)")]
            for name in ROUNDS
        }
    },
    "sub": {
        "rules": {
            **{f"[{name}]": route("rlm") for name in ROUNDS},
            # the child agents QUICK_CODE spawns
            **{k: v for k, v in TURNS_SCRIPT["sub"]["rules"].items() if k.startswith("REGION=")},
        }
    },
}


def _admin(statement: sql.Composable) -> None:
    with psycopg.connect(ADMIN_URL, autocommit=True, connect_timeout=5) as admin:
        admin.execute(statement)


@pytest.fixture(scope="module")
def mlflow_server(
    postgres_database: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[MlflowServer]:
    name = f"fleet_mlflow_{uuid.uuid4().hex[:8]}"
    _admin(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    base = postgres_database.rsplit("/", 1)[0]
    server = MlflowServer(f"{base}/{name}", tmp_path_factory.mktemp("mlflow"))
    try:
        server.start()
        yield server
    finally:
        server.stop()
        _admin(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture(scope="module")
def fleet_database(postgres_database: str) -> str:
    with psycopg.connect(postgres_database.replace("+psycopg", ""), autocommit=True) as conn:
        conn.execute("DROP SCHEMA public CASCADE")
        conn.execute("CREATE SCHEMA public")
    return postgres_database


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def servers(
    mlflow_server: MlflowServer, fleet_database: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[list[LanguageClient]]:
    clients = []
    script = write_script(tmp_path_factory.mktemp("script") / "script.json", SCRIPT)
    for host in ("host-a", "host-b"):
        env = {
            "FLEET_STATE_DIR": str(tmp_path_factory.mktemp(f"state-{host}")),
            "FLEET_DATABASE_URL": fleet_database,
            "FLEET_MLFLOW_DESTINATION": "server",
            "FLEET_MLFLOW_TRACKING_URI": mlflow_server.url,
            "FLEET_HOST_NAME": host,
            "FLEET_TEST_SCRIPT": str(script),
        }
        settings = {"mlflow": {"export_max_backoff_seconds": 2}}
        clients.append(await start_client("vscode", env, settings=settings))
    yield clients
    for client in clients:
        await close_client(client)


async def _turn(client: LanguageClient, session_id: str) -> str:
    await call(client, "fleet/session/new", {"sessionId": session_id})
    await call(client, "fleet/context/attach", {"sessionId": session_id, "uri": SALES.as_uri()})
    task = f"[{session_id}] Sum the revenue per region of files/sales.csv."
    result = await call(client, "fleet/turn/run", {"sessionId": session_id, "task": task})
    assert result["status"] == "completed", result
    return str(result["traceId"])


def _queued(database: str) -> list[tuple[str, int]]:
    with psycopg.connect(database.replace("+psycopg", "")) as conn:
        rows = conn.execute("SELECT trace_id, attempts FROM fleet_trace_exports").fetchall()
    return [(str(r[0]), int(r[1])) for r in rows]


def _wait_drained(database: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while _queued(database) and time.monotonic() < deadline:
        time.sleep(0.3)
    assert _queued(database) == [], "traces stranded in the export queue"


def _labels_on_server(server: MlflowServer, trace_id: str) -> dict[str, Any]:
    destination = MlflowDestination(
        "server", server.url, {"runtime": "fleet-lsp", "evaluation": "e", "optimization": "o"}
    )
    return MlflowBackend(destination).read_labels(trace_id) or {}


def _found(server: MlflowServer, trace_ids: list[str]) -> dict[str, int]:
    destination = MlflowDestination(
        "server", server.url, {"runtime": "fleet-lsp", "evaluation": "e", "optimization": "o"}
    )
    backend = MlflowBackend(destination)
    listed = backend.search_trace_ids("runtime", max_results=500)
    for trace_id in trace_ids:  # complete: the spans arrived too
        assert len(backend._get_trace(trace_id).data.spans) > 3
    return {trace_id: listed.count(trace_id) for trace_id in trace_ids}


async def _timed_get(client: LanguageClient, trace_id: str) -> tuple[float, dict[str, Any]]:
    started = time.monotonic()
    doc = await call(client, "fleet/trace/get", {"traceId": trace_id})
    return time.monotonic() - started, doc


# -- doctor against the same real services ---------------------------------------------------


def _doctor_mlflow(tmp_path: Path, uri: str) -> Any:
    from fleet_core.config import load_config
    from fleet_lsp.cli.doctor import check_mlflow

    environ = {
        "FLEET_STATE_DIR": str(tmp_path / "state"),
        "FLEET_MLFLOW_DESTINATION": "server",
        "FLEET_MLFLOW_TRACKING_URI": uri,
    }
    return check_mlflow(load_config(environ=environ, cwd=tmp_path))


def test_doctor_accepts_a_healthy_tracking_server_and_database_tracking_uris(
    mlflow_server: MlflowServer, tmp_path: Path
) -> None:
    served = _doctor_mlflow(tmp_path, mlflow_server.url)  # /health says plain "OK"
    assert served.status == "ok" and "API call accepted" in served.detail, served
    calls = mlflow_server.log_text()
    assert '"GET /health' in calls and '"POST /api/2.0/mlflow/experiments/search' in calls
    plain_postgres = mlflow_server.backend_uri.replace("postgresql+psycopg://", "postgresql://")
    database = _doctor_mlflow(tmp_path, plain_postgres)  # the server's own backend store
    assert database.status == "ok" and "tracking database" in database.detail, database
    sqlite_store = _doctor_mlflow(tmp_path, f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert sqlite_store.status == "ok", sqlite_store


def test_doctor_fails_a_dead_tracking_server_and_database_with_a_fix(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    down = _doctor_mlflow(tmp_path, f"http://127.0.0.1:{port}")
    assert down.status == "fail" and "/health" in down.detail and down.fix
    dead_db = _doctor_mlflow(tmp_path, f"postgresql://postgres:secret@127.0.0.1:{port}/nothing")
    assert dead_db.status == "fail" and dead_db.fix
    assert "secret" not in dead_db.detail  # the password is never shown


@pytest.mark.asyncio(loop_scope="module")
async def test_two_servers_traces_arrive_once_and_an_outage_loses_and_strands_nothing(
    servers: list[LanguageClient], mlflow_server: MlflowServer, fleet_database: str
) -> None:
    a, b = servers
    first = [await _turn(a, "on-a"), await _turn(b, "on-b")]
    _wait_drained(fleet_database, 60)
    assert _found(mlflow_server, first) == dict.fromkeys(first, 1)

    mlflow_server.stop()
    during = [await _turn(a, "down-a"), await _turn(b, "down-b")]
    for client, trace_id in zip((a, b, b, a), during + during, strict=True):
        elapsed, doc = await _timed_get(client, trace_id)
        assert elapsed < 2.0, f"fleet/trace/get waited {elapsed:.1f} s during the outage"
        assert doc["traceId"] == trace_id and "North" in doc["markdown"]  # from the queue
    started = time.monotonic()
    params = {"traceId": during[0], "status": "approved", "answer": "North"}
    labelled = await call(a, "fleet/trace/label", params)
    assert time.monotonic() - started < 5
    assert any("queued" in m for m in labelled["messages"]), labelled  # saved, MLflow later
    await asyncio.sleep(3)  # the exporters keep failing with backoff; nothing is given up
    queued = dict(_queued(fleet_database))
    assert set(queued) == {*during, f"labels:{during[0]}"}
    assert all(queued[trace_id] >= 1 for trace_id in during)

    mlflow_server.start()  # same port, same backend store
    _wait_drained(fleet_database, 45)
    assert _found(mlflow_server, first + during) == dict.fromkeys(first + during, 1)
    writes = mlflow_server.trace_writes()
    if writes:  # the access log is on: one write per trace, none repeated
        assert writes == len(first + during), f"{writes} trace writes for 4 traces"
    assert _labels_on_server(mlflow_server, during[0])["review_status"] == "approved"
    for client, trace_id in ((b, first[0]), (a, during[1])):  # any host reads any trace
        elapsed, doc = await _timed_get(client, trace_id)
        assert doc["traceId"] == trace_id and "North" in doc["markdown"]
