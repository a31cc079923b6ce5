"""One process owns a Session at a time: a PostgreSQL advisory lock or a file lock for SQLite.

PostgreSQL ownership is a *lease*: the Session's advisory lock, held on one dedicated connection
per process, plus a fencing epoch in ``fleet_session_leases`` that every process taking the lock
bumps. A lock dies silently with its backend (``pg_terminate_backend``, a restart, a failover,
an idle proxy), so a monitor thread probes the lease connection every ``check_seconds``; when the
probe fails it re-takes each Session on a fresh connection, only if nobody took it meanwhile (the
lock is free *and* the epoch is still ours). Otherwise the Session is *lost*: its listeners are
told (the runtime stops the Session's running Turn) and mutations are refused with
``SessionOwned`` until the Session is loaded again.

Commits into a Session check its epoch under the lease row's lock (``Store``), and taking a lock
bumps the epoch under that same row lock. So an owner's commit either lands before the next
owner's first action or is refused; between the backend dying and the monitor noticing, the only
thing a former owner can still do is work that never reaches the database (its running cells,
stopped within one probe interval).
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from filelock import FileLock, Timeout
from sqlalchemy import Connection, Engine, select, text, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from fleet_core.errors import SessionOwned
from fleet_core.models import TurnError
from fleet_core.store import schema
from fleet_core.store.database import db_reason, store_errors

log = logging.getLogger(__name__)
DEFAULT_CHECK_SECONDS = 2.0
INTERRUPTED = TurnError(
    kind="interrupted", message="The process running this Turn stopped before it finished"
)

INTERRUPTED_PATHS_KEPT = 50  # the paths an interrupted Turn's error lists
INTERRUPTED_PATHS_SHOWN = 3  # the paths its message names


def interrupted_error(paths: list[str], restored: list[str] | None = None) -> TurnError:
    """The error of a Turn whose process stopped after it changed files in place: ``paths``
    may be incomplete, ``restored`` were put back to their committed bytes (both sorted)."""
    restored = restored or []
    if not paths and not restored:
        return INTERRUPTED
    message = INTERRUPTED.message
    if restored:
        message += f"; files it was changing were restored to their last commit: {_named(restored)}"
    if paths:
        message += f"; files it was changing may be incomplete: {_named(paths)}"
    return INTERRUPTED.model_copy(
        update={
            "message": message,
            "paths": paths[:INTERRUPTED_PATHS_KEPT] or None,
            "restored": restored[:INTERRUPTED_PATHS_KEPT] or None,
        }
    )


def _named(paths: list[str]) -> str:
    """The first ``INTERRUPTED_PATHS_SHOWN`` paths and how many more."""
    named = ", ".join(paths[:INTERRUPTED_PATHS_SHOWN])
    more = len(paths) - INTERRUPTED_PATHS_SHOWN
    return f"{named} and {more} more" if more > 0 else named


def failed_values(error: TurnError, stamp: datetime) -> dict[str, object]:
    """The columns of a Turn failed with ``error`` where nothing else is known of it (its
    process is gone)."""
    stored = error.model_dump(exclude_none=True)
    return {
        "status": "failed",
        "error": stored,
        "result": {"status": "failed", "error": stored},
        "updated_at": stamp,
    }


#: Told ``(session_id, message)`` when this process loses a Session (from the monitor thread).
LostListener = Callable[[str, str], None]


class SessionLocks(Protocol):
    def acquire(self, session_id: str, *, reload: bool = False) -> None:
        """Own the Session or raise ``SessionOwned``; re-acquiring an owned Session is a no-op.
        A Session this process lost is refused until it is loaded again (``reload=True``)."""

    def release(self, session_id: str) -> None: ...

    def owned(self, session_id: str) -> bool: ...

    def held(self) -> int:
        """How many Sessions this process owns now."""

    def lease(self, session_id: str) -> int | None:
        """The epoch a commit into the Session must find (``None``: nothing to check);
        ``SessionOwned`` when this process lost the Session."""

    def on_lost(self, listener: LostListener) -> None: ...

    def close(self) -> None: ...


def _owned_message(session_id: str) -> str:
    return (
        f"Session '{session_id}' is owned by another fleet-lsp process; close it there or use "
        "another session"
    )


def lost_message(session_id: str, why: str) -> str:
    return (
        f"Ownership lost: this process no longer owns Session '{session_id}' ({why}); its "
        "running Turn was stopped and nothing more is written to it here. Load the Session "
        "again to continue"
    )


def ownership_lost(session_id: str, why: str) -> SessionOwned:
    return SessionOwned(
        lost_message(session_id, why), session_id=session_id, reason="ownership lost"
    )


class FileSessionLocks:
    """Session ownership through ``flock`` files beside the SQLite database (never lost while
    the process lives, so there is nothing to monitor or fence)."""

    def __init__(self, lock_dir: Path) -> None:
        self._dir = lock_dir
        self._held: dict[str, FileLock] = {}
        self._mutex = threading.Lock()

    def acquire(self, session_id: str, *, reload: bool = False) -> None:
        with self._mutex:
            if session_id in self._held:
                return
            self._dir.mkdir(parents=True, exist_ok=True)
            lock = FileLock(self._dir / f"session-{session_id}.lock", thread_local=False)
            try:
                lock.acquire(timeout=0)
            except Timeout:
                raise SessionOwned(_owned_message(session_id), session_id=session_id) from None
            self._held[session_id] = lock

    def release(self, session_id: str) -> None:
        with self._mutex:
            lock = self._held.pop(session_id, None)
        if lock is not None:
            lock.release(force=True)

    def owned(self, session_id: str) -> bool:
        return session_id in self._held

    def held(self) -> int:
        return len(self._held)

    def lease(self, session_id: str) -> int | None:
        return None

    def on_lost(self, listener: LostListener) -> None:
        return None  # a file lock is held until this process releases it or exits

    def close(self) -> None:
        for session_id in list(self._held):
            self.release(session_id)


def advisory_key(session_id: str) -> int:
    """A stable signed 64-bit key for the Session's advisory lock."""
    digest = hashlib.sha256(f"fleet-session:{session_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def _try_lock(conn: Connection, session_id: str) -> bool:
    got = conn.execute(text("SELECT pg_try_advisory_lock(:key)"), {"key": advisory_key(session_id)})
    return bool(got.scalar_one())


def _unlock(conn: Connection, session_id: str) -> None:
    conn.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": advisory_key(session_id)})


Lost = list[tuple[str, str]]


class AdvisorySessionLocks:
    """Session leases: advisory locks on one dedicated connection, fencing epochs, a monitor."""

    def __init__(self, engine: Engine, *, check_seconds: float = DEFAULT_CHECK_SECONDS) -> None:
        self._engine = engine
        self._check_seconds = check_seconds
        self._connection: Connection | None = None
        self._epochs: dict[str, int] = {}  # held Sessions and the epoch this process took
        self._lost: dict[str, str] = {}  # lost Sessions and why, until loaded again
        self._listeners: list[LostListener] = []
        self._mutex = threading.Lock()  # guards all of the above; never held while notifying
        self._stop = threading.Event()
        self._monitor: threading.Thread | None = None

    # --- the lease connection ----------------------------------------------------------------

    def _conn(self) -> Connection:
        if self._connection is None or self._connection.closed:
            self._connection = self._engine.connect()
            self._connection.execution_options(isolation_level="AUTOCOMMIT")
        return self._connection

    def _drop_connection(self) -> None:
        conn, self._connection = self._connection, None
        if conn is None:
            return
        try:
            conn.invalidate()  # never return a broken connection to the pool
            conn.close()
        except SQLAlchemyError:
            log.debug("closing the broken lease connection failed", exc_info=True)

    def _bump(self, conn: Connection, session_id: str) -> int:
        """A fresh take: the next epoch, under the lease row's lock, so a former owner's commit
        in flight lands first or not at all."""
        leases = schema.session_leases
        stamp = datetime.now(UTC)
        upsert = pg_insert(leases).values(session_id=session_id, epoch=1, updated_at=stamp)
        upsert = upsert.on_conflict_do_update(
            index_elements=[leases.c.session_id],
            set_={"epoch": leases.c.epoch + 1, "updated_at": stamp},
        )
        epoch = conn.execute(upsert.returning(leases.c.epoch)).scalar_one()
        self._fail_orphans(conn, session_id, stamp)
        return int(epoch)

    @staticmethod
    def _fail_orphans(conn: Connection, session_id: str, stamp: datetime) -> None:
        """A fresh take: Turns still marked running belong to an owner that is gone (their
        commits are refused by the new epoch): fail them as interrupted (invariant 5)."""
        turns = schema.turns
        conn.execute(
            update(turns)
            .where(turns.c.session_id == session_id, turns.c.status == "running")
            .values(failed_values(INTERRUPTED, stamp))
        )

    # --- ownership ---------------------------------------------------------------------------

    def acquire(self, session_id: str, *, reload: bool = False) -> None:
        lost: Lost = []
        try:
            with self._mutex, store_errors("take the Session's lease"):
                self._acquire_locked(session_id, reload, lost)
        finally:
            self._notify(lost)
        self._start_monitor()

    def _acquire_locked(self, session_id: str, reload: bool, lost: Lost) -> None:
        if reload:
            self._lost.pop(session_id, None)
        elif session_id in self._lost:
            raise SessionOwned(self._lost[session_id], session_id=session_id)
        if session_id in self._epochs:
            return
        try:
            got = _try_lock(self._conn(), session_id)
        except SQLAlchemyError:  # the lease connection died: re-take what it held, try again
            lost.extend(self._recover())
            got = _try_lock(self._conn(), session_id)
        if not got:
            raise SessionOwned(_owned_message(session_id), session_id=session_id)
        conn = self._conn()
        try:
            self._epochs[session_id] = self._bump(conn, session_id)
        except BaseException:
            self._unlock_quietly(conn, session_id)
            if conn.invalidated:  # it died with this take: a fresh one, and the rest re-taken
                lost.extend(self._recover())
            raise

    def release(self, session_id: str) -> None:
        lost: Lost = []
        with self._mutex:
            self._lost.pop(session_id, None)
            if self._epochs.pop(session_id, None) is not None:
                try:
                    _unlock(self._conn(), session_id)
                except SQLAlchemyError:  # its connection died, and the lock with it
                    lost = self._recover()
        self._notify(lost)

    def owned(self, session_id: str) -> bool:
        return session_id in self._epochs

    def held(self) -> int:
        return len(self._epochs)

    def lease(self, session_id: str) -> int | None:
        with self._mutex:
            if session_id in self._lost:
                raise SessionOwned(self._lost[session_id], session_id=session_id)
            return self._epochs.get(session_id)

    def on_lost(self, listener: LostListener) -> None:
        with self._mutex:
            self._listeners.append(listener)

    def close(self) -> None:
        self._stop.set()
        monitor = self._monitor
        if monitor is not None and monitor is not threading.current_thread():
            monitor.join(timeout=self._check_seconds + 5)
        with self._mutex:
            self._epochs.clear()
            if self._connection is not None:
                try:
                    self._connection.close()  # closing the session ends every advisory lock
                except SQLAlchemyError:
                    log.debug("closing the lease connection failed", exc_info=True)
                self._connection = None

    # --- the monitor -------------------------------------------------------------------------

    def _start_monitor(self) -> None:
        with self._mutex:
            if self._monitor is not None or self._stop.is_set():
                return
            self._monitor = threading.Thread(
                target=self._watch, name="fleet-lease-monitor", daemon=True
            )
            self._monitor.start()

    def _watch(self) -> None:
        while not self._stop.wait(self._check_seconds):
            try:
                self.check()
            except Exception:  # the monitor must outlive any one failure
                log.exception("the Session lease check failed")

    def check(self) -> list[str]:
        """Probe the lease connection; when it is gone, re-take or give up every held Session.
        Returns the Sessions lost by this check."""
        lost: Lost = []
        with self._mutex:
            if not self._epochs or self._stop.is_set():
                return []
            conn = self._connection
            try:
                if conn is None or conn.closed:
                    raise ConnectionError("the lease connection is closed")
                conn.execute(text("SELECT 1"))
            except (SQLAlchemyError, ConnectionError) as exc:
                log.warning("the Session lease connection failed (%s); re-taking", _why(exc))
                lost = self._recover()
        self._notify(lost)
        return [session_id for session_id, _ in lost]

    def _recover(self) -> Lost:
        """With the mutex held: a fresh connection, and every held Session re-taken on it only
        if nobody took it meanwhile; the rest are lost."""
        self._drop_connection()
        lost: Lost = []
        try:
            conn: Connection | None = self._conn()
            why = ""
        except SQLAlchemyError as exc:
            conn, why = None, f"the database is unreachable: {_why(exc)}"
        for session_id, epoch in list(self._epochs.items()):
            problem = self._retake(conn, session_id, epoch) if conn is not None else why
            if problem:
                del self._epochs[session_id]
                message = lost_message(session_id, f"its database lease ended; {problem}")
                self._lost[session_id] = message
                lost.append((session_id, message))
        return lost

    def _retake(self, conn: Connection, session_id: str, epoch: int) -> str:
        """'' when the Session is ours again, else why not. Ours again means the lock was free
        and the epoch unchanged: nobody took the Session meanwhile (a taker bumps it), so the
        epoch stays, and this process's Turns in flight may still commit under it."""
        leases = schema.session_leases
        try:
            if not _try_lock(conn, session_id):
                return "another process holds it now"
            current = conn.execute(
                select(leases.c.epoch).where(leases.c.session_id == session_id)
            ).scalar_one_or_none()
        except SQLAlchemyError as exc:
            self._unlock_quietly(conn, session_id)
            return f"re-taking it failed: {_why(exc)}"
        if current != epoch:
            self._unlock_quietly(conn, session_id)
            return "another process owned it meanwhile"
        log.info("re-took the lease of Session %s on a fresh connection", session_id)
        return ""

    @staticmethod
    def _unlock_quietly(conn: Connection, session_id: str) -> None:
        try:
            _unlock(conn, session_id)
        except SQLAlchemyError:  # a broken connection holds no lock any more
            log.debug("unlocking Session %s failed", session_id, exc_info=True)

    def _notify(self, lost: Lost) -> None:
        if not lost:
            return
        with self._mutex:
            listeners = list(self._listeners)
        for session_id, message in lost:
            log.warning("%s", message)
            for listener in listeners:
                try:
                    listener(session_id, message)
                except Exception:
                    log.exception("a Session-lost listener failed")


def _why(exc: Any) -> str:
    return db_reason(exc) if isinstance(exc, DBAPIError) else str(exc).splitlines()[0]
