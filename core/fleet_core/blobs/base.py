"""What every blob backend offers, and the records the store and the sync share.

A blob is the bytes of one workspace file, named by its sha256. Backends keep bytes only; which
blobs exist and who refers to them is the store's index (``fleet_blobs``) and each Session's
manifest (``fleet_workspace_entries``), so garbage collection and deduplication work the same
for every backend (docs/storage.md).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from fleet_core.errors import StoreError

READ_CHUNK = 1 << 20
_DIGEST = re.compile(r"[0-9a-f]{64}")


class BlobMissing(StoreError):
    """A blob the store refers to is not in the backend (deleted by hand, a wrong bucket)."""

    kind = "BlobMissing"


class BlobCorrupt(StoreError):
    """A blob's bytes do not hash to its name."""

    kind = "BlobCorrupt"


def check_digest(digest: str) -> str:
    """A blob name is a lower-case sha256 (64 hex digits); anything else never names one."""
    if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
        raise ValueError(f"not a sha256 digest: {digest!r}")
    return digest


@dataclass(frozen=True, slots=True)
class ContentEntry:
    """One file of a Session's published manifest."""

    path: str
    sha256: str
    size_bytes: int


@dataclass(frozen=True, slots=True)
class PendingFile:
    """A file to publish: its manifest entry and where its bytes are on this host."""

    entry: ContentEntry
    source: Path


@dataclass(frozen=True, slots=True)
class ContentDelta:
    """What a host publishes in one commit: files new or changed since its last publish and
    paths removed since."""

    upserts: tuple[PendingFile, ...] = ()
    removals: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.upserts and not self.removals


class BlobStore(Protocol):
    """Bytes by digest. ``conn``: the store's open transaction (a SQLAlchemy ``Connection``);
    backends outside the database ignore it, the database backend writes through it, so its
    bytes commit or roll back with the manifest that refers to them."""

    kind: str

    def put(self, conn: Any, digest: str, source: Path, size: int) -> None:
        """Store ``source``'s bytes as ``digest`` (idempotent; a present blob is kept)."""
        ...

    def chunks(self, conn: Any, digest: str) -> Iterator[bytes]:
        """The blob's bytes in order (``BlobMissing`` when it is absent)."""
        ...

    def delete(self, conn: Any, digests: Iterable[str]) -> None:
        """Remove blobs (absent ones are skipped)."""
        ...


def verified(chunks: Iterable[bytes], digest: str, size: int, where: str) -> Iterator[bytes]:
    """``chunks`` passed through, checked against ``digest`` and ``size`` at the end."""
    hasher = hashlib.sha256()
    seen = 0
    for chunk in chunks:
        hasher.update(chunk)
        seen += len(chunk)
        yield chunk
    if seen != size or hasher.hexdigest() != digest:
        raise BlobCorrupt(
            f"The blob {digest[:12]}... in {where} is damaged: {seen:,} bytes hashing to "
            f"{hasher.hexdigest()[:12]}..., expected {size:,} bytes"
        )


def file_chunks(source: Path, size: int = READ_CHUNK) -> Iterator[bytes]:
    with source.open("rb") as handle:
        while chunk := handle.read(size):
            yield chunk
