"""Blobs as files in a directory: ``<root>/<aa>/<bb>/<sha256>`` (a local disk, or a mount every
host shares). Writes stage in ``<root>/.staging/`` and are renamed into place, so a blob is
either whole or absent; a reader verifies what it reads."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import secrets
from collections.abc import Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from fleet_core.blobs.base import READ_CHUNK, BlobCorrupt, BlobMissing, check_digest

_DIGEST = re.compile(r"[0-9a-f]{64}")


class DirectoryBlobStore:
    """A content-addressed directory (see the module docstring)."""

    kind = "directory"

    def __init__(self, root: Path) -> None:
        self.root = root

    def path_of(self, digest: str) -> Path:
        check_digest(digest)
        return self.root / digest[:2] / digest[2:4] / digest

    def put(self, conn: Any, digest: str, source: Path, size: int) -> None:
        final = self.path_of(digest)
        if final.is_file() and final.stat().st_size == size:
            with contextlib.suppress(FileNotFoundError):
                os.utime(final)  # fresh again: a sweep of strays spares it (content.sweep_strays)
            return
        staging = self.root / ".staging"
        staging.mkdir(mode=0o700, parents=True, exist_ok=True)
        temp = staging / f"{digest[:16]}-{secrets.token_hex(6)}"
        hasher = hashlib.sha256()
        try:
            fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            with os.fdopen(fd, "rb") as reader, temp.open("xb") as writer:
                while chunk := reader.read(READ_CHUNK):
                    hasher.update(chunk)
                    writer.write(chunk)
                writer.flush()
                os.fsync(writer.fileno())
            if hasher.hexdigest() != digest:
                raise BlobCorrupt(
                    f"'{source.name}' changed while it was being published "
                    f"(expected sha256 {digest[:12]}...); nothing was stored, try again"
                )
            final.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.replace(temp, final)
        finally:
            with contextlib.suppress(FileNotFoundError):
                temp.unlink()

    def chunks(self, conn: Any, digest: str) -> Iterator[bytes]:
        try:
            handle = self.path_of(digest).open("rb")
        except FileNotFoundError:
            raise BlobMissing(
                f"The blob {digest[:12]}... is missing from the blob directory {self.root}"
            ) from None
        with handle:
            while chunk := handle.read(READ_CHUNK):
                yield chunk

    def delete(self, conn: Any, digests: Iterable[str]) -> None:
        for digest in digests:
            with contextlib.suppress(FileNotFoundError):
                self.path_of(digest).unlink()

    def stray_candidates(self, older_than: datetime) -> list[str]:
        """Digests of blobs last written before ``older_than`` (the sweep checks the index)."""
        cutoff = older_than.timestamp()
        found: list[str] = []
        for path in self.root.glob("??/??/*"):
            with contextlib.suppress(FileNotFoundError):
                if _DIGEST.fullmatch(path.name) and path.stat().st_mtime < cutoff:
                    found.append(path.name)
        return found

    def exists(self, digest: str) -> bool:
        return self.path_of(digest).is_file()
