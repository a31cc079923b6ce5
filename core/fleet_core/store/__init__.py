"""Durable state: every SQL statement of the product lives in this package."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import re
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from pydantic import ValidationError
from sqlalchemy import (
    Column,
    Connection,
    Engine,
    RowMapping,
    and_,
    delete,
    func,
    insert,
    or_,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import DBAPIError, IntegrityError, InterfaceError, OperationalError
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential

from fleet_core.blobs.base import BlobMissing, BlobStore, ContentDelta, ContentEntry, verified
from fleet_core.errors import (
    IdempotencyConflict,
    InvalidInput,
    MemoryNotFound,
    SessionExists,
    SessionNotFound,
    StoreError,
    TurnNotFound,
)
from fleet_core.models import (
    HISTORY_ARTIFACT_PATHS,
    AnswerOutcome,
    DatasetContext,
    Memory,
    ProvenanceRecord,
    SessionInfo,
    TurnError,
    TurnStatus,
    TurnSummary,
)
from fleet_core.store import content, schema
from fleet_core.store.database import create_db_engine, db_reason, migrate
from fleet_core.store.ownership import (
    DEFAULT_CHECK_SECONDS,
    INTERRUPTED,
    AdvisorySessionLocks,
    FileSessionLocks,
    SessionLocks,
    failed_values,
    ownership_lost,
)

__all__ = ["INTERRUPTED", "Store", "TraceExport", "TurnClaim", "TurnOutcome"]
MEMORY_SUMMARY_CHARS = 20_000
MEMORY_CONTENT_CHARS = 4_000  # one memory's content; a longer learned note is cut to it
MEMORIES_PER_SESSION = 500  # beyond it, user adds are refused and learned notes not proposed
LEARNED_NOTE_KIND = "learned_note"
_MEMORY_KIND = re.compile(r"[a-z][a-z0-9_-]{0,31}")
READ_ATTEMPTS = 3  # an idempotent read is tried again after a dropped connection
P = ParamSpec("P")
R = TypeVar("R")


def _dropped(exc: BaseException) -> bool:
    """A connection that broke (server restart, terminated backend): worth a fresh one."""
    if not isinstance(exc, DBAPIError):
        return False
    return exc.connection_invalidated or isinstance(exc, OperationalError | InterfaceError)


def _store_error(exc: DBAPIError) -> StoreError:
    return StoreError(f"The database failed: {db_reason(exc)}")


def _read(method: Callable[P, R]) -> Callable[P, R]:
    """An idempotent read: tried again (with a fresh pooled connection) after a dropped one;
    a database error that remains leaves as ``StoreError``."""

    @functools.wraps(method)
    def guarded(*args: P.args, **kwargs: P.kwargs) -> R:
        retrying = Retrying(
            stop=stop_after_attempt(READ_ATTEMPTS),
            wait=wait_exponential(multiplier=0.1, max=1.0),
            retry=retry_if_exception(_dropped),
            reraise=True,
        )
        try:
            for attempt in retrying:
                with attempt:
                    return method(*args, **kwargs)
        except DBAPIError as exc:
            raise _store_error(exc) from None
        raise AssertionError("unreachable")  # pragma: no cover

    return guarded


def _write(method: Callable[P, R]) -> Callable[P, R]:
    """A write: never tried again (a commit may have landed); errors leave as ``StoreError``."""

    @functools.wraps(method)
    def guarded(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(*args, **kwargs)
        except DBAPIError as exc:
            raise _store_error(exc) from None

    return guarded


def now() -> datetime:
    return datetime.now(UTC)


def task_digest(task: str) -> str:
    return hashlib.sha256(task.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class TurnClaim:
    """A new Turn row, or the stored outcome of an earlier Turn with the same idempotency key."""

    turn_id: str
    seq: int
    replayed: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class TurnOutcome:
    """Everything a finished Turn writes, committed in one transaction."""

    status: TurnStatus
    result: dict[str, Any]
    answer: str | None = None
    route: str | None = None
    learned_note: str | None = None
    trace_id: str | None = None
    error: TurnError | None = None
    artifacts: Sequence[ProvenanceRecord] = ()
    replay: tuple[str, bytes] | None = None
    trace_export: TraceExport | None = None
    memories: Sequence[Memory] = ()  # proposed by the Turn's code (workspace.remember)
    content: ContentDelta | None = None  # the workspace files published with the outcome


@dataclass(frozen=True, slots=True)
class TraceExport:
    """A finished trace waiting for export: its encoded record and the experiment scope."""

    trace_id: str
    scope: str
    record: bytes
    session_id: str = ""
    turn_id: str = ""
    attempts: int = 0
    origin_host: str | None = None  # the host whose Turn queued it
    last_error: str | None = None
    next_attempt_at: datetime | None = None  # not retried before it (None: due now)
    created_at: datetime | None = None


class Store:
    """Synchronous repository over SQLite or PostgreSQL; callers run it off the event loop."""

    def __init__(self, engine: Engine, locks: SessionLocks, blobs: BlobStore | None = None) -> None:
        self.engine = engine
        self.locks = locks
        self.blobs = blobs  # None: workspaces stay on their host (docs/storage.md)
        self._turn_leases: dict[str, tuple[str, int]] = {}  # running Turn -> (Session, epoch)
        self._turn_mutex = threading.Lock()

    @classmethod
    def open(
        cls,
        url: str,
        state_dir: Path,
        *,
        lease_check_seconds: float = DEFAULT_CHECK_SECONDS,
        blobs: Callable[[Engine], BlobStore | None] | None = None,
        pool_size: int = 5,
        max_overflow: int = 10,
    ) -> Store:
        """Connect, migrate under a lock, and choose the ownership mechanism for the backend
        (PostgreSQL: leases probed every ``lease_check_seconds``); ``blobs`` makes the blob
        backend for the engine (None: workspace content is not shared)."""
        engine = create_db_engine(url, pool_size=pool_size, max_overflow=max_overflow)
        lock_dir = state_dir / "locks"
        try:
            migrate(engine, lock_dir)
        except DBAPIError as exc:
            engine.dispose()
            raise StoreError(f"Cannot open the database: {db_reason(exc)}") from None
        locks: SessionLocks
        if engine.dialect.name == "sqlite":
            locks = FileSessionLocks(lock_dir)
        else:
            locks = AdvisorySessionLocks(engine, check_seconds=lease_check_seconds)
        return cls(engine, locks, blobs(engine) if blobs is not None else None)

    @property
    def backend(self) -> str:
        return self.engine.dialect.name

    def close(self) -> None:
        self.locks.close()
        self.engine.dispose()

    def _fence(self, conn: Connection, session_id: str, epoch: int | None) -> None:
        """Inside a commit: the Session's lease must still carry ``epoch``. Locks the lease row
        until the commit, so a process taking the Session over waits for this commit or finds
        it refused (``ownership.AdvisorySessionLocks``)."""
        if epoch is None:
            return
        leases = schema.session_leases
        held = conn.execute(
            update(leases)
            .where(leases.c.session_id == session_id, leases.c.epoch == epoch)
            .values(epoch=leases.c.epoch)
        )
        if held.rowcount != 1:
            raise ownership_lost(session_id, "another process took it over")

    def _row_where(self, column: Column[Any], value: str) -> RowMapping | None:
        """The row of ``column``'s table whose ``column`` is ``value`` (the first, if several)."""
        with self.engine.connect() as conn:
            return conn.execute(select(column.table).where(column == value)).mappings().first()

    # Sessions -------------------------------------------------------------------------------

    @_write
    def create_session(
        self, session_id: str, mode: str, *, owner: tuple[str, str] | None = None
    ) -> SessionInfo:
        """A new Session; ``owner``: the (host name, OS user) of the process creating it."""
        stamp = now()
        host, user = owner if owner is not None else (None, None)
        try:
            with self.engine.begin() as conn:
                conn.execute(
                    insert(schema.sessions).values(
                        session_id=session_id,
                        created_at=stamp,
                        updated_at=stamp,
                        mode=mode,
                        selections={},
                        dataset=None,
                        memory_summary="",
                        turn_count=0,
                        owner_host=host,
                        owner_user=user,
                    )
                )
        except IntegrityError:
            raise SessionExists(f"Session '{session_id}' already exists") from None
        return self.get_session(session_id)

    @_read
    def get_session(self, session_id: str) -> SessionInfo:
        row = self._row_where(schema.sessions.c.session_id, session_id)
        if row is None:
            raise SessionNotFound(f"No session '{session_id}'", session_id=session_id)
        return _session_info(row)

    @_read
    def list_sessions(self, limit: int = 100) -> list[SessionInfo]:
        query = select(schema.sessions).order_by(schema.sessions.c.updated_at.desc()).limit(limit)
        with self.engine.connect() as conn:
            return [_session_info(row) for row in conn.execute(query).mappings()]

    @_write
    def record_owner(self, session_id: str, owner: tuple[str, str]) -> None:
        """The (host name, OS user) of the process that just took the Session (its
        ``updated_at`` is left alone: taking a Session does not reorder the list)."""
        host, user = owner
        table = schema.sessions
        with self.engine.begin() as conn:
            conn.execute(
                update(table)
                .where(
                    table.c.session_id == session_id,
                    or_(
                        table.c.owner_host.is_(None),
                        table.c.owner_host != host,
                        table.c.owner_user.is_(None),
                        table.c.owner_user != user,
                    ),
                )
                .values(owner_host=host, owner_user=user)
            )

    @_read
    def session_page(
        self,
        *,
        limit: int,
        after: tuple[datetime, str] | None = None,
        owner_host: str | None = None,
        owner_user: str | None = None,
        updated_since: datetime | None = None,
    ) -> tuple[list[SessionInfo], bool]:
        """Sessions newest first by ``(updated_at, session_id)``, at most ``limit`` of them after
        the key ``after`` (a keyset: no OFFSET, so a deep page costs what the first does), and
        whether more follow. The filters (owner host, owner user, updated at or after) combine
        with AND."""
        table = schema.sessions
        query = select(table).order_by(table.c.updated_at.desc(), table.c.session_id.desc())
        if owner_host is not None:
            query = query.where(table.c.owner_host == owner_host)
        if owner_user is not None:
            query = query.where(table.c.owner_user == owner_user)
        if updated_since is not None:
            query = query.where(table.c.updated_at >= updated_since)
        if after is not None:
            updated, session_id = after
            query = query.where(
                or_(
                    table.c.updated_at < updated,
                    and_(table.c.updated_at == updated, table.c.session_id < session_id),
                )
            )
        with self.engine.connect() as conn:
            rows = list(conn.execute(query.limit(limit + 1)).mappings())
        return [_session_info(row) for row in rows[:limit]], len(rows) > limit

    @_write
    def delete_session(self, session_id: str) -> None:
        epoch = self.locks.lease(session_id)
        with self.engine.begin() as conn:
            self._fence(conn, session_id, epoch)
            deleted = conn.execute(
                delete(schema.sessions).where(schema.sessions.c.session_id == session_id)
            )
        if deleted.rowcount == 0:
            raise SessionNotFound(f"No session '{session_id}'", session_id=session_id)

    @_write
    def update_session(
        self,
        session_id: str,
        *,
        mode: str | None = None,
        selections: dict[str, Any] | None = None,
    ) -> SessionInfo:
        values: dict[str, Any] = {"updated_at": now()}
        if mode is not None:
            values["mode"] = mode
        if selections is not None:
            values["selections"] = selections
        return self._update_session(session_id, values)

    @_write
    def set_dataset(self, session_id: str, dataset: DatasetContext | None) -> SessionInfo:
        """Select (or, with ``None``, clear) the Session's dataset context."""
        values = {
            "updated_at": now(),
            "dataset": dataset.model_dump(mode="json") if dataset else None,
        }
        return self._update_session(session_id, values)

    @_write
    def select_dataset(
        self, session_id: str, dataset: DatasetContext | None, delta: ContentDelta | None
    ) -> tuple[SessionInfo, int | None]:
        """``set_dataset`` and the publish of ``delta`` (the workspace's unpublished changes,
        the dataset's file among them) in one transaction; returns the content version too."""
        values = {
            "updated_at": now(),
            "dataset": dataset.model_dump(mode="json") if dataset else None,
        }
        return self._update_session_publishing(session_id, values, delta)

    def _update_session(self, session_id: str, values: dict[str, Any]) -> SessionInfo:
        return self._update_session_publishing(session_id, values, None)[0]

    def _update_session_publishing(
        self, session_id: str, values: dict[str, Any], delta: ContentDelta | None
    ) -> tuple[SessionInfo, int | None]:
        epoch = self.locks.lease(session_id)
        with self.engine.begin() as conn:
            self._fence(conn, session_id, epoch)
            changed = conn.execute(
                update(schema.sessions)
                .where(schema.sessions.c.session_id == session_id)
                .values(**values)
            )
            if changed.rowcount == 0:
                raise SessionNotFound(f"No session '{session_id}'", session_id=session_id)
            version = self._publish(conn, session_id, delta, values["updated_at"])
        return self.get_session(session_id), version

    # Workspace content (fleet_core.blobs; docs/storage.md) -----------------------------------

    @_read
    def content_head(self, session_id: str) -> int | None:
        """The Session's published content version (None: never published)."""
        with self.engine.connect() as conn:
            return content.head(conn, session_id)

    @_read
    def content_manifest(self, session_id: str) -> tuple[int | None, list[ContentEntry]]:
        """The Session's published version and files, read in one transaction."""
        with self.engine.begin() as conn:
            return content.head(conn, session_id), content.entries(conn, session_id)

    @_write
    def publish_content(self, session_id: str, delta: ContentDelta) -> int:
        """Publish ``delta`` alone (an attach, a write, a delete), under the Session's lease."""
        if self.blobs is None:
            raise StoreError("Workspace content is not shared with this configuration")
        epoch = self.locks.lease(session_id)
        with self.engine.begin() as conn:
            self._fence(conn, session_id, epoch)
            return content.apply_delta(conn, self.blobs, session_id, delta, now())

    def read_blob(self, entry: ContentEntry) -> Iterator[bytes]:
        """The bytes of a manifest entry, verified against its digest and size as they are
        read (``BlobMissing``, ``BlobCorrupt``: a clear ``StoreError``)."""
        if self.blobs is None:
            raise StoreError("Workspace content is not shared with this configuration")
        where = f"the {self.blobs.kind} blob store"
        try:
            with self.engine.connect() as conn:
                chunks = self.blobs.chunks(conn, entry.sha256)
                yield from verified(chunks, entry.sha256, entry.size_bytes, where)
        except BlobMissing as exc:
            raise BlobMissing(
                f"The content of '{entry.path}' (sha256 {entry.sha256[:12]}..., "
                f"{entry.size_bytes:,} bytes) is missing from {where}: {exc.message}",
                path=entry.path,
                sha256=entry.sha256,
            ) from None
        except DBAPIError as exc:
            raise _store_error(exc) from None

    @_write
    def collect_blobs(self, grace_seconds: float, *, limit: int = content.GC_BATCH) -> int:
        """Delete blobs no Session refers to and no commit touched within ``grace_seconds``,
        and objects of an ``s3`` or ``directory`` backend older than that which no index row
        names (left by rolled-back commits), at most ``limit`` of each per call; returns how
        many were deleted."""
        if self.blobs is None:
            return 0
        with self.engine.begin() as conn:
            cutoff = content.grace_cutoff(now(), grace_seconds)
            gone = content.collect_garbage(conn, self.blobs, older_than=cutoff, limit=limit)
            strays = content.sweep_strays(conn, self.blobs, older_than=cutoff, limit=limit)
        return len(gone) + len(strays)

    @_read
    def blob_counts(self) -> tuple[int, int]:
        """(blobs stored, their bytes)."""
        with self.engine.connect() as conn:
            return content.counts(conn)

    @_read
    def memory_summary(self, session_id: str) -> str:
        with self.engine.connect() as conn:
            summary = conn.execute(
                select(schema.sessions.c.memory_summary).where(
                    schema.sessions.c.session_id == session_id
                )
            ).scalar_one_or_none()
        if summary is None:
            raise SessionNotFound(f"No session '{session_id}'", session_id=session_id)
        return str(summary)

    # Turns ----------------------------------------------------------------------------------

    @_write
    def claim_turn(self, session_id: str, task: str, idempotency_key: str | None) -> TurnClaim:
        """Insert a running Turn, or return the stored outcome for a repeated idempotency key."""
        digest = task_digest(task)
        if idempotency_key is not None:
            prior = self._turn_by_key(session_id, idempotency_key)
            if prior is not None:
                return _replay_claim(prior, digest)
        turn_id = uuid.uuid4().hex
        stamp = now()
        epoch = self.locks.lease(session_id)
        try:
            with self.engine.begin() as conn:
                self._fence(conn, session_id, epoch)
                seq = self._next_seq(conn, session_id)
                conn.execute(
                    insert(schema.turns).values(
                        turn_id=turn_id,
                        session_id=session_id,
                        seq=seq,
                        idempotency_key=idempotency_key,
                        task=task,
                        task_sha256=digest,
                        status="running",
                        result={},
                        created_at=stamp,
                        updated_at=stamp,
                    )
                )
        except IntegrityError:
            prior = self._turn_by_key(session_id, idempotency_key) if idempotency_key else None
            if prior is None:
                raise
            return _replay_claim(prior, digest)
        if epoch is not None:
            with self._turn_mutex:
                self._turn_leases[turn_id] = (session_id, epoch)
        return TurnClaim(turn_id=turn_id, seq=seq)

    def _next_seq(self, conn: Connection, session_id: str) -> int:
        exists = conn.execute(
            select(schema.sessions.c.session_id).where(schema.sessions.c.session_id == session_id)
        ).first()
        if exists is None:
            raise SessionNotFound(f"No session '{session_id}'", session_id=session_id)
        current = conn.execute(
            select(func.max(schema.turns.c.seq)).where(schema.turns.c.session_id == session_id)
        ).scalar_one_or_none()
        return int(current or 0) + 1

    @_read
    def _turn_by_key(self, session_id: str, key: str) -> RowMapping | None:
        with self.engine.connect() as conn:
            return (
                conn.execute(
                    select(schema.turns).where(
                        schema.turns.c.session_id == session_id,
                        schema.turns.c.idempotency_key == key,
                    )
                )
                .mappings()
                .first()
            )

    @_write
    def finish_turn(self, turn_id: str, outcome: TurnOutcome) -> int | None:
        """Commit a Turn's outcome, provenance, learned note, replay and workspace content in
        one transaction, only under the lease the Turn was claimed with (``SessionOwned``
        "ownership lost" else). Returns the Session's content version when ``outcome.content``
        was published (None: nothing was, e.g. the outcome was committed already)."""
        stamp = now()
        with self._turn_mutex:
            leased = self._turn_leases.pop(turn_id, None)
        if leased is not None:
            self.locks.lease(leased[0])  # refused at once when this process lost the Session
        with self.engine.begin() as conn:
            if leased is not None:
                self._fence(conn, *leased)
            row = conn.execute(
                select(schema.turns.c.session_id, schema.turns.c.status).where(
                    schema.turns.c.turn_id == turn_id
                )
            ).first()
            if row is None:
                raise TurnNotFound(f"No turn '{turn_id}'")
            session_id, status = row
            if status == "completed":
                return None  # never overwrite a committed outcome
            conn.execute(
                update(schema.turns)
                .where(schema.turns.c.turn_id == turn_id)
                .values(
                    status=outcome.status,
                    result=outcome.result,
                    answer=outcome.answer,
                    route=outcome.route,
                    learned_note=outcome.learned_note,
                    trace_id=outcome.trace_id,
                    error=outcome.error.model_dump() if outcome.error else None,
                    updated_at=stamp,
                )
            )
            self._insert_artifacts(conn, session_id, turn_id, outcome.artifacts, stamp)
            if outcome.replay is not None:
                digest, content = outcome.replay
                conn.execute(
                    insert(schema.replay_snapshots).values(
                        turn_id=turn_id,
                        session_id=session_id,
                        sha256=digest,
                        content=content,
                        created_at=stamp,
                    )
                )
            if outcome.trace_export is not None:
                self._queue_trace(conn, session_id, turn_id, outcome.trace_export, stamp)
            self._touch_session(conn, session_id, outcome, stamp)
            if outcome.status == "completed" and outcome.learned_note:
                self._propose_learned_note(conn, session_id, turn_id, outcome.learned_note, stamp)
            self._propose_memories(conn, session_id, outcome.memories, stamp)
            return self._publish(conn, session_id, outcome.content, stamp)

    def _publish(
        self, conn: Connection, session_id: str, delta: ContentDelta | None, stamp: datetime
    ) -> int | None:
        if delta is None or self.blobs is None:
            return None
        return content.apply_delta(conn, self.blobs, session_id, delta, stamp)

    def _queue_trace(
        self, conn: Connection, session_id: str, turn_id: str, export: TraceExport, stamp: datetime
    ) -> None:
        conn.execute(
            insert(schema.trace_exports).values(
                trace_id=export.trace_id,
                session_id=session_id,
                turn_id=turn_id,
                scope=export.scope,
                record=export.record,
                attempts=0,
                created_at=stamp,
                updated_at=stamp,
                origin_host=export.origin_host,
                next_attempt_at=None,
            )
        )

    def _touch_session(
        self, conn: Connection, session_id: str, outcome: TurnOutcome, stamp: datetime
    ) -> None:
        values: dict[str, Any] = {"updated_at": stamp}
        if outcome.status == "completed":
            values["turn_count"] = schema.sessions.c.turn_count + 1
            if outcome.learned_note:
                current = conn.execute(
                    select(schema.sessions.c.memory_summary)
                    .where(schema.sessions.c.session_id == session_id)
                    .with_for_update()
                ).scalar_one()
                joined = f"{current}\n{outcome.learned_note}".strip()
                values["memory_summary"] = joined[-MEMORY_SUMMARY_CHARS:]
        conn.execute(
            update(schema.sessions)
            .where(schema.sessions.c.session_id == session_id)
            .values(**values)
        )

    def _insert_artifacts(
        self,
        conn: Connection,
        session_id: str,
        turn_id: str | None,
        records: Iterable[ProvenanceRecord],
        stamp: datetime,
    ) -> None:
        rows = [
            {
                "session_id": session_id,
                "turn_id": turn_id,
                "path": record.path,
                "root_path": record.root_path,
                "sha256": record.sha256,
                "size_bytes": record.size_bytes,
                "agent_id": record.agent_id,
                "source_sandbox": record.source_sandbox,
                "parent_chain": list(record.parent_chain),
                "created_at": stamp,
            }
            for record in records
        ]
        if rows:
            conn.execute(insert(schema.artifacts), rows)

    @_read
    def artifact_provenance(self, session_id: str) -> dict[str, list[ProvenanceRecord]]:
        """Every provenance record of the Session, grouped by workspace path, oldest first."""
        query = (
            select(schema.artifacts)
            .where(schema.artifacts.c.session_id == session_id)
            .order_by(schema.artifacts.c.artifact_id)
        )
        grouped: dict[str, list[ProvenanceRecord]] = {}
        with self.engine.connect() as conn:
            for row in conn.execute(query).mappings():
                record = ProvenanceRecord.model_validate(dict(row))
                grouped.setdefault(record.path, []).append(record)
        return grouped

    @_read
    def get_turn(self, turn_id: str) -> TurnSummary:
        row = self._row_where(schema.turns.c.turn_id, turn_id)
        if row is None:
            raise TurnNotFound(f"No turn '{turn_id}'")
        return _turn_summary(row)

    @_read
    def turn_session(self, turn_id: str) -> str:
        """The id of the Session a Turn belongs to (running or finished)."""
        return str(self._turn_column(schema.turns.c.session_id, turn_id))

    @_read
    def turn_result(self, turn_id: str) -> dict[str, Any]:
        return dict(self._turn_column(schema.turns.c.result, turn_id))

    def _turn_column(self, column: Column[Any], turn_id: str) -> Any:
        with self.engine.connect() as conn:
            found = conn.execute(
                select(column).where(schema.turns.c.turn_id == turn_id)
            ).scalar_one_or_none()
        if found is None:
            raise TurnNotFound(f"No turn '{turn_id}'")
        return found

    @_read
    def history(
        self, session_id: str, limit: int = 50, *, completed_only: bool = False
    ) -> list[TurnSummary]:
        """The newest ``limit`` Turns of a Session, oldest first."""
        query = select(schema.turns).where(schema.turns.c.session_id == session_id)
        if completed_only:
            query = query.where(schema.turns.c.status == "completed")
        query = query.order_by(schema.turns.c.seq.desc()).limit(limit)
        with self.engine.connect() as conn:
            rows = [_turn_summary(row) for row in conn.execute(query).mappings()]
        return rows[::-1]

    @_read
    def running_sessions(self) -> list[str]:
        query = select(schema.turns.c.session_id).where(schema.turns.c.status == "running")
        with self.engine.connect() as conn:
            return sorted({row[0] for row in conn.execute(query)})

    @_read
    def running_turns(self, session_id: str) -> dict[str, datetime]:
        """The Session's Turns still marked running, with when each began."""
        turns = schema.turns
        query = select(turns.c.turn_id, turns.c.created_at).where(
            turns.c.session_id == session_id, turns.c.status == "running"
        )
        with self.engine.connect() as conn:
            return {row[0]: _utc(row[1]) for row in conn.execute(query)}

    @_write
    def mark_interrupted(
        self, session_id: str, errors: Mapping[str, TurnError] | None = None
    ) -> int:
        """Fail every Turn of the Session still marked running (returns how many); the caller
        owns the Session. ``errors``: the error of a Turn read as running before the caller
        took the Session (whose take may have failed it as interrupted already), when it says
        more; a Turn that ended otherwise meanwhile is left alone."""
        turns = schema.turns
        failed = 0
        with self.engine.begin() as conn:
            for turn_id, error in (errors or {}).items():
                status = _interrupted_status(conn, session_id, turn_id)
                if status is not None:
                    failed += status == "running"
                    conn.execute(
                        update(turns)
                        .where(turns.c.turn_id == turn_id)
                        .values(failed_values(error, now()))
                    )
            changed = conn.execute(
                update(turns)
                .where(turns.c.session_id == session_id, turns.c.status == "running")
                .values(failed_values(INTERRUPTED, now()))
            )
        return failed + int(changed.rowcount)

    # Memories -------------------------------------------------------------------------------
    # A memory is proposed unreviewed (a Turn's learned note, the user); only a person's review
    # lets it reach the model. Rejecting one deletes it.

    def _memory_count(self, conn: Connection, session_id: str) -> int:
        return int(
            conn.execute(
                select(func.count())
                .select_from(schema.memories)
                .where(schema.memories.c.session_id == session_id)
            ).scalar_one()
        )

    def _insert_memory(
        self,
        conn: Connection,
        session_id: str,
        kind: str,
        content: str,
        sources: dict[str, Any],
        stamp: datetime,
    ) -> Memory:
        memory_id = uuid.uuid4().hex
        conn.execute(
            insert(schema.memories).values(
                memory_id=memory_id,
                session_id=session_id,
                kind=kind,
                content=content,
                sources=sources,
                reviewed=False,
                created_at=stamp,
                updated_at=stamp,
            )
        )
        return Memory(
            memory_id=memory_id, kind=kind, content=content, sources=sources, created_at=stamp
        )

    def _propose_learned_note(
        self, conn: Connection, session_id: str, turn_id: str, note: str, stamp: datetime
    ) -> None:
        """The Turn's learned note as an unreviewed memory, inside the Turn's commit."""
        content = note.strip()[:MEMORY_CONTENT_CHARS]
        if not content or self._memory_count(conn, session_id) >= MEMORIES_PER_SESSION:
            return  # the note still reaches the Session's memory summary
        self._insert_memory(
            conn, session_id, LEARNED_NOTE_KIND, content, {"turnId": turn_id}, stamp
        )

    def _propose_memories(
        self, conn: Connection, session_id: str, memories: Sequence[Memory], stamp: datetime
    ) -> None:
        """Memories the Turn's code proposed (checked when proposed), unreviewed, in the Turn's
        commit whatever its status; those beyond the Session's bound are dropped."""
        if not memories:
            return
        room = MEMORIES_PER_SESSION - self._memory_count(conn, session_id)
        for memory in memories[: max(room, 0)]:
            conn.execute(
                insert(schema.memories).values(
                    memory_id=memory.memory_id,
                    session_id=session_id,
                    kind=memory.kind,
                    content=memory.content[:MEMORY_CONTENT_CHARS],
                    sources=memory.sources,
                    reviewed=False,
                    created_at=memory.created_at,
                    updated_at=stamp,
                )
            )

    @_read
    def memory_count(self, session_id: str) -> int:
        """How many memories the Session holds, reviewed or not."""
        with self.engine.connect() as conn:
            return self._memory_count(conn, session_id)

    @_read
    def shared_learned_notes(self, session_id: str, *, limit: int) -> list[Memory]:
        """Reviewed learned notes of the *other* Sessions of this store, newest first, at most
        ``limit``: the shared learned notes (opt-in; docs/engine.md)."""
        query = (
            select(schema.memories)
            .where(
                schema.memories.c.session_id != session_id,
                schema.memories.c.kind == LEARNED_NOTE_KIND,
                schema.memories.c.reviewed.is_(True),
            )
            .order_by(schema.memories.c.created_at.desc())
            .limit(limit)
        )
        with self.engine.connect() as conn:
            return [Memory.model_validate(dict(row)) for row in conn.execute(query).mappings()]

    @_write
    def add_memory(
        self, session_id: str, kind: str, content: str, sources: dict[str, Any]
    ) -> Memory:
        """An unreviewed memory; ``InvalidInput`` when it is empty, too long or one too many."""
        if not _MEMORY_KIND.fullmatch(kind):
            raise InvalidInput(
                f"A memory's kind is 1-32 lower-case letters, digits, '_' or '-' (got {kind!r})"
            )
        content = content.strip()
        if not content:
            raise InvalidInput("A memory's content must not be empty")
        if len(content) > MEMORY_CONTENT_CHARS:
            raise InvalidInput(
                f"A memory holds at most {MEMORY_CONTENT_CHARS} characters (got {len(content)})"
            )
        stamp = now()
        epoch = self.locks.lease(session_id)
        with self.engine.begin() as conn:
            self._fence(conn, session_id, epoch)
            if self._memory_count(conn, session_id) >= MEMORIES_PER_SESSION:
                raise InvalidInput(
                    f"Session '{session_id}' already holds {MEMORIES_PER_SESSION} memories "
                    "(the limit): reject some first"
                )
            return self._insert_memory(conn, session_id, kind, content, sources, stamp)

    @_write
    def delete_memory(self, session_id: str, memory_id: str) -> None:
        """Reject a memory: it is deleted and never reaches the model."""
        epoch = self.locks.lease(session_id)
        with self.engine.begin() as conn:
            self._fence(conn, session_id, epoch)
            changed = conn.execute(
                delete(schema.memories).where(
                    schema.memories.c.session_id == session_id,
                    schema.memories.c.memory_id == memory_id,
                )
            )
        if changed.rowcount == 0:
            raise MemoryNotFound(f"No memory '{memory_id}' in session '{session_id}'")

    @_read
    def memories(self, session_id: str, *, reviewed: bool | None = None) -> list[Memory]:
        query = select(schema.memories).where(schema.memories.c.session_id == session_id)
        if reviewed is not None:
            query = query.where(schema.memories.c.reviewed == reviewed)
        query = query.order_by(schema.memories.c.created_at)
        with self.engine.connect() as conn:
            return [Memory.model_validate(dict(row)) for row in conn.execute(query).mappings()]

    @_write
    def review_memory(self, session_id: str, memory_id: str, reviewed: bool) -> None:
        epoch = self.locks.lease(session_id)
        with self.engine.begin() as conn:
            self._fence(conn, session_id, epoch)
            changed = conn.execute(
                update(schema.memories)
                .where(
                    schema.memories.c.session_id == session_id,
                    schema.memories.c.memory_id == memory_id,
                )
                .values(reviewed=reviewed, updated_at=now())
            )
        if changed.rowcount == 0:
            raise MemoryNotFound(f"No memory '{memory_id}' in session '{session_id}'")

    # Replays and trace labels (observability / evaluation) ----------------------------------

    @_read
    def get_replay(self, turn_id: str) -> tuple[str, bytes] | None:
        """The Turn's stored replay snapshot as ``(sha256, gzip bytes)``, or ``None``.

        Callers verify it with ``fleet_core.observability.replay.decode_replay``."""
        with self.engine.connect() as conn:
            row = conn.execute(
                select(schema.replay_snapshots.c.sha256, schema.replay_snapshots.c.content).where(
                    schema.replay_snapshots.c.turn_id == turn_id
                )
            ).first()
        if row is None:
            return None
        return str(row[0]), bytes(row[1])

    @_read
    def find_turn_by_trace(self, trace_id: str) -> TurnSummary | None:
        row = self._row_where(schema.turns.c.trace_id, trace_id)
        return _turn_summary(row) if row is not None else None

    @_write
    def upsert_trace_labels(
        self,
        trace_id: str,
        *,
        session_id: str | None,
        turn_id: str | None,
        labels: dict[str, Any],
        eligible: bool,
        ineligible_reason: str | None,
    ) -> None:
        """Insert or replace the review labels of one trace."""
        values = _label_row(session_id, turn_id, labels, eligible, ineligible_reason, now())
        with self.engine.begin() as conn:
            self._upsert_labels(conn, trace_id, values)

    def _upsert_labels(self, conn: Connection, trace_id: str, values: dict[str, Any]) -> None:
        table = schema.trace_labels
        dialect_insert = pg_insert if self.backend == "postgresql" else sqlite_insert
        upsert = dialect_insert(table).values(trace_id=trace_id, **values)
        # One statement: two reviewers labelling at once both land (the later wins); an
        # insert that lost the race used to abort PostgreSQL's transaction before its update.
        upsert = upsert.on_conflict_do_update(index_elements=[table.c.trace_id], set_=values)
        conn.execute(upsert)

    @_write
    def queue_trace_labels(
        self,
        trace_id: str,
        *,
        queue_id: str,
        session_id: str | None,
        turn_id: str | None,
        labels: dict[str, Any],
        eligible: bool,
        ineligible_reason: str | None,
        payload: bytes,
    ) -> None:
        """Labels saved while MLflow is unreachable: the label row and its export (queue row
        ``queue_id``, scope ``labels``, due now) in one transaction; a label queued earlier for
        the trace is replaced (fleet_core.observability.export writes it to MLflow)."""
        stamp = now()
        values = _label_row(session_id, turn_id, labels, eligible, ineligible_reason, stamp)
        queued = {
            "record": payload,
            "attempts": 0,
            "last_error": None,
            "next_attempt_at": None,
            "updated_at": stamp,
        }
        table = schema.trace_exports
        dialect_insert = pg_insert if self.backend == "postgresql" else sqlite_insert
        upsert = dialect_insert(table).values(
            trace_id=queue_id,
            session_id=session_id or "",
            turn_id=turn_id or "",
            scope="labels",
            created_at=stamp,
            **queued,
        )
        with self.engine.begin() as conn:
            self._upsert_labels(conn, trace_id, values)
            conn.execute(
                upsert.on_conflict_do_update(index_elements=[table.c.trace_id], set_=queued)
            )

    @_read
    def session_of_trace(self, trace_id: str) -> str | None:
        """The Session of the Turn whose trace this is (None: no Turn here has it)."""
        with self.engine.connect() as conn:
            found = conn.execute(
                select(schema.turns.c.session_id).where(schema.turns.c.trace_id == trace_id)
            ).scalar_one_or_none()
        return None if found is None else str(found)

    @_read
    def get_trace_labels(self, trace_id: str) -> dict[str, Any] | None:
        """``{trace_id, session_id, turn_id, labels, eligible, ineligible_reason, updated_at}``."""
        row = self._row_where(schema.trace_labels.c.trace_id, trace_id)
        if row is None:
            return None
        found = dict(row)
        found["updated_at"] = _utc(found["updated_at"])
        return found

    @_read
    def list_trace_labels(
        self, *, session_id: str | None = None, eligible: bool | None = None, limit: int = 1_000
    ) -> list[dict[str, Any]]:
        table = schema.trace_labels
        query = select(table).order_by(table.c.updated_at).limit(limit)
        if session_id is not None:
            query = query.where(table.c.session_id == session_id)
        if eligible is not None:
            query = query.where(table.c.eligible == eligible)
        with self.engine.connect() as conn:
            return [dict(row) for row in conn.execute(query).mappings()]

    # trace export queue ---------------------------------------------------------------------

    @_read
    def pending_traces(self, limit: int = 20, *, due: datetime | None = None) -> list[TraceExport]:
        """The oldest traces still waiting for export; ``due``: only those whose next attempt
        is not after it (rows backing off after a failure, or claimed by an exporter, wait)."""
        t = schema.trace_exports
        query = select(t).order_by(t.c.created_at, t.c.trace_id).limit(limit)
        if due is not None:
            query = query.where(or_(t.c.next_attempt_at.is_(None), t.c.next_attempt_at <= due))
        with self.engine.connect() as conn:
            rows = conn.execute(query).mappings().all()
        return [_trace_export(row) for row in rows]

    @_read
    def next_trace_due(self) -> datetime | None:
        """When the earliest queued trace is due for an export attempt (None: queue empty)."""
        t = schema.trace_exports
        with self.engine.connect() as conn:
            row = conn.execute(
                select(func.count(), func.count(t.c.next_attempt_at), func.min(t.c.next_attempt_at))
            ).one()
        total, scheduled, earliest = row
        if not total:
            return None
        if scheduled < total or earliest is None:
            return now()
        return _utc(earliest)

    @_write
    def claim_trace(self, trace_id: str, until: datetime, due: datetime | None = None) -> bool:
        """Claim a queued trace due by ``due`` (default now) for one export attempt, for every
        exporter on the database: its next attempt moves to ``until`` (so a crashed exporter's
        claim lapses). False when the row is gone, backing off, or claimed by another exporter."""
        t = schema.trace_exports
        stamp = due or now()
        with self.engine.begin() as conn:
            claimed = conn.execute(
                update(t)
                .where(
                    t.c.trace_id == trace_id,
                    or_(t.c.next_attempt_at.is_(None), t.c.next_attempt_at <= stamp),
                )
                .values(next_attempt_at=until)
            )
        return claimed.rowcount == 1

    @_write
    def drop_trace(self, trace_id: str) -> bool:
        """Remove a queued trace without exporting it (an operator's decision); False when it
        was not queued."""
        with self.engine.begin() as conn:
            gone = conn.execute(
                delete(schema.trace_exports).where(schema.trace_exports.c.trace_id == trace_id)
            )
        return gone.rowcount == 1

    @_read
    def pending_trace(self, trace_id: str) -> TraceExport | None:
        row = self._row_where(schema.trace_exports.c.trace_id, trace_id)
        return _trace_export(row) if row is not None else None

    @_read
    def count_pending_traces(self) -> int:
        with self.engine.connect() as conn:
            count = conn.execute(select(func.count()).select_from(schema.trace_exports)).scalar()
        return int(count or 0)

    @_write
    def trace_exported(self, trace_id: str) -> None:
        with self.engine.begin() as conn:
            conn.execute(
                delete(schema.trace_exports).where(schema.trace_exports.c.trace_id == trace_id)
            )

    @_write
    def trace_export_failed(
        self, trace_id: str, error: str, retry_at: datetime | None = None
    ) -> None:
        """Count a failed attempt; the row is not tried again before ``retry_at``."""
        t = schema.trace_exports
        with self.engine.begin() as conn:
            conn.execute(
                update(t)
                .where(t.c.trace_id == trace_id)
                .values(
                    attempts=t.c.attempts + 1,
                    last_error=error[:2_000],
                    updated_at=now(),
                    next_attempt_at=retry_at,
                )
            )

    @_write
    def prune_pending_traces(self, keep: int) -> int:
        """Drop the oldest queued traces beyond ``keep``; returns how many were dropped."""
        t = schema.trace_exports
        with self.engine.begin() as conn:
            stale = (
                conn.execute(
                    select(t.c.trace_id)
                    .order_by(t.c.created_at.desc(), t.c.trace_id.desc())
                    .offset(keep)
                )
                .scalars()
                .all()
            )
            if stale:
                conn.execute(delete(t).where(t.c.trace_id.in_(stale)))
        return len(stale)


def _session_info(row: RowMapping) -> SessionInfo:
    dataset = DatasetContext.model_validate(row["dataset"]) if row["dataset"] else None
    return SessionInfo(
        session_id=row["session_id"],
        mode=row["mode"],
        turn_count=row["turn_count"],
        created_at=_utc(row["created_at"]),
        updated_at=_utc(row["updated_at"]),
        dataset=dataset,
        selections=dict(row["selections"] or {}),
        owner_host=row["owner_host"],
        owner_user=row["owner_user"],
    )


def _turn_summary(row: RowMapping) -> TurnSummary:
    return TurnSummary(
        turn_id=row["turn_id"],
        seq=row["seq"],
        status=row["status"],
        task=row["task"],
        answer=row["answer"],
        route=row["route"],
        learned_note=row["learned_note"],
        trace_id=row["trace_id"],
        created_at=_utc(row["created_at"]),
        error=TurnError.model_validate(row["error"]) if row["error"] else None,
        **_result_facts(row["result"]),
    )


def _result_facts(result: Any) -> dict[str, Any]:
    """The duration and artifact paths a Turn's stored result (``TurnResult.wire()``) holds;
    results stored before these fields, or by hand, may lack them or hold odd shapes."""
    if not isinstance(result, dict):
        return {}
    facts: dict[str, Any] = {}
    duration = result.get("durationSeconds")
    if isinstance(duration, int | float) and not isinstance(duration, bool):
        facts["duration_seconds"] = float(duration)
    listed = result.get("artifacts")
    paths = [
        a["path"]
        for a in (listed if isinstance(listed, list) else [])
        if isinstance(a, dict) and isinstance(a.get("path"), str)
    ]
    omitted = result.get("artifactsOmitted")
    omitted = omitted if isinstance(omitted, int) and not isinstance(omitted, bool) else 0
    outcome = result.get("outcome")
    if isinstance(outcome, dict):
        with contextlib.suppress(ValidationError):
            facts["outcome"] = AnswerOutcome.model_validate(outcome)
    facts["artifact_paths"] = paths[:HISTORY_ARTIFACT_PATHS]
    facts["artifacts_omitted"] = max(0, omitted) + max(0, len(paths) - HISTORY_ARTIFACT_PATHS)
    return facts


def _replay_claim(prior: RowMapping, digest: str) -> TurnClaim:
    if prior["task_sha256"] != digest:
        raise IdempotencyConflict("Idempotency key already belongs to another task")
    if prior["status"] != "completed":
        raise IdempotencyConflict(
            f"The Turn with this idempotency key is {prior['status']}; use a new key to run again"
        )
    return TurnClaim(turn_id=prior["turn_id"], seq=prior["seq"], replayed=dict(prior["result"]))


def _interrupted_status(conn: Connection, session_id: str, turn_id: str) -> str | None:
    """The Turn's status when it is running or failed as interrupted, else None."""
    turns = schema.turns
    row = conn.execute(
        select(turns.c.status, turns.c.error).where(
            turns.c.session_id == session_id, turns.c.turn_id == turn_id
        )
    ).first()
    if row is None:
        return None
    kind = (row.error or {}).get("kind")
    running = row.status == "running"
    return (
        str(row.status)
        if running or (row.status == "failed" and kind == INTERRUPTED.kind)
        else None
    )


def _utc(value: datetime) -> datetime:
    """SQLite returns naive datetimes; they were written in UTC."""
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _trace_export(row: RowMapping) -> TraceExport:
    return TraceExport(
        trace_id=row["trace_id"],
        scope=row["scope"],
        record=bytes(row["record"]),
        session_id=row["session_id"],
        turn_id=row["turn_id"],
        attempts=row["attempts"],
        origin_host=row["origin_host"],
        last_error=row["last_error"],
        next_attempt_at=_utc(row["next_attempt_at"]) if row["next_attempt_at"] else None,
        created_at=_utc(row["created_at"]),
    )


def _label_row(
    session_id: str | None,
    turn_id: str | None,
    labels: dict[str, Any],
    eligible: bool,
    ineligible_reason: str | None,
    stamp: datetime,
) -> dict[str, Any]:
    """A ``trace_labels`` row's values but its trace id."""
    return {
        "session_id": session_id,
        "turn_id": turn_id,
        "labels": labels,
        "eligible": eligible,
        "ineligible_reason": ineligible_reason,
        "updated_at": stamp,
    }
