"""One process owns a Session at a time: a PostgreSQL advisory lock or a file lock for SQLite."""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path
from typing import Protocol

from filelock import FileLock, Timeout
from sqlalchemy import Connection, Engine, text

from fleet_core.errors import SessionOwned


class SessionLocks(Protocol):
    def acquire(self, session_id: str) -> None:
        """Own the Session or raise ``SessionOwned``; re-acquiring an owned Session is a no-op."""

    def release(self, session_id: str) -> None: ...

    def owned(self, session_id: str) -> bool: ...

    def close(self) -> None: ...


def _owned_message(session_id: str) -> str:
    return (
        f"Session '{session_id}' is owned by another fleet-lsp process; close it there or use "
        "another session"
    )


class FileSessionLocks:
    """Session ownership through ``flock`` files beside the SQLite database."""

    def __init__(self, lock_dir: Path) -> None:
        self._dir = lock_dir
        self._held: dict[str, FileLock] = {}
        self._mutex = threading.Lock()

    def acquire(self, session_id: str) -> None:
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

    def close(self) -> None:
        for session_id in list(self._held):
            self.release(session_id)


def advisory_key(session_id: str) -> int:
    """A stable signed 64-bit key for the Session's advisory lock."""
    digest = hashlib.sha256(f"fleet-session:{session_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class AdvisorySessionLocks:
    """Session ownership through advisory locks held on one dedicated PostgreSQL connection."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._connection: Connection | None = None
        self._held: set[str] = set()
        self._mutex = threading.Lock()

    def _conn(self) -> Connection:
        if self._connection is None or self._connection.closed:
            self._connection = self._engine.connect()
            self._connection.execution_options(isolation_level="AUTOCOMMIT")
        return self._connection

    def acquire(self, session_id: str) -> None:
        with self._mutex:
            if session_id in self._held:
                return
            got = self._conn().execute(
                text("SELECT pg_try_advisory_lock(:key)"), {"key": advisory_key(session_id)}
            )
            if not got.scalar_one():
                raise SessionOwned(_owned_message(session_id), session_id=session_id)
            self._held.add(session_id)

    def release(self, session_id: str) -> None:
        with self._mutex:
            if session_id not in self._held:
                return
            self._held.discard(session_id)
            self._conn().execute(
                text("SELECT pg_advisory_unlock(:key)"), {"key": advisory_key(session_id)}
            )

    def owned(self, session_id: str) -> bool:
        return session_id in self._held

    def close(self) -> None:
        with self._mutex:
            self._held.clear()
            if self._connection is not None:
                self._connection.close()  # closing the session ends every advisory lock
                self._connection = None
