"""The one rule for the names a workspace can hold, and what becomes of a name it cannot.

A workspace path is shown in editors, terminals, JSON and SQL, so a name may not hold what those
cannot carry or would act on: C0 and C1 control characters, DEL, a backslash, or bytes that are
not UTF-8 (Python hands them over as lone surrogates). Nor may a whole path be longer than
:data:`MAX_PATH_CHARS`.

Whatever writes a file under a name outside this rule (model code in a sandbox, a child agent, a
Daytona sandbox, a file attached from disk, or an older fleet-lsp) does not make the Session
unusable: the file is **quarantined**, i.e. renamed in place to :func:`escaped_name` (each such
character as ``%XX`` of its bytes; ``x\\x1b.txt`` becomes ``x%1B.txt``), or, when the path is
still too long, moved to its root as ``<short name>-<digest>``. Nothing is lost and the caller
says what was renamed. Every step goes through directory descriptors opened without following
links, so a symlink swapped in meanwhile moves nothing from outside the workspace.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import stat
from dataclasses import dataclass

MAX_PATH_CHARS = 1024
NAME_MAX_BYTES = 255
_UNREPRESENTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\\\ud800-\udfff]")
_KEEP_CHARS = 64  # of a long name, when it is moved to its root under a digest
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True, slots=True)
class Renamed:
    """One quarantined entry: where it was and where it is now (workspace-relative)."""

    old: str
    new: str

    def describe(self) -> str:
        return f"'{shown(self.old)}' -> '{self.new}'"

    @property
    def in_place(self) -> bool:
        """Still in the directory it was found in (False: moved to its root)."""
        return self.new.rpartition("/")[0] == self.old.rpartition("/")[0]

    @property
    def name(self) -> str:
        """Its name now."""
        return self.new.rpartition("/")[2]


def renamed_note(renamed: list[Renamed]) -> str:
    """What the model, the trace and the log are told of quarantined entries ('' for none)."""
    if not renamed:
        return ""
    listed = ", ".join(item.describe() for item in renamed[:10])
    more = f" and {len(renamed) - 10} more" if len(renamed) > 10 else ""
    return (
        f"fleet: renamed {len(renamed)} workspace entr{'y' if len(renamed) == 1 else 'ies'} "
        "whose names a workspace cannot hold (control characters, backslashes, bytes that are "
        f"not UTF-8, or a path over {MAX_PATH_CHARS} characters): {listed}{more}"
    )


def has_unrepresentable(text: str) -> bool:
    """True when ``text`` holds a control character, DEL, a backslash or an undecodable byte."""
    return _UNREPRESENTABLE.search(text) is not None


def name_problem(name: str) -> str | None:
    """Why one path segment cannot be a workspace name, or None when it can."""
    if _UNREPRESENTABLE.search(name):
        return "control characters, backslashes or bytes that are not UTF-8"
    if len(name.encode("utf-8")) > NAME_MAX_BYTES:
        return f"a name longer than {NAME_MAX_BYTES} bytes"
    return None


def escaped_name(name: str) -> str:
    """``name`` with each unrepresentable character as ``%XX`` of its bytes, at most 255 bytes."""
    escaped = _UNREPRESENTABLE.sub(_percent, name)
    if len(escaped.encode("utf-8")) <= NAME_MAX_BYTES:
        return escaped
    return short_name(escaped, escaped)


def short_name(name: str, seed: str) -> str:
    """A bounded stand-in for ``name``: its first characters, a digest of ``seed``, its suffix."""
    stem, dot, suffix = name.rpartition(".")
    if not dot or len(suffix) > 16:
        stem, suffix = name, ""
    digest = hashlib.sha256(seed.encode("utf-8", "surrogateescape")).hexdigest()[:12]
    return f"{stem[:_KEEP_CHARS]}-{digest}" + (f".{suffix}" if suffix else "")


def safe_path(rel: str) -> str:
    """The workspace path ``rel`` (``<root>/...``) would be quarantined to, if nothing collides:
    each segment escaped, or its root plus a short name when the result is still too long."""
    top, _slash, rest = rel.partition("/")
    escaped = "/".join([top, *(escaped_name(part) for part in rest.split("/"))]) if rest else top
    if len(escaped) <= MAX_PATH_CHARS:
        return escaped
    return f"{top}/{short_name(escaped.rpartition('/')[2], rel)}"


def shown(text: str, limit: int = 200) -> str:
    """Text safe to quote in a message: escapes for every control and undecodable character."""
    return _UNREPRESENTABLE.sub(_visible, text[:limit]) + ("..." if len(text) > limit else "")


def quarantine(dir_fd: int, name: str, rel: str, *, top_fd: int, top: str) -> Renamed | None:
    """Rename the entry ``name`` of ``dir_fd`` (at workspace path ``rel``, under the root
    ``top`` opened as ``top_fd``) to a name the workspace can hold; None when it already can,
    or when it vanished meanwhile."""
    parent = rel.rpartition("/")[0]
    if name_problem(name) is None and len(rel) <= MAX_PATH_CHARS:
        return None
    new_name, target_fd, target_dir = escaped_name(name), dir_fd, parent
    if len(f"{parent}/{new_name}") > MAX_PATH_CHARS:
        new_name, target_fd, target_dir = short_name(new_name, rel), top_fd, top
    free = _free_name(target_fd, new_name)
    try:
        os.rename(name, free, src_dir_fd=dir_fd, dst_dir_fd=target_fd)
    except FileNotFoundError:
        return None
    return Renamed(old=rel, new=f"{target_dir}/{free}")


def walk_regular(root_fd: int, top: str, *, max_depth: int) -> tuple[list[str], list[Renamed]]:
    """Every regular file below the root ``top`` (opened as ``root_fd``), sorted, quarantining
    names the workspace cannot hold on the way; symlinks and other types are skipped, and so is
    whatever lies deeper than ``max_depth`` directories."""
    found: set[str] = set()
    renamed: list[Renamed] = []
    stack: list[tuple[int, str, int]] = [(root_fd, top, 0)]
    try:
        while stack:
            dir_fd, prefix, depth = stack.pop()
            try:
                for name in entry_names(dir_fd):
                    child = _visit(dir_fd, name, prefix, root_fd, top, found, renamed)
                    if child is None:
                        continue
                    if depth >= max_depth:
                        os.close(child[0])
                        continue
                    stack.append((child[0], child[1], depth + 1))
            finally:
                if dir_fd != root_fd:
                    os.close(dir_fd)
    finally:
        for dir_fd, _prefix, _depth in stack:
            if dir_fd != root_fd:
                os.close(dir_fd)
    return sorted(found), renamed


def _visit(
    dir_fd: int,
    name: str,
    prefix: str,
    top_fd: int,
    top: str,
    found: set[str],
    renamed: list[Renamed],
) -> tuple[int, str] | None:
    """Record one entry; an open descriptor and its path when it is a directory to enter."""
    rel = f"{prefix}/{name}"
    try:
        moved = quarantine(dir_fd, name, rel, top_fd=top_fd, top=top)
    except OSError:
        return None  # could not be renamed (e.g. a read-only input): not listed
    if moved is not None:
        renamed.append(moved)
        dir_fd, name, rel = (dir_fd if moved.in_place else top_fd), moved.name, moved.new
    try:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        if stat.S_ISREG(info.st_mode):
            found.add(rel)
        elif stat.S_ISDIR(info.st_mode):
            return os.open(name, _DIR_FLAGS, dir_fd=dir_fd), rel
    except OSError:
        pass  # vanished or swapped meanwhile
    return None


def entry_names(dir_fd: int) -> list[str]:
    """The names in the directory open as ``dir_fd`` ([] when it cannot be read)."""
    try:
        with os.scandir(dir_fd) as entries:
            return [entry.name for entry in entries]
    except OSError:
        return []


def _free_name(dir_fd: int, name: str) -> str:
    """``name``, or ``name`` with ``-2``, ``-3``, ... before its suffix if that is taken."""
    stem, dot, suffix = name.rpartition(".")
    if not dot or not stem:
        stem, suffix = name, ""
    candidate, number = name, 1
    while _exists(dir_fd, candidate):
        number += 1
        candidate = f"{stem}-{number}" + (f".{suffix}" if suffix else "")
    return candidate


def _exists(dir_fd: int, name: str) -> bool:
    with contextlib.suppress(FileNotFoundError):
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        return True
    return False


def _percent(match: re.Match[str]) -> str:
    char = match.group()
    data = char.encode("utf-8", "surrogateescape")
    return "".join(f"%{byte:02X}" for byte in data)


def _visible(match: re.Match[str]) -> str:
    char = match.group()
    if "\udc80" <= char <= "\udcff":
        return f"\\x{ord(char) - 0xDC00:02x}"
    if char == "\\":
        return "\\\\"
    return char.encode("unicode_escape").decode("ascii")
