"""Database faults on PostgreSQL (issue 13): Session ownership survives connection loss.

A second server is another process (advisory locks are per connection, so only another process
is an honest second owner): ``_taker`` opens its own runtime on the same database and state
directory. Backends are ended with ``pg_terminate_backend``; a database outage is
``ALLOW_CONNECTIONS false`` plus terminating every backend. Figures of the long variants:
docs/reliability.md, "Database faults".
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from multiprocessing.connection import Connection as Pipe
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from fleet_core.api import FleetRuntime
from fleet_core.config import load_config
from fleet_core.engine.scripted_lm import SwitchableLms, action, scripted_lm, submit
from fleet_core.errors import (
    FleetError,
    IdempotencyConflict,
    SessionExists,
    SessionOwned,
    StoreError,
)
from fleet_core.models import TurnRequest
from fleet_core.store import Store, ownership
from fleet_core.store.ownership import advisory_key

pytestmark = pytest.mark.postgres
ADMIN_URL = os.environ.get(
    "FLEET_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
CHECK_SECONDS = 1.0  # the lease probe interval the owner under test uses
SLEEP_CELL = action("import time\nprint('sleeping', flush=True)\ntime.sleep(30)\nprint('woke')")


# --- helpers -------------------------------------------------------------------------------


@pytest.fixture
def pg_url(postgres_database: str) -> str:
    """The run's database, emptied (the same reset as the shared ``fleet_environ``)."""
    with psycopg.connect(_dsn(postgres_database), autocommit=True) as conn:
        conn.execute("DROP SCHEMA public CASCADE")
        conn.execute("CREATE SCHEMA public")
    return postgres_database


def _dsn(url: str) -> str:
    return url.replace("+psycopg", "")


def _env(url: str, tmp_path: Path, check: float = CHECK_SECONDS) -> dict[str, str]:
    return {
        "FLEET_STATE_DIR": str(tmp_path / "state"),  # shared: one workspace tree, two servers
        "FLEET_DATABASE_URL": url,
        "FLEET_MLFLOW_DESTINATION": "off",
        "FLEET_RUNTIME__HISTORY_TURNS": "0",  # a prompt names only its own task
        "FLEET_STORAGE__LEASE_CHECK_SECONDS": str(check),
    }


async def _open(env: dict[str, str], lms: Any = None) -> FleetRuntime:
    config = load_config(environ=env, cwd=Path(env["FLEET_STATE_DIR"]).parent)
    return await FleetRuntime.open(config, lm_provider=lms)


HARNESS = "fleet-test-harness"  # the fault injector spares the harness's own connections


def _query(url: str, statement: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(_dsn(url), autocommit=True, application_name=HARNESS) as conn:
        return conn.execute(statement, params).fetchall()


def _holders(url: str, session_id: str) -> list[int]:
    """The backends holding the Session's advisory lock (pg_locks): never more than one."""
    key = advisory_key(session_id) & 0xFFFF_FFFF_FFFF_FFFF
    rows = _query(
        url,
        "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted "
        "AND classid::bigint = %s AND objid::bigint = %s AND objsubid = 1",
        key >> 32,
        key & 0xFFFF_FFFF,
    )
    return [row[0] for row in rows]


def _terminate_all(url: str) -> int:
    """End every backend of the database but the harness's own (the one asking, and a
    worker's query that ends its lease backend: killing that was a test race, not a fault)."""
    name = url.rsplit("/", 1)[1]
    rows = _query(
        url,
        "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity "
        "WHERE datname = %s AND pid <> pg_backend_pid() AND application_name <> %s",
        name,
        HARNESS,
    )
    return len(rows)


def _backends(url: str) -> int:
    """The database's backends but the harness's own (the runtime's lease and pooled ones)."""
    name = url.rsplit("/", 1)[1]
    rows = _query(
        url,
        "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND application_name <> %s",
        name,
        HARNESS,
    )
    return int(rows[0][0])


@contextmanager
def _outage(url: str) -> Iterator[None]:
    """The database refuses every connection (a server restart that takes a while)."""
    name = sql.Identifier(url.rsplit("/", 1)[1])
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS false").format(name))
        try:
            admin.execute(
                "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE datname = %s",
                (url.rsplit("/", 1)[1],),
            )
            yield
        finally:
            admin.execute(sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS true").format(name))


def _turns(url: str, session_id: str) -> list[tuple[Any, ...]]:
    return _query(
        url,
        "SELECT seq, status, task, answer, error->>'kind', idempotency_key, turn_id "
        "FROM fleet_turns WHERE session_id = %s ORDER BY seq",
        session_id,
    )


async def _until(check: Callable[[], bool], timeout: float, what: str) -> float:
    started = time.monotonic()
    while not check():
        assert time.monotonic() - started < timeout, f"timed out waiting until {what}"
        await asyncio.sleep(0.02)
    return time.monotonic() - started


async def _wait_for_cell(events: list[Any], timeout: float = 60) -> None:
    await _until(
        lambda: any(e.kind == "code_cell" and "sleep" in e.payload.get("code", "") for e in events),
        timeout,
        "the cell started",
    )
    await asyncio.sleep(0.3)  # let the cell really enter time.sleep


# --- the second server (another process) ---------------------------------------------------


def _taker(env: dict[str, str], session_id: str, pipe: Pipe) -> None:
    asyncio.run(_take_over(env, session_id, pipe))


async def _take_over(env: dict[str, str], session_id: str, pipe: Pipe) -> None:
    """Open a runtime; on ``"kill"`` end the backend holding the Session's lock and take the
    Session at once (again, should the owner's monitor re-take it first), then change its
    mode and run a Turn; close on ``"close"``."""
    lms = SwitchableLms()
    runtime = await _open(env, lms)
    try:
        try:
            await runtime.load_session(session_id)  # refused: opens the lease connection
            pipe.send(("error", "the Session was free before the kill"))
            return
        except SessionOwned:
            pipe.send(("ready",))
        pipe.recv()
        killed = await _kill_and_take(runtime, env["FLEET_DATABASE_URL"], session_id)
        pipe.send(("owned", killed, time.monotonic()))
        await runtime.set_mode(session_id, "rlm")
        lms.root = scripted_lm([submit("'from B'")])
        result = await runtime.run_turn(TurnRequest(session_id=session_id, task="B's Turn"))
        pipe.send(("done", result.status, result.answer))
        pipe.recv()
    except Exception as exc:
        pipe.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        await runtime.close()


async def _kill_and_take(runtime: FleetRuntime, url: str, session_id: str) -> float:
    """The time of the kill after which this runtime took the Session."""
    for _ in range(20):
        for pid in await runtime._run(_holders, url, session_id):
            await runtime._run(_query, url, "SELECT pg_terminate_backend(%s, 5000)", pid)
        killed = time.monotonic()
        while time.monotonic() - killed < 0.5:
            try:
                await runtime.load_session(session_id)
                return killed
            except SessionOwned:
                await asyncio.sleep(0.005)
    raise AssertionError("never took the Session")


class Taker:
    def __init__(self, env: dict[str, str], session_id: str) -> None:
        context = multiprocessing.get_context("spawn")
        self.pipe, child = context.Pipe()
        self.process = context.Process(target=_taker, args=(env, session_id, child), daemon=True)
        self.process.start()

    async def recv(self, timeout: float = 60) -> tuple[Any, ...]:
        ready = await asyncio.to_thread(self.pipe.poll, timeout)
        assert ready, "the second server did not answer"
        message: tuple[Any, ...] = self.pipe.recv()
        assert message[0] != "error", message
        return message

    def close(self) -> None:
        with suppress(OSError):
            self.pipe.send("close")
        self.process.join(30)
        if self.process.is_alive():
            self.process.kill()


# --- (a) the owner's lock connection ends between requests ----------------------------------


async def test_a_lost_lease_is_detected_and_the_first_owner_never_commits_again(
    pg_url: str, tmp_path: Path
) -> None:
    env = _env(pg_url, tmp_path)
    first = await _open(env, SwitchableLms())
    await first.new_session("s", mode="hybrid")
    taker = Taker(env, "s")
    try:
        [lease_pid] = _holders(pg_url, "s")
        assert (await taker.recv())[0] == "ready"
        taker.pipe.send("kill")
        _, killed, _ = await taker.recv()
        await _until(lambda: not first.store.locks.owned("s"), 10, "the first owner noticed")
        detected = time.monotonic() - killed
        assert detected <= CHECK_SECONDS + 1.0, f"noticed after {detected:.2f} s"
        # one owner at a time: the second server's backend, never the first's
        holders = _holders(pg_url, "s")
        assert len(holders) == 1 and holders[0] != lease_pid
        # the first owner's next mutations: a clear "ownership lost", through every path
        with pytest.raises(SessionOwned, match="Ownership lost"):
            await first.set_mode("s", "flex")
        with pytest.raises(SessionOwned, match="Ownership lost"):
            await first.write_file("s", "files/a.txt", b"from A")
        with pytest.raises(SessionOwned, match="Ownership lost"):
            await first.run_turn(TurnRequest(session_id="s", task="A's Turn"))
        with pytest.raises(SessionOwned, match="Ownership lost"):
            await first._run(first.store.claim_turn, "s", "A's Turn", None)
        _, status, answer = await taker.recv()
        assert (status, answer) == ("completed", "from B")
        # only the second owner's writes are in the Session
        assert [(t[1], t[2]) for t in _turns(pg_url, "s")] == [("completed", "B's Turn")]
        assert (await first.describe_session("s")).mode == "rlm"
        # loading again is refused while the other process owns it ...
        with pytest.raises(SessionOwned, match="owned by another"):
            await first.load_session("s")
        taker.close()
        # ... and works once it is gone
        await first.load_session("s")
        await first.set_mode("s", "flex")
        assert _holders(pg_url, "s") != [] and len(_holders(pg_url, "s")) == 1
    finally:
        taker.close()
        await first.close()


async def test_in_the_window_before_detection_a_commit_is_still_fenced(
    pg_url: str, tmp_path: Path
) -> None:
    """The monitor has not run yet (a long interval): the lock is gone and another process owns
    the Session, but the first still believes it owns it. Its commits are refused anyway."""
    first = await _open(_env(pg_url, tmp_path, check=60))
    await first.new_session("w", mode="rlm")
    taker = Taker(_env(pg_url, tmp_path), "w")
    try:
        claim = await first._run(first.store.claim_turn, "w", "A's Turn", "key-a")
        assert len(_holders(pg_url, "w")) == 1
        assert (await taker.recv())[0] == "ready"
        taker.pipe.send("kill")
        await taker.recv()
        assert first.store.locks.owned("w")  # not noticed yet
        with pytest.raises(SessionOwned, match="Ownership lost"):
            await first.set_mode("w", "flex")
        from fleet_core.store import TurnOutcome

        outcome = TurnOutcome(status="completed", result={"status": "completed"}, answer="A")
        with pytest.raises(SessionOwned, match="Ownership lost"):
            await first._run(first.store.finish_turn, claim.turn_id, outcome)
        await taker.recv()  # B's Turn is committed
        rows = _turns(pg_url, "w")
        assert rows[0][1:5] == ("failed", "A's Turn", None, "interrupted")  # B failed the orphan
        assert rows[1][1:4] == ("completed", "B's Turn", "from B")
    finally:
        taker.close()
        await first.close()


# --- (b) connections end mid-Turn ------------------------------------------------------------


async def test_mid_turn_takeover_fails_the_turn_with_ownership_lost(
    pg_url: str, tmp_path: Path
) -> None:
    env = _env(pg_url, tmp_path)
    lms = SwitchableLms()
    first = await _open(env, lms)
    await first.new_session("m", mode="rlm")
    taker = Taker(env, "m")
    try:
        lms.root = scripted_lm([SLEEP_CELL, submit("'from A'")])
        events: list[Any] = []
        task = asyncio.create_task(
            first.run_turn(TurnRequest(session_id="m", task="A's Turn"), on_event=events.append)
        )
        await _wait_for_cell(events)
        assert (await taker.recv())[0] == "ready"
        assert len(_holders(pg_url, "m")) == 1
        taker.pipe.send("kill")
        _, killed, _ = await taker.recv()
        result = await asyncio.wait_for(task, 20)
        stopped = time.monotonic() - killed
        assert result.status == "failed" and result.error is not None
        assert result.error.kind == "SessionOwned" and "Ownership lost" in result.error.message
        assert stopped < CHECK_SECONDS + 5
        assert events[-1].kind == "turn_failed"
        _, status, answer = await taker.recv()
        assert (status, answer) == ("completed", "from B")
        rows = _turns(pg_url, "m")
        # A's Turn: failed by the new owner's takeover, never committed by A
        assert [(r[1], r[2], r[4]) for r in rows] == [
            ("failed", "A's Turn", "interrupted"),
            ("completed", "B's Turn", None),
        ]
    finally:
        taker.close()
        await first.close()


async def test_mid_turn_reconnect_re_takes_the_lease_and_the_turn_commits(
    pg_url: str, tmp_path: Path
) -> None:
    lms = SwitchableLms()
    first = await _open(_env(pg_url, tmp_path), lms)
    try:
        await first.new_session("r", mode="rlm")
        cell = action("import time\nprint('sleeping', flush=True)\ntime.sleep(3)\nprint('woke')")
        lms.root = scripted_lm([cell, submit("'kept'")])
        events: list[Any] = []
        task = asyncio.create_task(
            first.run_turn(TurnRequest(session_id="r", task="A's Turn"), on_event=events.append)
        )
        await _wait_for_cell(events)
        [lease_pid] = _holders(pg_url, "r")
        assert _terminate_all(pg_url) >= 1
        await _until(lambda: _holders(pg_url, "r") not in ([], [lease_pid]), 10, "re-taken")
        result = await asyncio.wait_for(task, 30)
        assert result.status == "completed" and result.answer == "kept"
        assert first.store.locks.owned("r")
        assert [(r[1], r[3]) for r in _turns(pg_url, "r")] == [("completed", "kept")]
    finally:
        await first.close()


# --- (c) every backend ends between requests ---------------------------------------------------


async def test_every_backend_terminated_between_requests(pg_url: str, tmp_path: Path) -> None:
    runtime = await _open(_env(pg_url, tmp_path))
    try:
        await runtime.new_session("c", mode="hybrid")
        for _ in range(20):  # several pooled: concurrent reads open them only if they overlap
            await asyncio.gather(*(runtime.list_sessions() for _ in range(6)))
            if _backends(pg_url) >= 3:
                break
        assert _terminate_all(pg_url) >= 3
        # reads succeed (pre-ping, retried reads), and so do mutations (the lease is re-taken)
        assert (await runtime.describe_session("c")).mode == "hybrid"
        assert [s.session_id for s in await runtime.list_sessions()] == ["c"]
        await runtime.new_session("c2", mode="hybrid")
        await runtime.set_mode("c", "rlm")
        assert len(_holders(pg_url, "c")) == 1 and len(_holders(pg_url, "c2")) == 1
    finally:
        await runtime.close()


async def test_a_database_outage_is_a_store_error_and_then_a_lost_lease(
    pg_url: str, tmp_path: Path
) -> None:
    runtime = await _open(_env(pg_url, tmp_path))
    try:
        await runtime.new_session("o", mode="hybrid")
        with _outage(pg_url):
            with pytest.raises(StoreError, match="database") as read:
                await runtime.describe_session("o")
            assert "not currently accepting connections" in read.value.message
            with pytest.raises(StoreError, match="database"):
                await runtime.new_session("o2")
            with pytest.raises(StoreError):
                await runtime.history("o")
            await _until(lambda: not runtime.store.locks.owned("o"), 10, "the lease was lost")
        assert (await runtime.describe_session("o")).mode == "hybrid"
        with pytest.raises(SessionOwned, match="Ownership lost"):
            await runtime.set_mode("o", "rlm")
        await runtime.load_session("o")
        await runtime.set_mode("o", "rlm")
    finally:
        await runtime.close()


def test_a_lease_backend_that_dies_between_lock_and_epoch_leaves_no_broken_connection(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lock is taken, then the backend dies before the epoch is bumped: that take fails
    with a StoreError, and the next take works on a fresh connection (it once raised a raw
    PendingRollbackError from the invalidated lease connection)."""
    store = Store.open(pg_url, tmp_path / "state", lease_check_seconds=3600)
    locks = store.locks
    real_try_lock = ownership._try_lock

    def lock_then_die(conn: Any, session_id: str) -> bool:
        got = real_try_lock(conn, session_id)
        if session_id == "dies":
            pid = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()
            _query(pg_url, "SELECT pg_terminate_backend(%s, 5000)", pid)
        return got

    try:
        locks.acquire("held")
        monkeypatch.setattr(ownership, "_try_lock", lock_then_die)
        with pytest.raises(StoreError, match="database"):
            locks.acquire("dies")
        locks.acquire("next")  # a fresh lease connection, and "held" re-taken on it
        assert locks.owned("held") and locks.owned("next") and not locks.owned("dies")
        assert len(_holders(pg_url, "held")) == 1 and len(_holders(pg_url, "next")) == 1
        locks.release("next")
        assert _holders(pg_url, "next") == []
    finally:
        store.close()


# --- (d) two servers, one database, Turns on different Sessions ---------------------------------


def _worker(env: dict[str, str], name: str, sessions: int, turns: int, pipe: Pipe) -> None:
    asyncio.run(_work(env, name, sessions, turns, pipe))


def _task(name: str, session: int, turn: int) -> str:
    return f"TASK-{name}-{session:02d}-{turn:03d}|"


async def _work(env: dict[str, str], name: str, sessions: int, turns: int, pipe: Pipe) -> None:
    """Run every Turn of this server's Sessions to completion through faults: a failed
    request is sent again with the same idempotency key; a key whose Turn failed gets a new
    one. Report what completed, and how often the model ran."""
    tasks = [_task(name, s, t) for s in range(sessions) for t in range(turns)]
    lms = SwitchableLms()
    lms.root = scripted_lm(rules={task: submit(repr(task)) for task in tasks})
    report: dict[str, Any] = {"completed": {}, "replays": 0, "faults": [], "raw": []}
    try:
        runtime: FleetRuntime = await _retry(lambda: _open(env, lms), report)
    except Exception as exc:
        report["raw"].append(f"{type(exc).__name__}: {exc}")
        pipe.send(report)
        return
    try:
        for s in range(sessions):
            await _retry(lambda s=s: _create(runtime, f"{name}-{s}"), report)
        for t in range(turns):
            for s in range(sessions):
                await _one_turn(runtime, f"{name}-{s}", _task(name, s, t), report)
            if t == turns // 2:  # between requests: end this server's lease backend, then
                await _reopen_sessions(runtime, env, name, sessions, report)  # close + load
        report["model_runs"] = len(lms.root.engine_script.requests)
    except Exception as exc:
        report["raw"].append(f"{type(exc).__name__}: {exc}")
    finally:
        await runtime.close()
    pipe.send(report)


async def _reopen_sessions(
    runtime: FleetRuntime, env: dict[str, str], name: str, sessions: int, report: dict[str, Any]
) -> None:
    url = env["FLEET_DATABASE_URL"]
    for pid in {p for s in range(sessions) for p in _holders(url, f"{name}-{s}")}:
        _query(url, "SELECT pg_terminate_backend(%s, 5000)", pid)
    for s in range(sessions):
        await _retry(lambda s=s: runtime.close_session(f"{name}-{s}"), report)
        await _retry(lambda s=s: runtime.load_session(f"{name}-{s}"), report)


async def _create(runtime: FleetRuntime, session_id: str) -> None:
    try:
        await runtime.new_session(session_id, mode="rlm")
    except SessionExists:  # an earlier attempt committed before its connection broke
        await runtime.load_session(session_id)


async def _retry(call: Callable[[], Any], report: dict[str, Any]) -> Any:
    for _ in range(50):
        try:
            return await call()
        except (StoreError, SessionOwned) as exc:
            report["faults"].append(exc.kind)
            await asyncio.sleep(0.2)
    raise AssertionError("no progress after 50 attempts")


async def _one_turn(runtime: FleetRuntime, sid: str, task: str, report: dict[str, Any]) -> None:
    attempt = 0
    for _ in range(200):
        key = f"{task}#{attempt}"
        try:
            first = await runtime.run_turn(
                TurnRequest(session_id=sid, task=task, idempotency_key=key)
            )
            if first.status != "completed":
                report["faults"].append(first.error.kind if first.error else first.status)
                attempt += 1
                continue
            again = await runtime.run_turn(
                TurnRequest(session_id=sid, task=task, idempotency_key=key)
            )
            assert again.replayed and again.turn_id == first.turn_id, "a retry ran again"
            report["replays"] += 1
            report["completed"][task] = (first.turn_id, first.answer)
            return
        except IdempotencyConflict:
            attempt += 1  # that key's Turn failed: a new key runs it again
        except SessionOwned as exc:
            report["faults"].append(exc.kind)
            await _retry(lambda: runtime.load_session(sid), report)
        except (StoreError, FleetError) as exc:
            report["faults"].append(exc.kind)
            await asyncio.sleep(0.1)
    raise AssertionError(f"{task} never completed")


def _run_two_servers(
    url: str, tmp_path: Path, sessions: int, turns: int, kill_every: float | None
) -> tuple[list[dict[str, Any]], int]:
    env = _env(url, tmp_path, check=0.5)
    context = multiprocessing.get_context("spawn")
    pipes, processes = [], []
    for name in ("A", "B"):
        parent, child = context.Pipe()
        process = context.Process(target=_worker, args=(env, name, sessions, turns, child))
        process.start()
        pipes.append(parent)
        processes.append(process)
    stop, kills = threading.Event(), [0]

    def killer() -> None:
        while kill_every is not None and not stop.wait(kill_every):
            kills[0] += _terminate_all(url) > 0

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    try:
        reports = []
        for pipe in pipes:
            assert pipe.poll(600), "a server did not finish"
            reports.append(pipe.recv())
    finally:
        stop.set()
        thread.join()
        for process in processes:
            process.join(30)
    return reports, kills[0]


def _check_two_servers(url: str, reports: list[dict[str, Any]], sessions: int, turns: int) -> None:
    for name, report in zip(("A", "B"), reports, strict=True):
        assert report["raw"] == [], report["raw"]  # never a raw database error
        assert len(report["completed"]) == sessions * turns
        rows = [r for s in range(sessions) for r in _turns(url, f"{name}-{s}")]
        completed = [r for r in rows if r[1] == "completed"]
        # no duplicated writes: every task completed once, every key used once
        assert sorted(r[2] for r in completed) == sorted(report["completed"])
        assert len({r[5] for r in rows}) == len(rows)
        # no lost writes: what the client saw completed is committed, as it saw it
        for task, (turn_id, answer) in report["completed"].items():
            assert (task, answer, turn_id) in {(r[2], r[3], r[6]) for r in completed}
        # an idempotent retry never ran the model again: one model run per Turn row at most
        assert report["model_runs"] <= len(rows)
        for s in range(sessions):
            seqs = [r[0] for r in _turns(url, f"{name}-{s}")]
            assert seqs == list(range(1, len(seqs) + 1))
            [(count,)] = _query(
                url, "SELECT turn_count FROM fleet_sessions WHERE session_id = %s", f"{name}-{s}"
            )
            assert count == turns


def test_two_servers_run_turns_on_one_database_through_terminated_backends(
    pg_url: str, tmp_path: Path
) -> None:
    reports, kills = _run_two_servers(pg_url, tmp_path, sessions=2, turns=4, kill_every=1.5)
    _check_two_servers(pg_url, reports, 2, 4)
    assert kills >= 1


@pytest.mark.long
def test_long_two_servers_under_repeated_backend_terminations(pg_url: str, tmp_path: Path) -> None:
    sessions, turns = 4, 50
    started = time.monotonic()
    reports, kills = _run_two_servers(pg_url, tmp_path, sessions, turns, kill_every=0.5)
    _check_two_servers(pg_url, reports, sessions, turns)
    faults = sorted(f for r in reports for f in r["faults"])
    print(
        f"\nDB-FAULTS: {2 * sessions * turns} Turns, {kills} terminations of every backend, "
        f"{sum(r['replays'] for r in reports)} idempotent retries replayed, faults seen: "
        f"{ {k: faults.count(k) for k in set(faults)} }, {time.monotonic() - started:.0f} s"
    )
