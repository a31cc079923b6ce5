"""A Session's workspace on the host: path rules, streamed attach, bounded reads, manifest.

Layout: ``<root>/{files,artifacts,memory,skills}/...``. Every path from a client, a model or a
sandbox is a relative POSIX path under one of those roots; symlinks and non-regular files are
refused everywhere and never followed.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from fleet_core.errors import (
    FileTooLarge,
    InvalidInput,
    WorkspaceFileNotFound,
    WorkspacePathError,
)

ROOTS = ("files", "artifacts", "memory", "skills")
CHUNK = 1 << 20
MAX_PATH_CHARS = 1024
_SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_TEXT_SNIFF = 8192


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


def validate_relative_path(path: str, roots: tuple[str, ...] = ROOTS) -> PurePosixPath:
    """Check a workspace path's syntax: relative POSIX, known root, no ``..``/control chars."""
    if not isinstance(path, str) or not path:
        raise WorkspacePathError("Workspace path is empty")
    shown = path[:200].encode("unicode_escape").decode()
    if len(path) > MAX_PATH_CHARS:
        raise WorkspacePathError(f"Workspace path is longer than {MAX_PATH_CHARS} characters")
    if _CONTROL.search(path):
        raise WorkspacePathError(f"Workspace path '{shown}' contains NUL or control characters")
    if "\\" in path:
        raise WorkspacePathError(f"Workspace path '{shown}' contains a backslash; use '/'")
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


class Workspace:
    """File operations on one Session's workspace directory."""

    def __init__(self, root: Path, *, max_file_bytes: int, max_read_bytes: int) -> None:
        self.root = root
        self.max_file_bytes = max_file_bytes
        self.max_read_bytes = max_read_bytes
        self._digests: dict[str, tuple[tuple[int, int, int], str]] = {}

    def ensure_layout(self) -> None:
        for name in ROOTS:
            directory = self.root / name
            if directory.is_symlink():
                raise WorkspacePathError(f"Workspace root '{name}/' is a symlink; refusing it")
            directory.mkdir(parents=True, exist_ok=True)

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
        """Stream a local file into ``files/<basename>`` (or ``target``), hashing on the way."""
        target = target or f"files/{_basename(source)}"
        destination = self.resolve(target, must_exist=False)
        try:
            handle = open(source, "rb")  # noqa: SIM115 - closed below
        except OSError as exc:
            raise WorkspaceFileNotFound(f"Cannot read '{source}': {exc.strerror}") from None
        with handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise InvalidInput(f"'{source}' is not a regular file")
            size, digest = self._store_stream(handle, destination, target)
        return FileInfo(target, size, digest)

    def write(self, path: str, data: bytes) -> FileInfo:
        if len(data) > self.max_file_bytes:
            raise FileTooLarge(
                f"'{path}' would be {len(data):,} bytes; the limit is {self.max_file_bytes:,}"
            )
        destination = self.resolve(path, must_exist=False)
        destination.parent.mkdir(parents=True, exist_ok=True)
        self.resolve(path, must_exist=False)  # re-check: parents now exist and are directories
        with _atomic_file(destination) as (handle, _tmp):
            handle.write(data)
        return FileInfo(path, len(data), hashlib.sha256(data).hexdigest())

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
        self.resolve(path).unlink()
        self._digests.pop(path, None)

    def tree(self, root: str | None = None) -> list[FileInfo]:
        """Every regular file (optionally under one root), sorted; symlinks are skipped."""
        return [self.stat(path) for path in self.paths(root)]

    def paths(self, root: str | None = None) -> list[str]:
        roots = (root,) if root else ROOTS
        found: list[str] = []
        for name in roots:
            validate_relative_path(name)
            base = self.root / name
            if base.is_dir() and not base.is_symlink():
                found.extend(_walk_regular(base, name))
        return sorted(found)

    def _store_stream(
        self, handle: io.BufferedIOBase, destination: Path, label: str
    ) -> tuple[int, str]:
        destination.parent.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256()
        size = 0
        buffer = bytearray(CHUNK)
        view = memoryview(buffer)
        with _atomic_file(destination) as (out, _tmp):
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

    def _sha256(self, path: str, host: Path) -> str:
        info = host.stat()
        key = (info.st_ino, info.st_size, info.st_mtime_ns)
        cached = self._digests.get(path)
        if cached and cached[0] == key:
            return cached[1]
        digest = file_sha256(host)
        self._digests[path] = (key, digest)
        return digest


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
    if name in ("", ".", "..") or _CONTROL.search(name):
        raise WorkspacePathError(f"Cannot attach '{source}': it has no usable file name")
    return name


def _walk_regular(base: Path, prefix: str) -> list[str]:
    found: list[str] = []
    with os.scandir(base) as entries:
        for entry in entries:
            name = f"{prefix}/{entry.name}"
            if entry.is_symlink():
                continue
            if entry.is_dir(follow_symlinks=False):
                found.extend(_walk_regular(Path(entry.path), name))
            elif entry.is_file(follow_symlinks=False):
                found.append(name)
    return found


@contextmanager
def _atomic_file(destination: Path) -> Iterator[tuple[BinaryIO, Path]]:
    """Write to a temp file beside the destination; rename on success, remove on any failure."""
    fd, name = tempfile.mkstemp(prefix=".fleet-", dir=destination.parent)
    tmp = Path(name)
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle, tmp
        os.replace(tmp, destination)
    finally:
        tmp.unlink(missing_ok=True)


def render_manifest(
    workspace: Workspace, *, max_files: int, preview_chars: int, max_chars: int
) -> str:
    """What the model is told about the workspace: path, size, sha256 and a bounded preview.

    Files beyond ``max_files`` are listed by path only, and the whole text stays under
    ``max_chars`` so even a workspace of 10,000 files yields a bounded manifest.
    """
    paths = workspace.paths()
    if not paths:
        return "(the workspace is empty)"
    lines: list[str] = []
    used = 0
    for index, path in enumerate(paths):
        entry = _manifest_entry(workspace, path, preview_chars if index < max_files else None)
        if used + len(entry) > max_chars:
            lines.append(f"... and {len(paths) - index} more files (use workspace.tree())")
            break
        lines.append(entry)
        used += len(entry) + 1
    return "\n".join(lines)


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
