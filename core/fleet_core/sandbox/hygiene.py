"""What may leave a sandbox: a walk of the host workspace that measures it and cleans it.

A LocalSandbox's workspace is bind-mounted into the sandbox, so whatever sandbox code creates
lands in the host directory as is. :func:`scan_workspace` walks it without ever following a
symlink (every step is relative to an open directory fd, opened with ``O_NOFOLLOW``) and:

- **strips** setuid, setgid and sticky bits from files and directories (a file with such a bit and
  several hard links is unlinked instead, so a host file linked in is never changed);
- **removes** FIFOs, sockets and device nodes;
- makes the workspace root ``0700`` (no other local user can reach anything below it);
- **measures** the space it uses for the quota: per inode (hard links once), the larger of its
  allocated blocks and its apparent size, at least one 4 KiB block per entry (so a flood of
  empty files or directories counts too), top-level names in ``exclude`` not counted.

The host calls it before the first cell, after every cell and at teardown (then no sandbox
process is left to race with it); the quota watchdog calls it with ``sanitize=False``.

With a change-tracked tree of the workspace (``fleet_core.tracking``), :func:`clean_changes`
cleans only the paths changed since the last clean (a new directory: all of it) and takes the
measurements from the tree, so neither costs anything per untouched file; where the tree cannot
vouch for what changed, it walks everything as above.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from fleet_core import names, tracking
from fleet_core.tracking import BLOCK, Change, WorkspaceTree

log = logging.getLogger(__name__)

SPECIAL_BITS = stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX
MAX_DEPTH = 256
"""Deeper directories are not walked; the scan says so (``too_deep``) and the quota treats it
as exceeded, so nothing can be hidden below the walk."""
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_PATH_FLAGS = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass
class WorkspaceScan:
    """What one walk found (and, with ``sanitize``, changed)."""

    bytes_used: int = 0
    entries: int = 0
    too_deep: bool = False
    stripped: list[str] = field(default_factory=list)
    """Relative paths whose setuid/setgid/sticky bits were removed."""
    removed: list[str] = field(default_factory=list)
    """Relative paths unlinked: special files, and files with special bits and hard links."""
    renamed: list[names.Renamed] = field(default_factory=list)
    """Entries whose names a workspace cannot hold, quarantined (``fleet_core.names``)."""

    def renamed_note(self) -> str:
        return names.renamed_note(self.renamed)

    def over(self, limit: int) -> bool:
        return self.too_deep or self.bytes_used > limit


def scan_workspace(
    root: Path, *, sanitize: bool = True, exclude: Iterable[str] = ()
) -> WorkspaceScan:
    """Walk ``root`` (see the module docstring); a vanished root is an empty scan."""
    scan = WorkspaceScan()
    try:
        root_fd = os.open(root, _DIR_FLAGS)
    except OSError:
        return scan
    try:
        info = os.fstat(root_fd)
        scan.bytes_used += tracking.charge(info)
        if sanitize:
            _tighten_root(root_fd, info)
        _walk(root_fd, scan, sanitize=sanitize, exclude=frozenset(exclude))
    finally:
        os.close(root_fd)
    return scan


def sanitize_workspace(
    root: Path, *, label: str = "", exclude: Iterable[str] = ()
) -> WorkspaceScan:
    """:func:`scan_workspace` with cleaning, logging a warning when anything was changed."""
    return _logged(scan_workspace(root, sanitize=True, exclude=exclude), root, label)


def measure_tracked(tree: WorkspaceTree) -> WorkspaceScan | None:
    """The quota's measurements from the tree (no walk), or None when it cannot vouch."""
    if tree.refresh() is None:
        return None
    scan = WorkspaceScan()
    scan.bytes_used, scan.entries, scan.too_deep = tree.totals()
    return scan


def clean_changes(tree: WorkspaceTree, *, label: str = "") -> WorkspaceScan:
    """:func:`sanitize_workspace` over what changed since the tree's last clean (everything,
    when the tree cannot say), measured by the tree."""
    generation = tree.refresh()
    since = tree.clean_cursor
    changes = tree.changed_since(since) if generation is not None and since is not None else None
    if changes is None:
        scan = sanitize_workspace(tree.root, label=label, exclude=tree.exclude)
        tree.clean_cursor = generation  # what changed during the walk is cleaned next time
        return scan
    scan = WorkspaceScan()
    try:
        root_fd = os.open(tree.root, _DIR_FLAGS)
    except OSError:
        return scan
    try:
        _tighten_root(root_fd, os.fstat(root_fd))
        for change in changes:
            _clean_change(root_fd, change, scan)
    finally:
        os.close(root_fd)
    tree.clean_cursor = generation  # this clean's own renames and chmods are seen again: clean
    tree.refresh()
    scan.bytes_used, scan.entries, scan.too_deep = tree.totals()
    return _logged(scan, tree.root, label)


def _clean_change(root_fd: int, change: Change, scan: WorkspaceScan) -> None:
    """Clean one changed entry (with ``change.subtree``, everything below it) as the whole walk
    would: its directory is opened from the root one component at a time, never by a link."""
    parts = change.path.split("/")
    stack: list[tuple[int, str, list[str], bool]] = [(root_fd, "", [], True)]
    for index, part in enumerate(parts[:-1]):
        try:
            fd = os.open(part, _DIR_FLAGS, dir_fd=stack[-1][0])
        except OSError:
            _close_stack(stack, root_fd)
            return  # gone meanwhile: nothing left to clean
        stack.append((fd, "/".join(parts[: index + 1]) + "/", [], True))
    parent_fd, prefix, _names, _counted = stack[-1]
    if change.subtree:
        stack[-1] = (parent_fd, prefix, [parts[-1]], True)
        _walk_stack(root_fd, stack, scan, sanitize=True, exclude=frozenset())
        return
    try:
        dir_fd, name, rel = parent_fd, parts[-1], change.path
        if len(stack) > 1:
            dir_fd, name, rel = _quarantined(dir_fd, name, rel, stack[1], scan)
        child = _visit(dir_fd, name, rel, scan, set(), sanitize=True, charge=False)
        if child is not None:
            os.close(child)
    finally:
        _close_stack(stack, root_fd)


def _close_stack(stack: list[tuple[int, str, list[str], bool]], root_fd: int) -> None:
    for dir_fd, *_rest in stack:
        if dir_fd != root_fd:
            os.close(dir_fd)


def _logged(scan: WorkspaceScan, root: Path, label: str) -> WorkspaceScan:
    if scan.stripped or scan.removed:
        log.warning(
            "sandbox %s: stripped setuid/setgid/sticky bits from %d path(s) %s and removed %d "
            "special file(s) %s in %s",
            label or "-",
            len(scan.stripped),
            [names.shown(path) for path in scan.stripped[:10]],
            len(scan.removed),
            [names.shown(path) for path in scan.removed[:10]],
            root,
        )
    if scan.renamed:
        log.warning("sandbox %s: %s", label or "-", scan.renamed_note())
    return scan


def _walk(root_fd: int, scan: WorkspaceScan, *, sanitize: bool, exclude: frozenset[str]) -> None:
    """Depth-first; only the directories on the current path are open."""
    stack = [(root_fd, "", names.entry_names(root_fd), True)]
    _walk_stack(root_fd, stack, scan, sanitize=sanitize, exclude=exclude)


def _walk_stack(
    root_fd: int,
    stack: list[tuple[int, str, list[str], bool]],
    scan: WorkspaceScan,
    *,
    sanitize: bool,
    exclude: frozenset[str],
) -> None:
    """Walk what ``stack`` (the open directories from the root down, each with the names left
    to visit) holds; closes every directory but the root."""
    seen: set[tuple[int, int]] = set()
    try:
        while stack:
            dir_fd, prefix, entries, counted = stack[-1]
            if not entries:
                stack.pop()
                if dir_fd != root_fd:
                    os.close(dir_fd)
                continue
            name = entries.pop()
            rel = f"{prefix}{name}"
            if sanitize and len(stack) > 1:
                dir_fd, name, rel = _quarantined(dir_fd, name, rel, stack[1], scan)
            charge = counted and not (prefix == "" and name in exclude)
            child = _visit(dir_fd, name, rel, scan, seen, sanitize=sanitize, charge=charge)
            if child is None:
                continue
            if len(stack) > MAX_DEPTH:
                os.close(child)
                scan.too_deep = True
                continue
            stack.append((child, rel + "/", names.entry_names(child), charge))
    finally:
        _close_stack(stack, root_fd)


def _quarantined(
    dir_fd: int, name: str, rel: str, top: tuple[int, str, list[str], bool], scan: WorkspaceScan
) -> tuple[int, str, str]:
    """Rename an entry whose name a workspace cannot hold (``fleet_core.names``); returns the
    directory, name and path to go on with."""
    top_fd, top_prefix = top[0], top[1].rstrip("/")
    try:
        moved = names.quarantine(dir_fd, name, rel, top_fd=top_fd, top=top_prefix)
    except OSError as exc:
        log.warning("could not rename %s: %s", names.shown(rel), exc)
        return dir_fd, name, rel
    if moved is None:
        return dir_fd, name, rel
    scan.renamed.append(moved)
    return (dir_fd if moved.in_place else top_fd), moved.name, moved.new


def _visit(
    dir_fd: int,
    name: str,
    rel: str,
    scan: WorkspaceScan,
    seen: set[tuple[int, int]],
    *,
    sanitize: bool,
    charge: bool,
) -> int | None:
    """Account for one entry and clean it; returns an open fd when it is a directory to enter."""
    try:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return None
    mode = info.st_mode
    scan.entries += 1
    if stat.S_ISDIR(mode):
        child = tracking.open_dir(dir_fd, name, info)
        if child is not None and sanitize and mode & SPECIAL_BITS:
            _strip(child, info, rel, scan)
        if charge:
            scan.bytes_used += tracking.charge(info)
        return child
    if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
        if sanitize:
            _unlink(dir_fd, name, rel, scan)
        elif charge:
            scan.bytes_used += BLOCK
        return None
    if sanitize and stat.S_ISREG(mode) and mode & SPECIAL_BITS:
        if info.st_nlink > 1:
            _unlink(dir_fd, name, rel, scan)
            return None
        _strip_entry(dir_fd, name, rel, scan)
    key = (info.st_dev, info.st_ino)
    if charge and key not in seen:
        seen.add(key)
        scan.bytes_used += tracking.charge(info)
    return None


def _strip_entry(dir_fd: int, name: str, rel: str, scan: WorkspaceScan) -> None:
    try:
        fd = os.open(name, _PATH_FLAGS, dir_fd=dir_fd)
    except OSError:
        return
    try:
        info = os.fstat(fd)
        if stat.S_ISREG(info.st_mode) and info.st_nlink == 1:
            _strip(fd, info, rel, scan)
    finally:
        os.close(fd)


def _strip(fd: int, info: os.stat_result, rel: str, scan: WorkspaceScan) -> None:
    """Clear the special bits of the inode behind ``fd`` (an ``O_PATH`` or directory fd, never
    a symlink): ``chmod`` through ``/proc/self/fd`` works for ``O_PATH`` fds and any owner."""
    mode = stat.S_IMODE(info.st_mode)
    if not mode & SPECIAL_BITS:
        return
    try:
        os.chmod(f"/proc/self/fd/{fd}", mode & ~SPECIAL_BITS)
    except OSError as exc:
        log.warning("could not strip the special bits of %s: %s", rel, exc)
        return
    scan.stripped.append(rel)


def _unlink(dir_fd: int, name: str, rel: str, scan: WorkspaceScan) -> None:
    with contextlib.suppress(FileNotFoundError):
        try:
            os.unlink(name, dir_fd=dir_fd)
        except OSError as exc:
            log.warning("could not remove %s from the workspace: %s", rel, exc)
            return
        scan.removed.append(rel)


def _tighten_root(root_fd: int, info: os.stat_result) -> None:
    """The workspace root is private to its owner: ``0700``, no special bits."""
    mode = stat.S_IMODE(info.st_mode)
    wanted = mode & 0o700 | 0o700
    if mode != wanted:
        with contextlib.suppress(OSError):
            os.fchmod(root_fd, wanted)
