"""Workspace content in the database: the blob index, Session manifests, and the PostgreSQL
blob backend (bytes in chunked rows). Every function takes the caller's open transaction, so a
manifest change, the blobs it needs and the commit it belongs to (a Turn's outcome, an attach,
a dataset selection) land together or not at all (docs/storage.md)."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, delete, exists, func, insert, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from fleet_core.blobs.base import (
    READ_CHUNK,
    BlobCorrupt,
    BlobMissing,
    BlobStore,
    ContentDelta,
    ContentEntry,
    PendingFile,
    check_digest,
)
from fleet_core.blobs.directory import DirectoryBlobStore
from fleet_core.config import StorageSettings
from fleet_core.errors import ConfigError
from fleet_core.store import schema

GC_BATCH = 500


class DatabaseBlobStore:
    """Blob bytes in ``fleet_blob_chunks`` rows of at most ``chunk_bytes`` each, written through
    the caller's transaction."""

    kind = "postgresql"

    def __init__(self, engine: Engine, *, chunk_bytes: int = READ_CHUNK) -> None:
        self.engine = engine
        self.chunk_bytes = chunk_bytes

    def put(self, conn: Any, digest: str, source: Path, size: int) -> None:
        check_digest(digest)
        hasher = hashlib.sha256()
        seq = 0
        conn.execute(delete(schema.blob_chunks).where(schema.blob_chunks.c.digest == digest))
        with source.open("rb") as handle:
            while chunk := handle.read(self.chunk_bytes):
                hasher.update(chunk)
                conn.execute(insert(schema.blob_chunks).values(digest=digest, seq=seq, data=chunk))
                seq += 1
        if hasher.hexdigest() != digest:
            raise BlobCorrupt(
                f"'{source.name}' changed while it was being published "
                f"(expected sha256 {digest[:12]}...); nothing was stored, try again"
            )
        conn.execute(
            update(schema.blobs).where(schema.blobs.c.digest == digest).values(chunk_count=seq)
        )

    def chunks(self, conn: Any, digest: str) -> Iterator[bytes]:
        """One chunk per query: a large blob never sits in memory whole, and no cursor stays
        open between the caller's writes."""
        check_digest(digest)
        table = schema.blob_chunks
        count = conn.execute(
            select(schema.blobs.c.chunk_count).where(schema.blobs.c.digest == digest)
        ).scalar_one_or_none()
        if count is None:
            raise BlobMissing(f"The blob {digest[:12]}... is not in the database")
        for seq in range(int(count)):
            data = conn.execute(
                select(table.c.data).where(table.c.digest == digest, table.c.seq == seq)
            ).scalar_one_or_none()
            if data is None:
                raise BlobMissing(
                    f"Chunk {seq + 1} of {count} of the blob {digest[:12]}... is missing "
                    "from the database"
                )
            yield bytes(data)

    def delete(self, conn: Any, digests: Iterable[str]) -> None:
        listed = list(digests)
        if listed:
            conn.execute(delete(schema.blob_chunks).where(schema.blob_chunks.c.digest.in_(listed)))


def _insert(conn: Connection) -> Any:
    return pg_insert if conn.dialect.name == "postgresql" else sqlite_insert


def head(conn: Connection, session_id: str) -> int | None:
    """The Session's published version (None: never published)."""
    found = conn.execute(
        select(schema.workspace_heads.c.version).where(
            schema.workspace_heads.c.session_id == session_id
        )
    ).scalar_one_or_none()
    return None if found is None else int(found)


def entries(conn: Connection, session_id: str) -> list[ContentEntry]:
    table = schema.workspace_entries
    rows = conn.execute(
        select(table.c.path, table.c.sha256, table.c.size_bytes)
        .where(table.c.session_id == session_id)
        .order_by(table.c.path)
    )
    return [ContentEntry(path, sha, int(size)) for path, sha, size in rows]


def ensure_blob(
    conn: Connection, backend: BlobStore, pending: PendingFile, stamp: datetime
) -> None:
    """The blob is indexed and stored once this transaction commits: a new one is inserted
    (and its bytes put); a known one is touched, which row-locks it against a concurrent
    garbage collection (that skips locked rows). A blob collected meanwhile is put again."""
    entry = pending.entry
    blobs = schema.blobs
    touched = conn.execute(
        update(blobs).where(blobs.c.digest == entry.sha256).values(touched_at=stamp)
    )
    if touched.rowcount == 1:
        return
    chunks = math.ceil(entry.size_bytes / READ_CHUNK)
    inserted = conn.execute(
        _insert(conn)(blobs)
        .values(
            digest=entry.sha256,
            size_bytes=entry.size_bytes,
            chunk_count=chunks,
            created_at=stamp,
            touched_at=stamp,
        )
        .on_conflict_do_nothing(index_elements=[blobs.c.digest])
        .returning(blobs.c.digest)
    ).first()
    if inserted is not None:
        backend.put(conn, entry.sha256, pending.source, entry.size_bytes)


def apply_delta(
    conn: Connection, backend: BlobStore, session_id: str, delta: ContentDelta, stamp: datetime
) -> int:
    """Publish ``delta`` into the Session's manifest (blobs first) and return the new version."""
    table = schema.workspace_entries
    for pending in sorted(delta.upserts, key=lambda p: p.entry.sha256):  # one lock order
        ensure_blob(conn, backend, pending, stamp)
    if delta.removals:
        conn.execute(
            delete(table).where(
                table.c.session_id == session_id, table.c.path.in_(list(delta.removals))
            )
        )
    for pending in delta.upserts:
        values = {
            "sha256": pending.entry.sha256,
            "size_bytes": pending.entry.size_bytes,
            "updated_at": stamp,
        }
        statement = _insert(conn)(table).values(
            session_id=session_id, path=pending.entry.path, **values
        )
        conn.execute(
            statement.on_conflict_do_update(
                index_elements=[table.c.session_id, table.c.path], set_=values
            )
        )
    return bump(conn, session_id, stamp)


def bump(conn: Connection, session_id: str, stamp: datetime) -> int:
    heads = schema.workspace_heads
    current = conn.execute(
        select(heads.c.version).where(heads.c.session_id == session_id).with_for_update()
    ).scalar_one_or_none()
    if current is None:
        conn.execute(insert(heads).values(session_id=session_id, version=1, updated_at=stamp))
        return 1
    conn.execute(
        update(heads)
        .where(heads.c.session_id == session_id)
        .values(version=heads.c.version + 1, updated_at=stamp)
    )
    return int(current) + 1


def blob_size(conn: Connection, digest: str) -> int | None:
    found = conn.execute(
        select(schema.blobs.c.size_bytes).where(schema.blobs.c.digest == digest)
    ).scalar_one_or_none()
    return None if found is None else int(found)


def collect_garbage(
    conn: Connection, backend: BlobStore, *, older_than: datetime, limit: int = GC_BATCH
) -> list[str]:
    """Delete up to ``limit`` blobs no manifest refers to and no commit touched since
    ``older_than``; rows a commit holds (it is referring to them right now) are skipped."""
    blobs, entries_ = schema.blobs, schema.workspace_entries
    query = (
        select(blobs.c.digest)
        .where(
            blobs.c.touched_at < older_than,
            ~exists().where(entries_.c.sha256 == blobs.c.digest),
        )
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    digests = list(conn.execute(query).scalars())
    if digests:
        backend.delete(conn, digests)
        conn.execute(delete(blobs).where(blobs.c.digest.in_(digests)))
    return digests


def sweep_strays(
    conn: Connection, backend: BlobStore, *, older_than: datetime, limit: int = GC_BATCH
) -> list[str]:
    """Delete up to ``limit`` objects of an ``s3`` or ``directory`` backend that no index row
    names (a put whose transaction rolled back) and that were written before ``older_than``:
    a commit in flight inserts its index row before its put, and a put that finds its object
    already there refreshes it, so the grace period spares every object a commit is using."""
    listing = getattr(backend, "stray_candidates", None)
    if listing is None:
        return []  # the database backend's bytes roll back with their transaction
    candidates: list[str] = listing(older_than)
    strays: list[str] = []
    for start in range(0, len(candidates), GC_BATCH):
        batch = candidates[start : start + GC_BATCH]
        indexed = set(
            conn.execute(
                select(schema.blobs.c.digest).where(schema.blobs.c.digest.in_(batch))
            ).scalars()
        )
        strays += [digest for digest in batch if digest not in indexed]
        if len(strays) >= limit:
            break
    strays = strays[:limit]
    if strays:
        backend.delete(conn, strays)
    return strays


def counts(conn: Connection) -> tuple[int, int]:
    """(blobs indexed, their bytes)."""
    row = conn.execute(
        select(func.count(), func.coalesce(func.sum(schema.blobs.c.size_bytes), 0))
    ).one()
    return int(row[0]), int(row[1])


def grace_cutoff(stamp: datetime, grace_seconds: float) -> datetime:
    return stamp - timedelta(seconds=grace_seconds)


def backend_factory(
    settings: StorageSettings, state_dir: Path
) -> Callable[[Engine], BlobStore | None]:
    """The blob backend ``storage.blob_backend`` chooses for an engine (``auto``: PostgreSQL's
    own when the database is PostgreSQL, else none: each host keeps its workspaces)."""

    def make(engine: Engine) -> BlobStore | None:
        kind = settings.blob_backend
        dialect = engine.dialect.name
        if kind == "auto":
            kind = "postgresql" if dialect == "postgresql" else "local"
        if kind == "local":
            return None
        if kind == "postgresql":
            if dialect != "postgresql":
                raise ConfigError(
                    "storage.blob_backend = 'postgresql' needs a PostgreSQL database "
                    f"(FLEET_DATABASE_URL); this one is {dialect}"
                )
            return DatabaseBlobStore(engine, chunk_bytes=settings.blob_chunk_bytes)
        if kind == "directory":
            root = Path(settings.blob_dir) if settings.blob_dir else state_dir / "blobs"
            return DirectoryBlobStore(root if root.is_absolute() else state_dir / root)
        from fleet_core.blobs.s3 import ObjectBlobStore  # obstore: loaded only when chosen

        return ObjectBlobStore.from_settings(settings)

    return make
