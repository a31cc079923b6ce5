"""Issue 21's Must show: a Session continues on another host. Two real fleet-lsp servers (pygls
over stdio, started as processes), each with its own state directory as if on two hosts, share
one PostgreSQL database. The scripted model (``FLEET_TEST_SCRIPT``, the one stand-in) writes code
that really runs in each host's local sandbox.

A Session made on A, with an attached dataset and two Turns, is continued on B: B's Turn reads
A's files (the CSV was attached on A only) and answers the same; B's artifact is readable from
A. Then the reverse after A reloads the Session: A's Turn answers the same and its new artifact
is readable from B."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from fleet_core.engine.scripted_lm import action, submit
from tests.lsp.conftest import call, close_client

pytestmark = pytest.mark.postgres

SERVER = [sys.executable, "-m", "fleet_lsp", "serve"]
SESSION = "two-hosts"


def _code(host: str) -> str:
    """The Turn's cell: total the dataset (a file only A attached) and write two artifacts."""
    return (
        "rows = open('files/sales.csv').read().split()[1:]\n"
        "total = sum(float(r.split(',')[1]) for r in rows)\n"
        "open('artifacts/total.txt', 'w').write(f'{total:.2f}')\n"
        "import os\n"
        "n = len([p for p in os.listdir('artifacts') if p.startswith('turn-')])\n"
        f"open(f'artifacts/turn-{host}-{{n}}.txt', 'w').write('{host} read ' + str(len(rows)))\n"
        "print(total)"
    )


def _script(host: str) -> dict[str, Any]:
    turn = [action(_code(host)), submit("open('artifacts/total.txt').read()")]
    return {"root": {"replies": turn * 4}}


async def _server(tmp_path: Path, host: str, url: str) -> LanguageClient:
    state = tmp_path / host / "state"
    state.mkdir(parents=True)
    script = tmp_path / host / "script.json"
    script.write_text(json.dumps(_script(host)), encoding="utf-8")
    env = {
        **os.environ,
        "FLEET_STATE_DIR": str(state),
        "FLEET_DATABASE_URL": url,
        "FLEET_TEST_SCRIPT": str(script),
    }
    client = await ClientServerConfig(server_command=SERVER, server_env=env).start()
    assert isinstance(client, LanguageClient)
    await client.initialize_session(
        types.InitializeParams(
            capabilities=client_capabilities("neovim@v0.11.0"),
            root_uri=(tmp_path / host).as_uri(),
            initialization_options={"fleet": {"protocolVersion": 1, "client": "neovim"}},
        )
    )
    return client


@pytest.fixture
async def servers(
    postgres_database: str, tmp_path: Path
) -> AsyncIterator[tuple[LanguageClient, LanguageClient]]:
    with psycopg.connect(postgres_database.replace("+psycopg", ""), autocommit=True) as conn:
        conn.execute("DROP SCHEMA public CASCADE")
        conn.execute("CREATE SCHEMA public")
    a = await _server(tmp_path, "a", postgres_database)
    b = await _server(tmp_path, "b", postgres_database)
    yield a, b
    for client in (a, b):
        await close_client(client)


async def _turn(client: LanguageClient) -> dict[str, Any]:
    result = await call(client, "fleet/turn/run", {"sessionId": SESSION, "task": "total sales"})
    assert result["status"] == "completed", result.get("error")
    return dict(result)


async def _listing(client: LanguageClient) -> dict[str, list[tuple[str, str]]]:
    listed = await call(client, "fleet/workspace/list", {"sessionId": SESSION})
    return {
        root: sorted((f["path"], f["sha256"]) for f in listed[root])
        for root in ("files", "artifacts")
    }


async def _read(client: LanguageClient, path: str) -> str:
    uri = f"fleet:/sessions/{SESSION}/{path}"
    return str((await call(client, "fleet/artifact/read", {"uri": uri}))["text"])


async def test_a_session_made_on_one_host_continues_on_another_and_back(
    servers: tuple[LanguageClient, LanguageClient], tmp_path: Path
) -> None:
    a, b = servers
    sales = tmp_path / "sales.csv"
    sales.write_text("region,amount\nNorth,100.5\nSouth,50\nEast,20.25\n", encoding="utf-8")
    await call(a, "fleet/session/new", {"sessionId": SESSION, "mode": "rlm"})
    await call(a, "fleet/context/attach", {"sessionId": SESSION, "uri": sales.as_uri()})
    dataset = await call(
        a, "fleet/context/setDataset", {"sessionId": SESSION, "path": "files/sales.csv"}
    )
    first, second = await _turn(a), await _turn(a)
    assert first["answer"] == second["answer"] == "170.75"
    on_a = await _listing(a)
    assert ("artifacts/turn-a-1.txt" in dict(on_a["artifacts"])) and on_a["files"]
    await call(a, "fleet/session/close", {"sessionId": SESSION})
    sales.unlink()  # the attached source is gone: B can only have A's copy

    # B continues it: the same files, artifacts and dataset digest, and the same answer
    loaded = await call(b, "fleet/session/load", {"sessionId": SESSION})
    assert loaded["dataset"]["sha256"] == dataset["sha256"]
    assert await _listing(b) == on_a
    on_b = await _turn(b)
    assert on_b["answer"] == first["answer"]
    assert await _read(b, "artifacts/turn-b-2.txt") == "b read 3"
    assert await _read(a, "artifacts/turn-b-2.txt") == "b read 3"  # readable from A
    await call(b, "fleet/session/close", {"sessionId": SESSION})

    # and back: A reloads, its Turn answers the same, B reads A's new artifact
    await call(a, "fleet/session/load", {"sessionId": SESSION})
    assert await _listing(a) == await _listing(b)
    again = await _turn(a)
    assert again["answer"] == first["answer"]
    assert await _read(b, "artifacts/turn-a-3.txt") == "a read 3"
    history = await call(b, "fleet/session/history", {"sessionId": SESSION, "limit": 10})
    assert [t["answer"] for t in history["turns"]] == ["170.75"] * 4
