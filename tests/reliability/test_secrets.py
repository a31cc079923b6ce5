"""Secrets (issue 13): canaries in the server's environment, in ``.env``, as the model API key
and in a workspace file name; real scripted Turns (code that dumps its environment, a model that
echoes the secrets, a provider error carrying the key) and refused attaches; then every log
record, result, event, error, artifact, store row (decoded: the ``fleet_trace_exports`` queue
holds gzip'd trace records) and every byte under the state directory is scanned: zero hits.

tests/observability/test_redaction.py covers the MLflow store and replays with the same
approach; this suite adds the environment and ``.env`` canaries, what the sandbox can reach,
the export queue, artifacts and attach errors, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import gzip
import logging
import os
from pathlib import Path
from typing import Any

import pytest

from fleet_core.api import FleetRuntime
from fleet_core.config import load_config
from fleet_core.engine.scripted_lm import SwitchableLms, action, scripted_lm, submit
from fleet_core.errors import FleetError
from fleet_core.events import TurnEvent
from fleet_core.models import TurnRequest

ENV_CANARY = "canary-ENV-4c7be01f93"  # an unrelated secret in the server's environment
DOTENV_CANARY = "canary-DOTENV-a81d3e6c55"  # a secret read from .env
KEY_CANARY = "canary-APIKEY-2f9e7d41b0"  # the model endpoint's key (environment)
CANARIES = (ENV_CANARY, DOTENV_CANARY, KEY_CANARY)

DUMP = """
import os
dump = repr(dict(os.environ))
for source in ('/proc/self/environ', '/proc/1/environ', {dotenv!r}, '/proc/1/cmdline'):
    try:
        dump += open(source, 'rb').read().decode('latin-1')
    except Exception as exc:
        dump += type(exc).__name__
open('artifacts/env.txt', 'w').write(dump)
names = os.listdir('files')
print(dump[:4000], names)
"""


def hits(text: str | bytes) -> list[str]:
    data = text.encode() if isinstance(text, str) else text
    return [c for c in CANARIES if c.encode() in data]


def _decoded(value: Any) -> bytes:
    """A store value as bytes; gzip'd blobs (trace records, replays) decompressed."""
    if isinstance(value, memoryview):
        value = value.tobytes()
    if isinstance(value, bytes):
        try:
            return value + gzip.decompress(value)
        except (OSError, EOFError):
            return value
    return repr(value).encode()


def _store_hits(runtime: FleetRuntime) -> tuple[dict[str, int], list[str]]:
    from sqlalchemy import select

    from fleet_core.store import schema

    rows: dict[str, int] = {}
    found: list[str] = []
    with runtime.store.engine.connect() as conn:
        for table in schema.metadata.sorted_tables:
            for row in conn.execute(select(table)).mappings():
                rows[table.name] = rows.get(table.name, 0) + 1
                for column, value in row.items():
                    found += [f"{table.name}.{column}: {c}" for c in hits(_decoded(value))]
    return rows, found


def _file_hits(state: Path) -> list[str]:
    """Every byte of every file under the state dir (the SQLite database and its WAL, the
    workspaces and their artifacts, staging, child workspaces), gzip'd blobs unpacked."""
    found = []
    for path in state.rglob("*"):
        if path.is_file() and not path.is_symlink():
            found += [f"{path}: {c}" for c in hits(_decoded(path.read_bytes()))]
    return found


@pytest.fixture
def secret_env(
    fleet_environ: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> dict[str, str]:
    """The canaries where a server finds secrets: its environment and ``.env``."""
    monkeypatch.setenv("PAYMENTS_SERVICE_TOKEN", ENV_CANARY)
    monkeypatch.setenv("FLEET_LM_API_KEY", KEY_CANARY)
    (tmp_path / ".env").write_text(f"FLEET_DAYTONA_API_KEY={DOTENV_CANARY}\n")
    return {**os.environ, **fleet_environ}


async def test_no_canary_reaches_logs_results_events_store_artifacts_or_errors(
    secret_env: dict[str, str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = load_config(environ=secret_env, cwd=tmp_path)
    assert {DOTENV_CANARY, KEY_CANARY} <= set(config.secrets.values())
    caplog.set_level(logging.DEBUG)
    lms = SwitchableLms()
    runtime = await FleetRuntime.open(config, lm_provider=lms, trace_export="deferred")
    events: list[TurnEvent] = []
    texts: list[str] = []  # results and error messages, as a client would receive them
    try:
        sid = (await runtime.new_session(mode="rlm")).session_id
        await runtime.write_file(sid, f"files/{DOTENV_CANARY}.csv", b"a,b\n1,2\n")
        # 1. code that dumps what the sandbox can see; a model echoing the secrets it was told
        lms.root = scripted_lm(
            [
                action(DUMP.format(dotenv=str(tmp_path / ".env"))),
                action(f"print('key {KEY_CANARY} dotenv {DOTENV_CANARY}')"),
                action(f"raise ValueError('api_key={KEY_CANARY} {DOTENV_CANARY}')"),
                submit(f"'done: {KEY_CANARY} {DOTENV_CANARY} ' + str(names)"),
            ]
        )
        done = await runtime.run_turn(
            TurnRequest(session_id=sid, task="dump the environment"), on_event=events.append
        )
        assert done.status == "completed", done.error
        assert [a.path for a in done.artifacts] == ["artifacts/env.txt"]
        texts.append(done.model_dump_json())

        # 2. a provider error carrying the key
        def rejected(text: str) -> str:
            raise RuntimeError(f"provider rejected api_key {KEY_CANARY} ({DOTENV_CANARY})")

        lms.root = scripted_lm([rejected])
        failed = await runtime.run_turn(
            TurnRequest(session_id=sid, task="fail"), on_event=events.append
        )
        assert failed.status == "failed" and failed.error is not None
        texts.append(failed.model_dump_json())
        # 3. attaching the process environment and the .env file's directory is refused
        for source in (Path("/proc/self/environ"), Path(f"/proc/{os.getpid()}/environ")):
            with pytest.raises(FleetError) as refused:
                await runtime.attach(sid, source)
            texts.append(refused.value.message)
        # the artifact the code wrote holds its environment dump, without any canary
        artifact = await runtime.read_file(sid, "artifacts/env.txt")
        assert b"PATH" in artifact and hits(artifact) == []
        # every event, result and error message
        assert events and any(e.kind == "cell_output" for e in events)
        assert [
            (e.kind, hits(e.model_dump_json())) for e in events if hits(e.model_dump_json())
        ] == []
        assert [t for t in texts if hits(t)] == []
        # every store row, the trace export queue decoded
        rows, found = _store_hits(runtime)
        assert rows.get("fleet_trace_exports", 0) >= 2, rows  # both Turns' traces are queued
        assert rows.get("fleet_turns", 0) >= 2 and rows.get("fleet_artifacts", 0) >= 0
        # A file's name is part of the file, kept as it is wherever the file is: its workspace
        # directory (whose names _file_hits does not read either) and, with a shared blob store
        # (PostgreSQL), the Session's published entry, so another host can materialize it. That
        # entry is the one row the canary may stand in; every rendering of it is redacted above.
        shared_name = f"fleet_workspace_entries.path: {DOTENV_CANARY}"
        assert [hit for hit in found if hit != shared_name] == []
    finally:
        await runtime.close()
    # every file under the state dir: database, WAL, workspace, artifacts, staging; the host's
    # record of its materialized copy lists the Session's file names (the shared name above)
    content = config.state_dir / "workspaces" / ".content"
    assert [
        hit
        for hit in _file_hits(config.state_dir)
        if not (hit.startswith(f"{content}/") and hit.endswith(f".json: {DOTENV_CANARY}"))
    ] == []
    # every log record, the failure's traceback included
    assert any("Turn failed" in r.getMessage() for r in caplog.records)
    leaked = [
        r.name
        for r in caplog.records
        if hits(r.getMessage()) or hits(r.exc_text or "") or hits(r.stack_info or "")
    ]
    assert leaked == [] and hits(caplog.text) == []


async def test_a_secret_typed_into_the_task_is_not_stored(
    secret_env: dict[str, str], tmp_path: Path
) -> None:
    config = load_config(environ=secret_env, cwd=tmp_path)
    lms = SwitchableLms()
    runtime = await FleetRuntime.open(config, lm_provider=lms, trace_export="deferred")
    try:
        sid = (await runtime.new_session(mode="rlm")).session_id
        lms.root = scripted_lm([submit("'ok'")])
        done = await runtime.run_turn(TurnRequest(session_id=sid, task=f"use key {KEY_CANARY}"))
        assert done.status == "completed", done.error
        assert hits(done.model_dump_json()) == []
        assert _store_hits(runtime)[1] == []
    finally:
        await runtime.close()
