"""Blobs as objects in an S3-compatible store, through obstore (the Rust ``object_store`` crate's
Python binding; already a dependency of the Daytona SDK). Objects are named
``<prefix>/<aa>/<sha256>``; a put is atomic (a whole object or none) and idempotent, so writing
a blob twice is harmless. Credentials come from the environment (``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``) as obstore reads them; never from settings.
Every request is bounded by a timeout and obstore's retry policy (docs/storage.md)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import obstore
from obstore.exceptions import BaseError, NotFoundError
from obstore.store import S3Store

from fleet_core.blobs.base import READ_CHUNK, BlobMissing, check_digest
from fleet_core.config import StorageSettings
from fleet_core.errors import ConfigError, StoreError

if TYPE_CHECKING:  # typed dicts of obstore's stubs only
    from obstore.store import ClientConfig, S3Config

_DIGEST = re.compile(r"[0-9a-f]{64}")
REQUEST_TIMEOUT = "30s"
CONNECT_TIMEOUT = "5s"


class ObjectBlobStore:
    """See the module docstring."""

    kind = "s3"

    def __init__(self, store: Any, *, where: str) -> None:
        self.store = store
        self.where = where  # the bucket and prefix, for messages (never a credential)

    @classmethod
    def from_settings(cls, settings: StorageSettings) -> ObjectBlobStore:
        url = settings.blob_s3_url
        if not url or not url.startswith("s3://") or len(url) <= len("s3://"):
            raise ConfigError(
                "storage.blob_backend = 's3' needs storage.blob_s3_url = 's3://bucket/prefix'"
            )
        config: S3Config = {}
        options: ClientConfig = {"timeout": REQUEST_TIMEOUT, "connect_timeout": CONNECT_TIMEOUT}
        if settings.blob_s3_endpoint:
            config["endpoint"] = settings.blob_s3_endpoint
            options["allow_http"] = settings.blob_s3_endpoint.startswith("http://")
        if settings.blob_s3_region:
            config["region"] = settings.blob_s3_region
        try:
            store = S3Store.from_url(url, config=config, client_options=options)
        except BaseError as exc:
            raise ConfigError(f"storage.blob_s3_url {url!r} cannot be used: {exc}") from None
        return cls(store, where=url)

    def _key(self, digest: str) -> str:
        check_digest(digest)
        return f"{digest[:2]}/{digest}"

    def put(self, conn: Any, digest: str, source: Path, size: int) -> None:
        try:
            obstore.put(self.store, self._key(digest), source)
        except BaseError as exc:
            raise StoreError(f"Cannot store a blob in {self.where}: {_reason(exc)}") from None

    def chunks(self, conn: Any, digest: str) -> Iterator[bytes]:
        try:
            result = obstore.get(self.store, self._key(digest))
            for chunk in result.stream(min_chunk_size=READ_CHUNK):
                yield bytes(chunk)
        except (NotFoundError, FileNotFoundError):
            raise BlobMissing(f"The blob {digest[:12]}... is missing from {self.where}") from None
        except BaseError as exc:
            raise StoreError(f"Cannot read a blob from {self.where}: {_reason(exc)}") from None

    def delete(self, conn: Any, digests: Iterable[str]) -> None:
        keys = [self._key(digest) for digest in digests]
        if not keys:
            return
        try:
            obstore.delete(self.store, keys)
        except (NotFoundError, FileNotFoundError):
            return
        except BaseError as exc:
            raise StoreError(f"Cannot delete blobs from {self.where}: {_reason(exc)}") from None

    def stray_candidates(self, older_than: datetime) -> list[str]:
        """Digests of objects last written before ``older_than`` (the sweep checks the index)."""
        found: list[str] = []
        try:
            for batch in obstore.list(self.store):
                for meta in batch:
                    name = str(meta["path"]).rsplit("/", 1)[-1]
                    if _DIGEST.fullmatch(name) and meta["last_modified"] < older_than:
                        found.append(name)
        except BaseError as exc:
            raise StoreError(f"Cannot list blobs in {self.where}: {_reason(exc)}") from None
        return found

    def exists(self, digest: str) -> bool:
        try:
            obstore.head(self.store, self._key(digest))
        except (NotFoundError, FileNotFoundError):
            return False
        return True


def _reason(exc: BaseException) -> str:
    """The first line of obstore's message (it names the request, never a credential)."""
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__
