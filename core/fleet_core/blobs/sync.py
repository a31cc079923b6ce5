"""A host's cache of Sessions' workspaces, kept in step with the shared store.

Each host materializes a Session's published files into its own workspace directory and
remembers, per Session, the version it last saw and each file's stamp and digest then
(``<state>/workspaces/.content/<session>.json``). ``refresh`` makes the directory match the
store when the store has moved on (one read when it has not); ``plan`` lists what changed on
this host since (only files whose stamp changed are hashed), for the next commit to publish;
``published`` records that commit. One writer at a time is the Session lease's job.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import stat
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from fleet_core.blobs.base import ContentDelta, ContentEntry, PendingFile
from fleet_core.errors import FleetError, WorkspaceFileNotFound, WorkspacePathError
from fleet_core.workspace import FileStamp, Workspace

log = logging.getLogger(__name__)
RECORDS_DIR = ".content"
EXTRA = ".optimization/"
"""Manifest paths under this prefix are not workspace files: they are the Session's approved
program and optimization candidates, kept in ``<state_dir>/optimization/<session>/`` (never
mounted in a sandbox) and following the Session the same way."""

Known = tuple[str, int, tuple[int, int, int]]  # sha256, size, stamp


class ContentSource(Protocol):
    """What the sync reads from the store (``fleet_core.store.Store``)."""

    def content_head(self, session_id: str) -> int | None: ...

    def content_manifest(self, session_id: str) -> tuple[int | None, list[ContentEntry]]: ...

    def read_blob(self, entry: ContentEntry) -> Iterator[bytes]: ...


@dataclass(slots=True)
class _Record:
    version: int | None = None
    files: dict[str, Known] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PublishPlan:
    """A delta to publish and the record this host keeps once it is committed."""

    session_id: str
    base: int | None
    delta: ContentDelta
    files: dict[str, Known]
    too_large: tuple[str, ...] = ()


class SessionContent:
    """See the module docstring. Thread-safe per Session."""

    def __init__(
        self,
        store: ContentSource,
        workspaces_dir: Path,
        *,
        max_bytes: int,
        extras: Callable[[str], Path] | None = None,
    ) -> None:
        self.store = store
        self.records_dir = workspaces_dir / RECORDS_DIR
        self.extras = extras  # a Session's optimization directory (EXTRA entries)
        self.max_bytes = max_bytes
        self._records: dict[str, _Record] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._mutex = threading.Lock()

    def _lock(self, session_id: str) -> threading.Lock:
        with self._mutex:
            return self._locks.setdefault(session_id, threading.Lock())

    # -- refresh ---------------------------------------------------------------------------

    def refresh(self, session_id: str, workspace: Workspace) -> bool:
        """Bring the local copy to the store's version; True when the store has never held
        this Session's content (its owner should publish what this host has)."""
        with self._lock(session_id):
            record = self._record(session_id)
            head = self.store.content_head(session_id)
            if head is None:
                if record.version is not None:  # the store lost it (recreated): start over
                    record.version, record.files = None, {}
                return True
            if head == record.version:
                return False
            version, manifest = self.store.content_manifest(session_id)
            self._materialize(session_id, workspace, record, version, manifest)
            return False

    def restore(self, session_id: str, workspace: Workspace, paths: list[str]) -> list[str]:
        """Put back the published bytes of those ``paths`` the store holds and this host's copy
        no longer matches (a Turn interrupted while it wrote them in place); returns the paths
        restored. A path the store does not hold (the Turn's new file) is left as it is, and so
        is one whose blob cannot be read (logged)."""
        chosen = set(paths)
        with self._lock(session_id):
            if not chosen or self.store.content_head(session_id) is None:
                return []
            record = self._record(session_id)
            version, manifest = self.store.content_manifest(session_id)
            restored: list[str] = []
            for entry in sorted((e for e in manifest if e.path in chosen), key=lambda e: e.path):
                key = workspace.stamp_key(entry.path)
                if key is not None and self._holds(workspace, record, entry, FileStamp(key)):
                    continue
                try:
                    known = self._fetch(workspace, entry)
                except FleetError as exc:
                    log.warning("Session %s: %s not restored: %s", session_id, entry.path, exc)
                    continue
                if known is not None and version == record.version:
                    record.files[entry.path] = known
                restored.append(entry.path)
            if restored:
                self._save(session_id, record)
            return restored

    def _materialize(
        self,
        session_id: str,
        workspace: Workspace,
        record: _Record,
        version: int | None,
        manifest: list[ContentEntry],
    ) -> None:
        workspace.ensure_layout()
        on_disk = workspace.stamps()
        wanted = {entry.path: entry for entry in manifest if not entry.path.startswith(EXTRA)}
        fetched = removed = 0
        for path in sorted(set(on_disk) - set(wanted)):
            with contextlib.suppress(WorkspaceFileNotFound, WorkspacePathError):
                workspace.delete(path)
                removed += 1
        files: dict[str, Known] = self._materialize_extras(session_id, record, manifest)
        for entry in wanted.values():
            stamp = on_disk.get(entry.path)
            if stamp is not None and self._holds(workspace, record, entry, stamp):
                files[entry.path] = (entry.sha256, entry.size_bytes, stamp.key)
                continue
            known = self._fetch(workspace, entry)
            if known is not None:
                files[entry.path] = known
            fetched += 1
        record.version, record.files = version, files
        self._save(session_id, record)
        if fetched or removed:
            log.info(
                "Session %s: materialized version %s (%d file(s) fetched, %d removed)",
                session_id,
                version,
                fetched,
                removed,
            )

    def _fetch(self, workspace: Workspace, entry: ContentEntry) -> Known | None:
        """Write the entry's published bytes over this host's file (verified, whole or not at
        all): what the record keeps of it (None: its stamp could not be read back)."""
        info = workspace.write_chunks(entry.path, self.store.read_blob(entry))
        key = workspace.stamp_key(entry.path)
        return None if key is None else (info.sha256, info.size_bytes, key)

    @staticmethod
    def _holds(
        workspace: Workspace, record: _Record, entry: ContentEntry, stamp: FileStamp
    ) -> bool:
        known = record.files.get(entry.path)
        if known is not None and known[2] == stamp.key:
            return known[0] == entry.sha256
        if stamp.key[1] != entry.size_bytes:
            return False
        try:
            return workspace.stat(entry.path).sha256 == entry.sha256
        except (WorkspaceFileNotFound, WorkspacePathError):
            return False

    def _materialize_extras(
        self, session_id: str, record: _Record, manifest: list[ContentEntry]
    ) -> dict[str, Known]:
        """The Session's optimization files: written atomically, removed when not listed."""
        if self.extras is None:
            return {}
        root = self.extras(session_id)
        wanted = {e.path: e for e in manifest if e.path.startswith(EXTRA) and _safe(e.path)}
        on_disk = _extra_stamps(root)
        for path in sorted(set(on_disk) - set(wanted)):
            with contextlib.suppress(FileNotFoundError):
                (root / path.removeprefix(EXTRA)).unlink()
        files: dict[str, Known] = {}
        for path, entry in wanted.items():
            known = record.files.get(path)
            key = on_disk.get(path)
            if key is None or known is None or known[2] != key or known[0] != entry.sha256:
                key = _write_file(root / path.removeprefix(EXTRA), self.store.read_blob(entry))
            files[path] = (entry.sha256, entry.size_bytes, key)
        return files

    # -- publish ---------------------------------------------------------------------------

    def plan(self, session_id: str, workspace: Workspace) -> PublishPlan:
        """What changed on this host since its record: new or changed files (hashed only when
        their stamp changed) and removed paths. Files over ``max_bytes`` stay on this host."""
        with self._lock(session_id):
            record = self._record(session_id)
            upserts: list[PendingFile] = []
            files: dict[str, Known] = {}
            too_large: list[str] = []
            stamps = workspace.stamps()
            for path, stamp in stamps.items():
                known = record.files.get(path)
                if known is not None and known[2] == stamp.key:
                    files[path] = known
                    continue
                try:
                    info = workspace.stat(path)
                except (WorkspaceFileNotFound, WorkspacePathError):
                    continue  # gone meanwhile
                if info.size_bytes > self.max_bytes:
                    too_large.append(path)
                    continue
                files[path] = (info.sha256, info.size_bytes, stamp.key)
                if known is None or known[0] != info.sha256:
                    entry = ContentEntry(path, info.sha256, info.size_bytes)
                    upserts.append(PendingFile(entry, workspace.root / path))
            extras_root = self.extras(session_id) if self.extras is not None else None
            extra = _extra_stamps(extras_root) if extras_root is not None else {}
            for path, key in extra.items():
                known = record.files.get(path)
                if known is not None and known[2] == key:
                    files[path] = known
                    continue
                assert extras_root is not None
                source = extras_root / path.removeprefix(EXTRA)
                try:
                    sha, size = _hash_file(source)
                except OSError:
                    continue
                files[path] = (sha, size, key)
                if known is None or known[0] != sha:
                    upserts.append(PendingFile(ContentEntry(path, sha, size), source))
            removals = tuple(sorted(p for p in record.files if p not in stamps and p not in extra))
            if too_large:
                log.warning(
                    "Session %s: %d file(s) larger than storage.blob_max_bytes (%d) stay on "
                    "this host only: %s",
                    session_id,
                    len(too_large),
                    self.max_bytes,
                    ", ".join(too_large[:5]),
                )
            delta = ContentDelta(tuple(upserts), removals)
            return PublishPlan(session_id, record.version, delta, files, tuple(too_large))

    def published(self, plan: PublishPlan, version: int | None) -> None:
        """``plan`` was committed as ``version`` (None: nothing was published; the record keeps
        what it had). When another version came between, the next refresh re-materializes."""
        if version is None and not plan.delta.empty:
            return
        with self._lock(plan.session_id):
            record = self._record(plan.session_id)
            if version is not None:
                current = plan.base is not None and version == plan.base + 1
                fresh = plan.base is None and version == 1
                record.version = version if current or fresh else -1
            record.files = plan.files
            self._save(plan.session_id, record)

    def forget(self, session_id: str) -> None:
        with self._lock(session_id):
            self._records.pop(session_id, None)
            with contextlib.suppress(FileNotFoundError):
                (self.records_dir / f"{session_id}.json").unlink()

    # -- the record ------------------------------------------------------------------------

    def _record(self, session_id: str) -> _Record:
        record = self._records.get(session_id)
        if record is None:
            record = self._load(session_id)
            self._records[session_id] = record
        return record

    def _load(self, session_id: str) -> _Record:
        try:
            data = json.loads((self.records_dir / f"{session_id}.json").read_text("utf-8"))
            files = {
                str(path): (str(sha), int(size), (int(key[0]), int(key[1]), int(key[2])))
                for path, (sha, size, key) in data["files"].items()
            }
            version = data["version"]
            return _Record(int(version) if version is not None else None, files)
        except FileNotFoundError:
            return _Record()
        except (ValueError, KeyError, TypeError, IndexError):
            log.warning("Session %s: unreadable content record; it is rebuilt", session_id)
            return _Record()

    def _save(self, session_id: str, record: _Record) -> None:
        self.records_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        target = self.records_dir / f"{session_id}.json"
        temp = target.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        payload = {
            "version": record.version,
            "files": {p: [sha, size, list(key)] for p, (sha, size, key) in record.files.items()},
        }
        temp.write_text(json.dumps(payload, separators=(",", ":")), "utf-8")
        os.replace(temp, target)


def _safe(path: str) -> bool:
    parts = path.removeprefix(EXTRA).split("/")
    return all(part not in ("", ".", "..") and not part.startswith(".") for part in parts)


def _extra_stamps(root: Path) -> dict[str, tuple[int, int, int]]:
    """Regular files below ``root`` (no link followed; names starting with '.', such as a run's
    staging, skipped), as ``EXTRA``-prefixed manifest paths with their stamps."""
    found: dict[str, tuple[int, int, int]] = {}
    if not root.is_dir() or root.is_symlink():
        return found
    for directory, dirs, names in os.walk(root, followlinks=False):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in names:
            if name.startswith("."):
                continue
            path = Path(directory) / name
            info = path.lstat()
            if stat.S_ISREG(info.st_mode):
                relative = path.relative_to(root).as_posix()
                found[EXTRA + relative] = (info.st_ino, info.st_size, info.st_mtime_ns)
    return found


def _hash_file(path: Path) -> tuple[str, int]:
    digest = hashlib.sha256()
    size = 0
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def _write_file(target: Path, chunks: Iterator[bytes]) -> tuple[int, int, int]:
    """Write ``target`` atomically (a temp file beside it, renamed); returns its stamp."""
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    temp = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with temp.open("wb") as out:
            for chunk in chunks:
                out.write(chunk)
        os.replace(temp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            temp.unlink()
    info = target.lstat()
    return (info.st_ino, info.st_size, info.st_mtime_ns)
