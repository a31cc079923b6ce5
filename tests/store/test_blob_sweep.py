"""Objects a rolled-back commit left in an ``s3`` or ``directory`` blob store are swept by the
blob garbage collection once older than the grace period; objects the index names are kept
(real PostgreSQL; the directory backend and a real S3-compatible server, SeaweedFS)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from fleet_core.blobs.base import BlobMissing, ContentDelta, PendingFile
from fleet_core.blobs.directory import DirectoryBlobStore
from fleet_core.store import Store, content
from tests.store.test_blobs import _file, _object_store, _read, _reset, _session, s3_server

__all__ = ["s3_server"]
pytestmark = pytest.mark.postgres


@pytest.fixture(params=["directory", "s3"])
def store(
    request: pytest.FixtureRequest, postgres_database: str, tmp_path: Path
) -> Iterator[Store]:
    _reset(postgres_database)
    if request.param == "directory":
        backend = DirectoryBlobStore(tmp_path / "blobs")
        opened = Store.open(postgres_database, tmp_path / "state", blobs=lambda _e: backend)
    else:
        endpoint = request.getfixturevalue("s3_server")
        prefix = f"sweep-{tmp_path.name}"
        opened = Store.open(
            postgres_database, tmp_path / "state", blobs=lambda _e: _object_store(endpoint, prefix)
        )
    yield opened
    opened.close()


class RolledBack(Exception):
    pass


def _put_and_roll_back(store: Store, pending: PendingFile) -> None:
    assert store.blobs is not None
    with store.engine.begin() as conn:
        content.ensure_blob(conn, store.blobs, pending, datetime.now(UTC))
        raise RolledBack


def test_an_object_a_rolled_back_commit_left_is_swept_after_the_grace_period(
    store: Store, tmp_path: Path
) -> None:
    assert store.blobs is not None
    _session(store, "s1")
    kept = _file(tmp_path, "kept.txt", b"kept")
    store.publish_content("s1", ContentDelta((kept,)))
    stray = _file(tmp_path, "stray.txt", b"stray")
    with pytest.raises(RolledBack):  # the put, then a rollback
        _put_and_roll_back(store, stray)
    assert b"".join(store.blobs.chunks(None, stray.entry.sha256)) == b"stray"  # left behind
    assert store.blob_counts() == (1, 4)  # the index never names it

    assert store.collect_blobs(3600) == 0  # within the grace period (a commit may be in flight)
    assert b"".join(store.blobs.chunks(None, stray.entry.sha256)) == b"stray"
    time.sleep(1.1)  # object stores stamp whole seconds
    assert store.collect_blobs(0) == 1
    with pytest.raises(BlobMissing):
        b"".join(store.blobs.chunks(None, stray.entry.sha256))
    assert _read(store, kept.entry) == b"kept"  # what the index names stays
    assert store.collect_blobs(0) == 0
