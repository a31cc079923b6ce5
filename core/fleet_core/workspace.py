"""A Session's workspace on the host: path rules, streamed attach, bounded reads, manifest.

Layout: ``<root>/{files,artifacts,memory,skills}/...``. Every path from a client, a model or a
sandbox is a relative POSIX path under one of those roots; symlinks and non-regular files are
refused everywhere and never followed.

A Session's directory is 0700 (``<state>/workspaces/`` itself 0700, or 0711 when the server runs
as root, so a dedicated sandbox uid can reach the directory it is given). Atomic writes stage in
``<root>/../.staging/`` (outside every listed root and every sandbox mount, on the same file
system), locked while they are written; ``prepare_workspaces`` sweeps what a killed process left.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import heapq
import io
import logging
import os
import re
import secrets
import stat
import weakref
from collections.abc import Generator, Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import BinaryIO
from urllib.parse import quote

from fleet_core import names
from fleet_core.errors import (
    FileTooLarge,
    InvalidInput,
    WorkspaceFileNotFound,
    WorkspacePathError,
)
from fleet_core.tracking import Change, WorkspaceTree

ROOTS = ("files", "artifacts", "memory", "skills")
READONLY_ROOTS = ("files",)  # what a sandbox mounts read-only (not charged to its quota)
URI_SCHEME = "fleet"  # the read-only documents' scheme: fleet:/sessions/<id>/...
MAX_PATH_CHARS = names.MAX_PATH_CHARS
MAX_DEPTH = 256
"""Directories deeper than this are not listed (the sandbox's walk stops a cell that nests
deeper, see ``sandbox/hygiene.py``)."""
CHUNK = 1 << 20
STAGING_DIR = ".staging"
TEMP_PREFIX = ".fleet-"
_SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_TEXT_SNIFF = 8192
_PSEUDO_ROOTS = ("/proc", "/sys", "/dev")
_PSEUDO_FS = frozenset(
    {
        "proc",
        "sysfs",
        "devtmpfs",
        "devpts",
        "debugfs",
        "tracefs",
        "securityfs",
        "cgroup",
        "cgroup2",
        "configfs",
        "bpf",
        "pstore",
        "efivarfs",
        "fusectl",
        "mqueue",
        "binfmt_misc",
        "autofs",
        "nsfs",
        "hugetlbfs",
        "rpc_pipefs",
        "selinuxfs",
        "fuse.lxcfs",
    }
)
_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISLNK, "a symlink"),
)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
log = logging.getLogger(__name__)


def validate_session_id(session_id: str) -> str:
    """Return the id if it is 1–64 letters/digits/``_.-``, starting alphanumeric, without ``..``."""
    if not isinstance(session_id, str) or not _SESSION_ID.fullmatch(session_id):
        raise InvalidInput(
            f"Invalid session id {session_id!r}: use 1-64 letters, digits, '_', '.' or '-', "
            "starting with a letter or digit"
        )
    if ".." in session_id:
        raise InvalidInput(f"Invalid session id {session_id!r}: '..' is not allowed")
    return session_id


def artifact_uri(session_id: str, path: str) -> str:
    """The one URI of a workspace artifact (``path`` with or without the ``artifacts/`` root),
    percent-encoded: the TurnResult, ``fleet/artifact/didChange`` and the documents agree."""
    relative = path.removeprefix("artifacts/")
    return f"{URI_SCHEME}:/sessions/{quote(session_id)}/artifacts/{quote(relative)}"


def validate_relative_path(path: str, roots: tuple[str, ...] = ROOTS) -> PurePosixPath:
    """Check a workspace path's syntax: relative POSIX, known root, no ``..``/control chars."""
    if not isinstance(path, str) or not path:
        raise WorkspacePathError("Workspace path is empty")
    shown = names.shown(path)
    if len(path) > MAX_PATH_CHARS:
        raise WorkspacePathError(f"Workspace path is longer than {MAX_PATH_CHARS} characters")
    if "\\" in path:
        raise WorkspacePathError(f"Workspace path '{shown}' contains a backslash; use '/'")
    if names.has_unrepresentable(path):
        raise WorkspacePathError(
            f"Workspace path '{shown}' contains NUL or control characters, "
            "or bytes that are not UTF-8"
        )
    if path.startswith("/"):
        raise WorkspacePathError(
            f"Workspace path '{shown}' is absolute; give a path relative to the workspace"
        )
    parts = path.split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise WorkspacePathError(
            f"Workspace path '{shown}' has an empty, '.' or '..' segment; traversal is not allowed"
        )
    if parts[0] not in roots:
        raise WorkspacePathError(
            f"Workspace path '{shown}' must start with one of: {', '.join(r + '/' for r in roots)}"
        )
    return PurePosixPath(path)


@dataclass(frozen=True, slots=True)
class FileInfo:
    path: str
    size_bytes: int
    sha256: str


@dataclass(frozen=True, slots=True)
class FileStamp:
    """A regular file's identity without reading it: (inode, size, mtime) and, when already
    known for exactly that identity, its sha256."""

    key: tuple[int, int, int]
    sha256: str | None = None


@dataclass(slots=True)
class Baseline:
    """What a root of the workspace held when a Turn began, to list what changed since
    (``Workspace.mark`` fills it, ``Workspace.changed_after`` reads it). With a change tree:
    its generation and the digests known then (no file is visited); without one: every file's
    stamp. Never filled, every file counts as new."""

    root: str
    generation: int | None = None
    stamps: dict[str, FileStamp] = field(default_factory=dict)
    digests: dict[str, tuple[tuple[int, int, int], str]] = field(default_factory=dict)


class Workspace:
    """File operations on one Session's workspace directory."""

    def __init__(self, root: Path, *, max_file_bytes: int, max_read_bytes: int) -> None:
        self.root = root
        self.staging = root.parent / STAGING_DIR
        self.max_file_bytes = max_file_bytes
        self.max_read_bytes = max_read_bytes
        self._digests: dict[str, tuple[tuple[int, int, int], str]] = {}
        self._tree: WorkspaceTree | None = None
        self._tree_tried = False

    def change_tree(self) -> WorkspaceTree | None:
        """The workspace's change-tracked tree (``fleet_core.tracking``), opened at first use
        and released with this object or by ``close``; None where change tracking is not
        available (then walks stay whole)."""
        if not self._tree_tried:
            self._tree_tried = True
            self._tree = WorkspaceTree.open(self.root, exclude=frozenset(READONLY_ROOTS))
            if self._tree is not None:
                weakref.finalize(self, self._tree.close)
        return self._tree

    @property
    def open_tree(self) -> WorkspaceTree | None:
        """The change tree if one is open already (never opens one: a first walk costs more
        than what a single reader saves)."""
        return self._tree

    def close(self) -> None:
        """Release the change tracking (the files stay); ``change_tree()`` opens it again."""
        tree, self._tree, self._tree_tried = self._tree, None, False
        if tree is not None:
            tree.close()

    def ensure_layout(self) -> None:
        """Create the roots; the workspace directory itself is private (0700)."""
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        _restrict(self.root, 0o700)
        for name in ROOTS:
            directory = self.root / name
            if directory.is_symlink():
                raise WorkspacePathError(f"Workspace root '{name}/' is a symlink; refusing it")
            directory.mkdir(exist_ok=True)

    def resolve(self, path: str, *, must_exist: bool = True) -> Path:
        """Map a workspace path to a host path, refusing symlinks and non-regular files."""
        relative = validate_relative_path(path)
        current = self.root
        for index, part in enumerate(relative.parts):
            current = current / part
            try:
                mode = os.lstat(current).st_mode
            except FileNotFoundError:
                if must_exist:
                    raise WorkspaceFileNotFound(f"No workspace file '{path}'") from None
                return self.root.joinpath(*relative.parts)
            if stat.S_ISLNK(mode):
                raise WorkspacePathError(
                    f"Workspace path '{path}' goes through a symlink; symlinks are never followed"
                )
            last = index == len(relative.parts) - 1
            if not last and not stat.S_ISDIR(mode):
                raise WorkspacePathError(f"Workspace path '{path}': '{part}' is not a directory")
            if last and not stat.S_ISREG(mode):
                raise WorkspacePathError(f"Workspace path '{path}' is not a regular file")
        return current

    def attach(self, source: Path, target: str | None = None) -> FileInfo:
        """Stream a local regular file into ``files/<basename>`` (or ``target``), hashing on the
        way. FIFOs, devices, sockets, directories and files on pseudo-filesystems (``/proc``,
        ``/sys``, ``/dev``) are refused before anything is read, and opening never blocks."""
        target = target or f"files/{_basename(source)}"
        self.resolve(target, must_exist=False)
        with open_attach_source(source) as handle:
            size, digest = self._store_stream(handle, target)
        return FileInfo(target, size, digest)

    def write(self, path: str, data: bytes) -> FileInfo:
        if len(data) > self.max_file_bytes:
            raise FileTooLarge(
                f"'{path}' would be {len(data):,} bytes; the limit is {self.max_file_bytes:,}"
            )
        self.resolve(path, must_exist=False)
        with self._staged(path) as handle:
            handle.write(data)
        return FileInfo(path, len(data), hashlib.sha256(data).hexdigest())

    def write_chunks(self, path: str, chunks: Iterable[bytes]) -> FileInfo:
        """Write ``path`` atomically from ``chunks`` (a blob being materialized: its size was
        bounded when it was published), hashing on the way; the digest is remembered."""
        self.resolve(path, must_exist=False)
        digest = hashlib.sha256()
        size = 0
        with self._staged(path) as out:
            for chunk in chunks:
                digest.update(chunk)
                size += len(chunk)
                out.write(chunk)
        sha = digest.hexdigest()
        key = self._key(path)
        if key is not None:
            self._digests[path] = (key, sha)
        return FileInfo(path, size, sha)

    def stamp_key(self, path: str) -> tuple[int, int, int] | None:
        """The regular file's (inode, size, mtime) now, None when there is none."""
        return self._key(path)

    def stat(self, path: str) -> FileInfo:
        host = self.resolve(path)
        return FileInfo(path, host.stat().st_size, self._sha256(path, host))

    def read(self, path: str, *, max_bytes: int | None = None, offset: int = 0) -> bytes:
        limit = self.max_read_bytes if max_bytes is None else min(max_bytes, self.max_read_bytes)
        if offset < 0 or limit < 0:
            raise InvalidInput("offset and max_bytes must not be negative")
        host = self.resolve(path)
        fd = os.open(host, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as handle:
            handle.seek(offset)
            return handle.read(limit)

    def delete(self, path: str) -> None:
        """Remove one entry. A symlink is removed itself (never its target) and other
        non-regular entries (FIFOs, sockets, devices, empty directories) can be removed too;
        nothing on the way is followed (every parent is opened without following links)."""
        relative = validate_relative_path(path)
        if len(relative.parts) == 1:
            raise WorkspacePathError(f"'{path}/' is a workspace root; it cannot be deleted")
        parent = self._open_parent(relative, create=False, label=path)
        try:
            _remove_entry(parent, relative.name, path)
        finally:
            os.close(parent)
        self._digests.pop(path, None)

    def tree(self, root: str | None = None) -> list[FileInfo]:
        """Every regular file (optionally under one root), sorted; symlinks are skipped."""
        return [self.stat(path) for path in self.paths(root)]

    def paths(self, root: str | None = None) -> list[str]:
        """Every regular file's path, sorted. A name the workspace cannot hold (one an older
        version or a sandbox left) is quarantined on the way (``fleet_core.names``), so a
        listing always succeeds; the renames are logged."""
        roots = (root,) if root else ROOTS
        found: list[str] = []
        for name in roots:
            validate_relative_path(name)
            try:
                top_fd = os.open(self.root / name, _DIR_FLAGS)
            except OSError:
                continue  # missing, or a symlink: never followed
            try:
                paths, renamed = names.walk_regular(top_fd, name, max_depth=MAX_DEPTH)
            finally:
                os.close(top_fd)
            found.extend(paths)
            self._note_renamed(renamed)
        return sorted(found)

    def _note_renamed(self, renamed: list[names.Renamed]) -> None:
        if not renamed:
            return
        log.warning("Workspace %s: %s", self.root.name, names.renamed_note(renamed))

    def stamps(self, root: str | None = None) -> dict[str, FileStamp]:
        """Every regular file's stamp, read from its inode only (no file is opened); digests
        already computed for that exact stamp ride along."""
        found: dict[str, FileStamp] = {}
        for path, dir_fd, name in self.ordered(root):
            key = _stat_key(dir_fd, name)
            if key is not None:
                cached = self._digests.get(path)
                found[path] = FileStamp(key, cached[1] if cached and cached[0] == key else None)
        return found

    def modified_since(self, when_ns: int) -> list[str]:
        """The files a sandbox can write (outside ``READONLY_ROOTS``) modified at or after
        ``when_ns`` (epoch nanoseconds), sorted; inode stamps only, no file is read."""
        writable = (root for root in ROOTS if root not in READONLY_ROOTS)
        stamps = (self.stamps(root).items() for root in writable)
        return sorted(path for found in stamps for path, stamp in found if stamp.key[2] >= when_ns)

    def mark(self, baseline: Baseline) -> None:
        """Fill ``baseline`` with what its root holds now (see ``Baseline``)."""
        tree = self.change_tree()
        generation = tree.refresh() if tree is not None else None
        if generation is None:
            baseline.stamps = self.stamps(baseline.root)
            return
        baseline.generation, baseline.digests = generation, dict(self._digests)

    def changed_after(self, baseline: Baseline, *, limit: int) -> tuple[list[FileInfo], int]:
        """``changed_since`` for a ``Baseline``: with a change tree, only the paths it saw
        change are visited; if it lost track meanwhile (an overflow), every file is compared
        with the digests known at the baseline, and one not known then counts as changed."""
        tree = self._tree
        if baseline.generation is None:
            return self.changed_since(baseline.stamps, baseline.root, limit=limit)
        changes = None
        if tree is not None and tree.refresh() is not None:
            changes = tree.changed_since(baseline.generation)
        if tree is None or changes is None:
            known = {path: FileStamp(key, sha) for path, (key, sha) in baseline.digests.items()}
            return self.changed_since(known, baseline.root, limit=limit)
        return self._changed_among(tree, _candidates(tree, changes, baseline.root), baseline, limit)

    def _changed_among(
        self,
        tree: WorkspaceTree,
        candidates: Mapping[str, tuple[int, int, int] | None],
        baseline: Baseline,
        limit: int,
    ) -> tuple[list[FileInfo], int]:
        def stamps() -> Iterator[tuple[str, tuple[int, int, int] | None, FileStamp | None]]:
            for path in sorted(candidates):
                before = candidates[path]
                cached = baseline.digests.get(path)
                sha = cached[1] if cached is not None and cached[0] == before else None
                yield path, tree.key_of(path), None if before is None else FileStamp(before, sha)

        return self._hash_changed(stamps(), limit)

    def changed_since(
        self, before: Mapping[str, FileStamp], root: str | None = None, *, limit: int
    ) -> tuple[list[FileInfo], int]:
        """Files new or changed since ``before`` (a ``stamps`` result), sorted by path, and how
        many there are. A file whose stamp is unchanged is never read; a changed one is hashed
        (and dropped if its content is what it was). At most ``limit`` files are hashed and
        returned; the count includes the ones past the limit, which are not read."""
        walked = (
            (path, _stat_key(dir_fd, name), before.get(path))
            for path, dir_fd, name in self.ordered(root)
        )
        return self._hash_changed(walked, limit)

    def _hash_changed(
        self,
        stamps: Iterable[tuple[str, tuple[int, int, int] | None, FileStamp | None]],
        limit: int,
    ) -> tuple[list[FileInfo], int]:
        """From (path, its stamp now or None when it is no regular file, its stamp before or
        None when new): the changed files (at most ``limit`` hashed) and how many there are."""
        changed: list[FileInfo] = []
        pending = 0
        for path, key, old in stamps:
            if key is None or (old is not None and old.key == key):
                continue
            if len(changed) >= limit:
                pending += 1
                continue
            try:
                info = self.stat(path)
            except (WorkspaceFileNotFound, WorkspacePathError):
                continue  # removed or replaced meanwhile
            if old is None or old.sha256 != info.sha256:
                changed.append(info)
        return changed, len(changed) + pending

    def ordered(
        self, root: str | None = None, *, after: str | None = None
    ) -> Generator[tuple[str, int, str]]:
        """Every regular file (optionally under one root) in sorted path order, only those after
        the path ``after``: ``(path, dir_fd, name)``, the descriptor of its directory being
        open until the next item. Lazy and bounded in what it reads: the directories on the
        way are listed (subtrees wholly before ``after`` are not), no file is opened or
        stat'ed, and names the workspace cannot hold are quarantined as in ``paths``."""
        renamed: list[names.Renamed] = []
        try:
            for top in sorted((root,) if root else ROOTS):
                validate_relative_path(top)
                prefix = top + "/"
                if after is not None and not (prefix > after or after.startswith(prefix)):
                    continue  # the whole root sorts before the cursor
                try:
                    top_fd = os.open(self.root / top, _DIR_FLAGS)
                except OSError:
                    continue  # missing, or a symlink: never followed
                try:
                    inner = after if after is not None and after.startswith(prefix) else None
                    yield from _ordered_walk(top_fd, top, top_fd, top, inner, 0, renamed)
                finally:
                    os.close(top_fd)
        finally:
            self._note_renamed(renamed)

    def page(self, *, after: str | None, limit: int) -> tuple[list[FileInfo], str | None]:
        """At most ``limit`` files after the path ``after`` in path order, with size and sha256
        (only these are stat'ed and hashed), and the path to continue after (None: the last
        page)."""
        paths: list[str] = []
        more = False
        walk = self.ordered(after=after)
        try:
            for path, _dir_fd, _name in walk:
                if len(paths) == limit:
                    more = True
                    break
                paths.append(path)
        finally:
            walk.close()
        infos: list[FileInfo] = []
        for path in paths:
            try:
                infos.append(self.stat(path))
            except (WorkspaceFileNotFound, WorkspacePathError):
                continue  # removed or replaced meanwhile
        return infos, (paths[-1] if more and paths else None)

    def entry_count(self, *, stop_after: int | None = None) -> int:
        """How many entries (files, directories, links, ...) the workspace holds, as the
        sandbox's file-count quota counts them (``files/`` included); cheap: no entry is
        stat'ed where the file system reports types. ``stop_after``: stop counting past it."""
        return count_entries(self.root, stop_after=stop_after)

    def _key(self, path: str) -> tuple[int, int, int] | None:
        try:
            info = os.lstat(self.root / path)
        except OSError:
            return None
        if not stat.S_ISREG(info.st_mode):
            return None
        return (info.st_ino, info.st_size, info.st_mtime_ns)

    def _store_stream(self, handle: io.BufferedReader, label: str) -> tuple[int, str]:
        digest = hashlib.sha256()
        size = 0
        buffer = bytearray(CHUNK)
        view = memoryview(buffer)
        with self._staged(label) as out:
            while count := handle.readinto(buffer):
                size += count
                if size > self.max_file_bytes:
                    raise FileTooLarge(
                        f"'{label}' is larger than the {self.max_file_bytes:,}-byte file limit; "
                        "nothing was stored"
                    )
                chunk = view[:count]
                digest.update(chunk)
                out.write(chunk)
        return size, digest.hexdigest()

    @contextmanager
    def _staged(self, path: str) -> Iterator[BinaryIO]:
        """A locked temp file in the staging directory, renamed onto ``path`` on success and
        removed on any failure. Parents are created and opened without following links."""
        relative = validate_relative_path(path)
        parent = self._open_parent(relative, create=True, label=path)
        try:
            staging = open_staging(self.staging)
            try:
                with _temp_file(staging) as (name, handle):
                    yield handle
                    handle.flush()
                    os.replace(name, relative.name, src_dir_fd=staging, dst_dir_fd=parent)
            finally:
                os.close(staging)
        finally:
            os.close(parent)

    def _open_parent(self, relative: PurePosixPath, *, create: bool, label: str) -> int:
        """A descriptor of ``relative``'s parent directory, walked from the root one component
        at a time with ``O_NOFOLLOW`` (a symlink swapped in meanwhile is an error, not a
        detour). ``create`` makes missing directories."""
        if create:
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except FileNotFoundError:
            raise WorkspaceFileNotFound(f"No workspace file '{label}'") from None
        try:
            for part in relative.parts[:-1]:
                if create:
                    with suppress(FileExistsError):
                        os.mkdir(part, dir_fd=fd)
                try:
                    child = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    raise WorkspaceFileNotFound(f"No workspace file '{label}'") from None
                except OSError as exc:
                    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                        raise WorkspacePathError(
                            f"Workspace path '{label}': '{part}' is not a directory "
                            "(symlinks are never followed)"
                        ) from None
                    raise
                os.close(fd)
                fd = child
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _sha256(self, path: str, host: Path) -> str:
        info = host.stat()
        key = (info.st_ino, info.st_size, info.st_mtime_ns)
        cached = self._digests.get(path)
        if cached and cached[0] == key:
            return cached[1]
        digest = file_sha256(host)
        self._digests[path] = (key, digest)
        return digest


def _remove_entry(parent: int, name: str, label: str) -> None:
    try:
        mode = os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode
    except FileNotFoundError:
        raise WorkspaceFileNotFound(f"No workspace file '{label}'") from None
    if not stat.S_ISDIR(mode):
        os.unlink(name, dir_fd=parent)  # a symlink itself, never what it points to
        return
    try:
        os.rmdir(name, dir_fd=parent)
    except OSError as exc:
        if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
            raise WorkspacePathError(
                f"Workspace path '{label}' is a directory that is not empty; delete its files first"
            ) from None
        raise


# --- attach sources --------------------------------------------------------------------------


@contextmanager
def open_attach_source(source: Path) -> Iterator[io.BufferedReader]:
    """Open a host file for attaching: a regular file on a real file system only.

    The type is checked before opening (so a FIFO never blocks), the open itself is
    non-blocking and does not follow a final symlink, and the opened descriptor is checked
    again (the same inode, still regular, not on a pseudo-filesystem) against a swap meanwhile.
    Symlinks on the way are resolved first, and ``/proc``, ``/sys`` and ``/dev`` are refused by
    the resolved path and by the file system the file is on.
    """
    shown = _shown(str(source))
    real = os.path.realpath(source)
    _refuse_pseudo_path(shown, real)
    try:
        info = os.stat(real, follow_symlinks=False)
    except OSError as exc:
        raise WorkspaceFileNotFound(f"Cannot read '{shown}': {exc.strerror}") from None
    _check_source(shown, info)
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_NOCTTY | os.O_CLOEXEC
    try:
        fd = os.open(real, flags)
    except OSError as exc:
        raise WorkspaceFileNotFound(f"Cannot read '{shown}': {exc.strerror}") from None
    try:
        opened = os.fstat(fd)
        _check_source(shown, opened)
        if (opened.st_dev, opened.st_ino) != (info.st_dev, info.st_ino):
            raise InvalidInput(f"Cannot attach '{shown}': it was replaced while being opened")
        os.set_blocking(fd, True)
        handle = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with handle:
        yield handle


def _check_source(shown: str, info: os.stat_result) -> None:
    if not stat.S_ISREG(info.st_mode):
        kind = next((name for test, name in _KINDS if test(info.st_mode)), "not a regular file")
        raise InvalidInput(
            f"Cannot attach '{shown}': it is {kind}; only regular files can be attached"
        )
    fs_type = pseudo_filesystems().get(info.st_dev)
    if fs_type is not None:
        raise InvalidInput(
            f"Cannot attach '{shown}': it is on a pseudo-filesystem ({fs_type}); only regular "
            "files on a real file system can be attached"
        )


def _refuse_pseudo_path(shown: str, real: str) -> None:
    for root in _PSEUDO_ROOTS:
        if real == root or real.startswith(root + "/"):
            raise InvalidInput(
                f"Cannot attach '{shown}': it is under {root}, a pseudo-filesystem; only regular "
                "files on a real file system can be attached"
            )


def pseudo_filesystems() -> dict[int, str]:
    """Device numbers of the mounted pseudo-filesystems (proc, sysfs, devtmpfs, cgroup, ...),
    from ``/proc/self/mountinfo``, plus those of ``/proc``, ``/sys`` and ``/dev`` themselves."""
    found: dict[int, str] = {}
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                fields, _, rest = line.partition(" - ")
                parts = fields.split()
                fs_type = rest.split(" ", 1)[0]
                if len(parts) > 2 and fs_type in _PSEUDO_FS:
                    major, _, minor = parts[2].partition(":")
                    found[os.makedev(int(major), int(minor))] = fs_type
    except (OSError, ValueError):
        pass
    for root in _PSEUDO_ROOTS:
        with suppress(OSError):
            if os.path.ismount(root):  # an unmounted /sys is a plain directory of the root fs
                found.setdefault(os.stat(root).st_dev, root)
    return found


def _shown(text: str) -> str:
    return names.shown(text, 300)


# --- staging (atomic writes) -------------------------------------------------------------------


def workspaces_dir_mode() -> int:
    """0700; 0711 when the server is root, so a dedicated sandbox uid (which must search every
    parent of the directory it is given) can reach its 0700 Session directory, but no one can
    list the Sessions."""
    return 0o711 if os.geteuid() == 0 else 0o700


def prepare_workspaces(directory: Path) -> int:
    """At start: create ``<state>/workspaces/`` (not world-readable) and remove the temp files
    a killed process left in its staging directory; returns how many were removed."""
    directory.mkdir(mode=workspaces_dir_mode(), parents=True, exist_ok=True)
    _restrict(directory, workspaces_dir_mode())
    removed = sweep_staging(directory / STAGING_DIR)
    if removed:
        log.info("Removed %d temp file(s) a stopped process left in %s", removed, directory)
    return removed


def open_staging(staging: Path) -> int:
    """The staging directory (made 0700 if missing), opened without following a link."""
    staging.mkdir(mode=0o700, exist_ok=True)
    try:
        fd = os.open(staging, _DIR_FLAGS)
    except OSError as exc:
        raise WorkspacePathError(
            f"Staging directory {staging} is unusable: {exc.strerror}"
        ) from None
    info = os.fstat(fd)
    if info.st_mode & 0o077:
        os.fchmod(fd, 0o700)
    return fd


def sweep_staging(staging: Path) -> int:
    """Remove the temp files of dead writers (a live writer holds a lock on its file)."""
    try:
        fd = os.open(staging, _DIR_FLAGS)
    except OSError:
        return 0
    try:
        return sum(_sweep(fd, name) for name in os.listdir(fd) if name.startswith(TEMP_PREFIX))
    finally:
        os.close(fd)


def _sweep(staging: int, name: str) -> int:
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(name, flags, dir_fd=staging)
    except OSError:
        return 0
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if os.stat(name, dir_fd=staging, follow_symlinks=False).st_ino != os.fstat(fd).st_ino:
            return 0  # renamed into place meanwhile; the name is a new writer's now
        os.unlink(name, dir_fd=staging)
        return 1
    except OSError:  # BlockingIOError: a live writer holds it
        return 0
    finally:
        os.close(fd)


@contextmanager
def _temp_file(staging: int) -> Iterator[tuple[str, BinaryIO]]:
    """A new temp file in ``staging``, locked until it is closed (its writer's lifetime) and
    removed on any failure (after a successful rename there is nothing left to remove)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    while True:
        name = f"{TEMP_PREFIX}{secrets.token_hex(8)}"
        try:
            fd = os.open(name, flags, 0o600, dir_fd=staging)
            break
        except FileExistsError:
            continue
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        handle = os.fdopen(fd, "wb")
    except BaseException:
        os.close(fd)
        os.unlink(name, dir_fd=staging)
        raise
    try:
        with handle:
            yield name, handle
    finally:
        with suppress(FileNotFoundError):
            os.unlink(name, dir_fd=staging)


def _restrict(directory: Path, mode: int) -> None:
    """Set ``directory``'s permission bits to ``mode`` if they differ (a directory created by an
    older version, or under a lax umask); a directory we do not own is left as it is."""
    try:
        if stat.S_IMODE(os.stat(directory).st_mode) != mode:
            os.chmod(directory, mode)
    except PermissionError:
        log.warning("Cannot restrict %s to %o: not its owner", directory, mode)


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def is_probably_text(sample: bytes) -> bool:
    if b"\x00" in sample:
        return False
    try:
        sample.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start >= len(sample) - 4  # a multi-byte character cut at the end
    return True


def _basename(source: Path) -> str:
    name = source.name.replace("\\", "/").rsplit("/", 1)[-1]
    if name in ("", ".", ".."):
        raise WorkspacePathError(f"Cannot attach '{_shown(str(source))}': it has no file name")
    return names.escaped_name(name)  # the rule every name entering a workspace follows


def count_entries(root: Path, *, stop_after: int | None = None) -> int:
    """Every entry below ``root`` (links not followed, at most ``MAX_DEPTH`` levels), counted
    from directory listings; ``stop_after``: stop once past it (a count over it)."""
    try:
        root_fd = os.open(root, _DIR_FLAGS)
    except OSError:
        return 0
    count = 0
    stack: list[tuple[int, int]] = [(root_fd, 0)]
    try:
        while stack:
            dir_fd, depth = stack.pop()
            try:
                with os.scandir(dir_fd) as entries:
                    subdirs = []
                    for entry in entries:
                        count += 1
                        with suppress(OSError):
                            if depth < MAX_DEPTH and entry.is_dir(follow_symlinks=False):
                                subdirs.append(entry.name)
            except OSError:
                subdirs = []
            for name in subdirs:
                with suppress(OSError):
                    stack.append((os.open(name, _DIR_FLAGS, dir_fd=dir_fd), depth + 1))
            if dir_fd != root_fd:
                os.close(dir_fd)
            if stop_after is not None and count > stop_after:
                break
    finally:
        for dir_fd, _depth in stack:
            if dir_fd != root_fd:
                os.close(dir_fd)
        os.close(root_fd)
    return count


def count_new_entries(root: Path, paths: Iterable[str]) -> int:
    """How many entries writing ``paths`` under ``root`` would create: the files and the
    folders on their way that do not exist yet."""
    new: set[str] = set()
    for path in paths:
        parts = path.split("/")
        for depth in range(1, len(parts) + 1):
            prefix = "/".join(parts[:depth])
            if prefix not in new and not os.path.lexists(root / prefix):
                new.add(prefix)
    return len(new)


def _ordered_walk(
    dir_fd: int,
    prefix: str,
    top_fd: int,
    top: str,
    after: str | None,
    depth: int,
    renamed: list[names.Renamed],
) -> Generator[tuple[str, int, str]]:
    """``Workspace.ordered`` below one directory. Siblings are ordered by their name, a
    directory's with a ``/`` appended: exactly the order of the sorted full paths."""
    children: list[tuple[str, str, bool]] = []  # what sorts after the cursor, nothing else
    quarantined: set[str] = set()  # renamed while listed: the listing may show them again
    try:
        with os.scandir(dir_fd) as listing:
            for entry in listing:
                moves = len(renamed)
                kind = _entry_kind(dir_fd, entry, prefix, top_fd, top, renamed)
                if kind is None or kind[0] in quarantined:
                    continue
                name, is_dir = kind
                if len(renamed) > moves:
                    quarantined.add(name)
                key = f"{prefix}/{name}/" if is_dir else f"{prefix}/{name}"
                if after is not None and (
                    key <= after if not is_dir else not (key > after or after.startswith(key))
                ):
                    continue  # wholly before the cursor
                children.append((key, name, is_dir))
    except OSError:
        return
    heapq.heapify(children)  # in order, lazily: a page of a huge directory sorts little
    while children:
        key, name, is_dir = heapq.heappop(children)
        if not is_dir:
            yield key, dir_fd, name
            continue
        if depth >= MAX_DEPTH:
            continue  # as deep as ``paths`` lists
        try:
            child = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
        except OSError:
            continue  # vanished, or swapped for a link
        try:
            inner = after if after is not None and after.startswith(key) else None
            yield from _ordered_walk(child, key[:-1], top_fd, top, inner, depth + 1, renamed)
        finally:
            os.close(child)


def _entry_kind(
    dir_fd: int,
    entry: os.DirEntry[str],
    prefix: str,
    top_fd: int,
    top: str,
    renamed: list[names.Renamed],
) -> tuple[str, bool] | None:
    """(name, is a directory) of a regular file or directory to list, None otherwise; a name
    the workspace cannot hold is quarantined first (``fleet_core.names``)."""
    name = entry.name
    rel = f"{prefix}/{name}"
    try:
        if names.name_problem(name) is None and len(rel) <= MAX_PATH_CHARS:
            if entry.is_dir(follow_symlinks=False):
                return name, True
            return (name, False) if entry.is_file(follow_symlinks=False) else None
        moved = names.quarantine(dir_fd, name, rel, top_fd=top_fd, top=top)
        if moved is None:
            return None  # vanished meanwhile
        renamed.append(moved)
        if not moved.in_place:
            return None  # moved to its root: listed from there from now on
        name = moved.name
        mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    except OSError:
        return None
    if stat.S_ISDIR(mode):
        return name, True
    return (name, False) if stat.S_ISREG(mode) else None


def _stat_key(dir_fd: int, name: str) -> tuple[int, int, int] | None:
    """A regular file's (inode, size, mtime) from its directory, never following a link."""
    try:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode):
        return None
    return (info.st_ino, info.st_size, info.st_mtime_ns)


def _candidates(
    tree: WorkspaceTree, changes: Iterable[Change], root: str
) -> dict[str, tuple[int, int, int] | None]:
    """The regular files below ``root`` that ``changes`` may have touched, each with its stamp
    before the first change (None: not known, so it counts as new)."""
    found: dict[str, tuple[int, int, int] | None] = {}
    prefix = f"{root}/"
    for change in changes:
        if change.path.startswith(prefix) or change.path == root:
            if change.subtree:
                found.update(dict.fromkeys(tree.file_keys(change.path)))
            else:
                found.setdefault(change.path, change.before)
        elif change.subtree and root.startswith(f"{change.path}/"):
            found.update(dict.fromkeys(tree.file_keys(root)))  # the root itself was replaced
    return found


def render_manifest(
    workspace: Workspace, *, max_files: int, preview_chars: int, max_chars: int
) -> str:
    """What the model is told about the workspace: path, size, sha256 and a bounded preview.

    Files beyond ``max_files`` are listed by path only, and the whole text stays under
    ``max_chars`` so even a workspace of 10,000 files yields a bounded manifest.
    """
    lines: list[str] = []
    used = 0
    walk = workspace.ordered()  # lazily: files past the bounds are counted, not listed or read
    try:
        for index, (path, _dir_fd, _name) in enumerate(walk):
            entry = _manifest_entry(workspace, path, preview_chars if index < max_files else None)
            if used + len(entry) > max_chars:
                rest = _files_left(workspace, walk, listed=index)
                lines.append(f"... and {rest} more files (use workspace.tree())")
                break
            lines.append(entry)
            used += len(entry) + 1
    finally:
        walk.close()
    return "\n".join(lines) if lines else "(the workspace is empty)"


def _files_left(workspace: Workspace, walk: Iterator[tuple[str, int, str]], *, listed: int) -> int:
    """The files the manifest does not list: from the change tree's count when one tracks the
    workspace already (no walk), else by walking the rest (a child's workspace, a one-shot
    read)."""
    tree = workspace.open_tree
    if tree is not None and tree.refresh() is not None:
        return max(1, tree.regular_count(ROOTS) - listed)
    return 1 + sum(1 for _item in walk)


def _manifest_entry(workspace: Workspace, path: str, preview_chars: int | None) -> str:
    if preview_chars is None:
        return path
    info = workspace.stat(path)
    entry = f"{path}  ({info.size_bytes} bytes, sha256 {info.sha256})"
    if preview_chars <= 0:
        return entry
    sample = workspace.read(path, max_bytes=min(_TEXT_SNIFF, preview_chars * 4))
    if not is_probably_text(sample):
        return f"{entry} [binary]"
    text = sample.decode("utf-8", errors="ignore")[:preview_chars]
    preview = "\n".join("    " + line for line in text.splitlines()[:20])
    return f"{entry}\n{preview}" if preview else entry
