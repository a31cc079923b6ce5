"""A workspace's entries kept current from inotify, so a walk visits only what changed.

Without it every sandbox hygiene walk and every quota measurement stats every entry of the
workspace, so a Turn's fixed cost grows with files it never touched. A ``WorkspaceTree`` walks
the workspace once (``O_NOFOLLOW`` at every step, as the hygiene walk does), watching every
directory it enters; from then on ``refresh()`` reads the kernel's events and re-stats only the
paths they name. A directory created or moved in is watched as soon as its event is read and
then walked whole, so entries made in it before the watch existed are found too.

It keeps what the hygiene walk measures (entries; bytes for the quota, hard links once, top-level
names in ``exclude`` not charged; whether the tree goes deeper than the walk) and a bounded log
of changed paths, numbered by generation: ``changed_since(generation)`` says which paths a
consumer has not seen yet, or ``None`` when the tree cannot vouch for that (the kernel's queue
overflowed, a watch could not be added, the log outgrew its bound); the consumer then walks
everything, as it would without a tree. ``open`` returns ``None`` where inotify is unavailable
(no instance left, another OS).
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import os
import stat
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from fleet_core import names

log = logging.getLogger(__name__)

BLOCK: Final = 4096
MAX_DEPTH: Final = 256
"""Directories deeper than this are listed but not entered (``too_deep``)."""
MAX_LOG: Final = 100_000
"""Changed paths kept for consumers; past it the oldest are dropped and their consumers walk."""
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK

try:  # Linux only; elsewhere there is no tree and every walk is whole
    import inotify_simple  # type: ignore[import-untyped]
except (ImportError, OSError):  # pragma: no cover - not Linux
    inotify_simple = None

if inotify_simple is not None:
    _flags = inotify_simple.flags
    _MASK = int(
        _flags.CREATE
        | _flags.DELETE
        | _flags.MOVED_FROM
        | _flags.MOVED_TO
        | _flags.ATTRIB
        | _flags.MODIFY
        | _flags.CLOSE_WRITE
        | _flags.ONLYDIR
    )
    _NEW_DIR = int(_flags.CREATE | _flags.MOVED_TO)
    _GONE = int(_flags.DELETE | _flags.MOVED_FROM)
    _OVERFLOW = int(_flags.Q_OVERFLOW)
    _IGNORED = int(_flags.IGNORED)
    _ISDIR = int(_flags.ISDIR)


def charge(info: os.stat_result) -> int:
    """What one inode costs the quota: its blocks or apparent size, at least one block."""
    return max(info.st_blocks * 512, info.st_size, BLOCK)


Key = tuple[int, int, int]
"""A regular file's stamp: (inode, size, mtime in ns)."""


@dataclass(frozen=True, slots=True)
class Change:
    """A path that changed; ``subtree``: everything below it may have changed too.
    ``before``: the file's stamp before its first change in the range (None: it was no
    regular file, or that is not known)."""

    path: str
    subtree: bool
    before: Key | None = None


@dataclass(slots=True)
class _Entry:
    mode: int
    inode: tuple[int, int]
    charge: int
    counted: bool
    key: Key


class WorkspaceTree:
    """See the module docstring. Thread-safe; ``close()`` releases the inotify instance."""

    def __init__(self, root: Path, inotify: Any, *, exclude: frozenset[str]) -> None:
        self.root = root
        self.exclude = exclude
        self._inotify = inotify
        self._lock = threading.Lock()
        self._entries: dict[str, _Entry] = {}
        self._children: dict[str, set[str]] = {"": set()}
        self._inodes: dict[tuple[int, int], list[int]] = {}  # counted inode -> [links, charge]
        self._other_bytes = 0
        self._inode_bytes = 0
        self._regular: dict[str, int] = {}  # top-level name -> regular files below it
        self._deep: set[str] = set()  # directories listed but not entered
        self._watches: dict[int, str] = {}  # watch descriptor -> directory path
        self._log: list[tuple[int, Change]] = []
        self._generation = 0
        self._floor = 0  # changed_since(g) with g < floor cannot be answered
        self._stale = True  # the next refresh walks everything
        self._blind = False  # closed, or cannot track: never vouches again
        self.clean_cursor: int | None = None
        """The generation the sandbox hygiene last cleaned up to (``sandbox.hygiene``)."""

    @classmethod
    def open(cls, root: Path, *, exclude: frozenset[str] = frozenset()) -> WorkspaceTree | None:
        """A tree of ``root`` (walked at the first ``refresh``), or None without inotify."""
        if inotify_simple is None:  # pragma: no cover - not Linux
            return None
        try:
            inotify = inotify_simple.INotify(nonblocking=True)
        except OSError as exc:  # e.g. no inotify instance left for this user
            log.info("no change tracking for %s (%s); walks stay whole", root, exc)
            return None
        return cls(root, inotify, exclude=exclude)

    # -- what consumers read ------------------------------------------------------------------

    def refresh(self) -> int | None:
        """Apply every pending event (after an overflow: walk everything again); returns the
        generation the tree is now at, or None when it cannot track this workspace at all."""
        with self._lock:
            if self._blind:
                return None
            self._drain()
            if self._stale:
                self._rebuild()
            return None if self._blind else self._generation

    def changed_since(self, generation: int) -> list[Change] | None:
        """The paths changed after ``generation`` (parents before children, each at most once,
        none below a changed subtree), or None when the tree cannot say (walk everything)."""
        with self._lock:
            if self._blind or self._stale or generation < self._floor:
                return None
            start = bisect.bisect_right(self._log, generation, key=lambda item: item[0])
            return _collapsed(change for _gen, change in self._log[start:])

    def totals(self) -> tuple[int, int, bool]:
        """(bytes charged, entries, too deep) as the hygiene walk measures them."""
        with self._lock:
            root = 0
            with contextlib.suppress(OSError):
                root = charge(os.stat(self.root, follow_symlinks=False))
            used = root + self._other_bytes + self._inode_bytes
            return used, len(self._entries), bool(self._deep)

    def regular_count(self, tops: Iterable[str]) -> int:
        """How many regular files lie below the top-level directories ``tops``."""
        with self._lock:
            return sum(self._regular.get(top, 0) for top in tops)

    def key_of(self, path: str) -> Key | None:
        """The regular file's stamp as last refreshed (None: no regular file there)."""
        with self._lock:
            entry = self._entries.get(path)
            return entry.key if entry is not None and stat.S_ISREG(entry.mode) else None

    def file_keys(self, top: str) -> dict[str, Key]:
        """Every regular file below the directory ``top``: its stamp (a walk of the index)."""
        with self._lock:
            found: dict[str, Key] = {}
            stack = [top]
            while stack:
                path = stack.pop()
                for name in self._children.get(path, ()):
                    child = f"{path}/{name}"
                    entry = self._entries[child]
                    if stat.S_ISREG(entry.mode):
                        found[child] = entry.key
                    elif stat.S_ISDIR(entry.mode):
                        stack.append(child)
            return found

    def close(self) -> None:
        with self._lock:
            self._go_blind()

    def _go_blind(self) -> None:
        """Stop tracking for good (the instance is released): every consumer walks."""
        if not self._blind:
            self._blind = True
            self._inotify.close()
            self._watches.clear()

    # -- events -------------------------------------------------------------------------------

    def _drain(self) -> None:
        """Read every pending event, then apply each changed path once (its events merged),
        grouped by directory so each directory is opened once."""
        pending: dict[tuple[int, str], int] = {}  # (watch, name) -> the events' masks merged
        while not self._stale:
            try:
                events = list(self._inotify.read(timeout=0))
            except OSError as exc:  # pragma: no cover - a broken instance
                log.warning("reading the workspace's change events failed: %s", exc)
                self._go_blind()
                return
            if not events:
                break
            for event in events:
                if event.mask & _OVERFLOW:
                    self._stale = True  # the kernel dropped events: walk everything
                elif event.mask & _IGNORED:
                    self._watches.pop(event.wd, None)
                elif event.name:  # the directory itself is reported by its parent, by name
                    key = (event.wd, event.name)
                    pending[key] = pending.get(key, 0) | event.mask
        if self._stale:
            return
        by_directory: dict[int, list[tuple[str, int]]] = {}
        for (wd, name), mask in pending.items():
            by_directory.setdefault(wd, []).append((name, mask))
        for wd, changed in by_directory.items():
            self._apply_directory(wd, changed)

    def _apply_directory(self, wd: int, changed: list[tuple[str, int]]) -> None:
        directory = self._watches.get(wd)
        if directory is None:
            return  # no longer in the tree (a walk of what replaced it covers its paths)
        gone_dirs = [name for name, mask in changed if mask & _ISDIR and mask & _GONE]
        for name in gone_dirs:
            self._unwatch(f"{directory}/{name}" if directory else name)
        if self._watches.get(wd) != directory:
            return  # the directory itself left the tree with one of those
        dir_fd = self._open_dir_path(directory)
        try:
            for name, mask in changed:
                path = f"{directory}/{name}" if directory else name
                subtree = bool(mask & _ISDIR and mask & (_NEW_DIR | _GONE))
                self._apply(dir_fd, path, subtree=subtree)
            if (
                directory
                and dir_fd is not None
                and any(m & (_NEW_DIR | _GONE) for _n, m in changed)
            ):
                self._refresh_own_entry(directory)  # entries came or went: its size may change
        finally:
            if dir_fd is not None:
                os.close(dir_fd)

    def _refresh_own_entry(self, path: str) -> None:
        entry = self._entries.get(path)
        if entry is None or not stat.S_ISDIR(entry.mode):
            return
        parent_fd = self._open_dir_path(path.rpartition("/")[0])
        try:
            self._restat_dir(parent_fd, path, entry)
        finally:
            if parent_fd is not None:
                os.close(parent_fd)

    def _apply(self, parent_fd: int | None, path: str, *, subtree: bool) -> None:
        """Bring ``path`` (in the directory open as ``parent_fd``; None: it is gone), and with
        ``subtree`` everything below it, up to date, and log it."""
        old = self._entries.get(path)
        before = old.key if old is not None and stat.S_ISREG(old.mode) else None
        if not subtree and old is not None and stat.S_ISDIR(old.mode):
            subtree = not self._restat_dir(parent_fd, path, old)
        if subtree or old is None or not stat.S_ISDIR(old.mode):
            self._remove(path)
            if parent_fd is not None:
                self._add(parent_fd, path, walk=True)
        self._record(Change(path, subtree, before))

    def _restat_dir(self, parent_fd: int | None, path: str, old: _Entry) -> bool:
        """A directory's own change (its mode, say): update its entry alone; False when it is
        no longer that directory (then its subtree is walked again)."""
        try:
            if parent_fd is None:
                return False
            info = os.stat(path.rpartition("/")[2], dir_fd=parent_fd, follow_symlinks=False)
        except OSError:
            return False
        if not stat.S_ISDIR(info.st_mode) or (info.st_dev, info.st_ino) != old.inode:
            return False
        self._count(old, -1, path)
        old.mode, old.charge = info.st_mode, charge(info)
        self._count(old, +1, path)
        return True

    def _record(self, change: Change) -> None:
        self._generation += 1
        self._log.append((self._generation, change))
        if len(self._log) > MAX_LOG:
            drop = len(self._log) // 2
            self._floor = self._log[drop][0]
            del self._log[:drop]

    # -- the index ----------------------------------------------------------------------------

    def _rebuild(self) -> None:
        for wd in list(self._watches):
            with contextlib.suppress(OSError):
                self._inotify.rm_watch(wd)
        self._watches.clear()
        self._entries.clear()
        self._children = {"": set()}
        self._inodes.clear()
        self._regular.clear()
        self._other_bytes = 0
        self._inode_bytes = 0
        self._deep.clear()
        self._stale = False
        self._generation += 1
        self._floor = self._generation  # every consumer walks once more
        self._log.clear()
        try:
            root_fd = os.open(self.root, _DIR_FLAGS)
        except OSError:
            self._stale = True  # no workspace yet: walk again next time
            return
        try:
            if not self._watch(root_fd, ""):
                return
            self._walk(root_fd, "")
        finally:
            os.close(root_fd)

    def _walk(self, dir_fd: int, path: str) -> None:
        """Index and watch everything below the directory ``path`` (open as ``dir_fd``)."""
        stack: list[tuple[int, str]] = [(dir_fd, path)]
        try:
            while stack:
                fd, prefix = stack.pop()
                try:
                    for name in names.entry_names(fd):
                        child = f"{prefix}/{name}" if prefix else name
                        opened = self._add(fd, child, walk=False)
                        if opened is not None:
                            stack.append((opened, child))
                finally:
                    if fd != dir_fd:
                        os.close(fd)
        finally:
            for fd, _prefix in stack:
                if fd != dir_fd:
                    os.close(fd)

    def _add(self, parent_fd: int, path: str, *, walk: bool) -> int | None:
        """Index one entry; a directory to enter is watched and returned open (``walk``: and
        walked here, then closed)."""
        name = path.rpartition("/")[2]
        try:
            info = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
        except OSError:
            return None
        parent = path.rpartition("/")[0]
        counted = path.partition("/")[0] not in self.exclude
        entry = _Entry(
            mode=info.st_mode,
            inode=(info.st_dev, info.st_ino),
            charge=_charge_of(info),
            counted=counted,
            key=(info.st_ino, info.st_size, info.st_mtime_ns),
        )
        self._entries[path] = entry
        self._children.setdefault(parent, set()).add(name)
        self._count(entry, +1, path)
        if not stat.S_ISDIR(info.st_mode):
            return None
        self._children.setdefault(path, set())
        if path.count("/") + 1 > MAX_DEPTH:
            self._deep.add(path)
            return None
        fd = open_dir(parent_fd, name, info)
        if fd is None:
            return None
        if not self._watch(fd, path):
            os.close(fd)
            return None
        if walk:
            try:
                self._walk(fd, path)
            finally:
                os.close(fd)
            return None
        return fd

    def _remove(self, path: str) -> None:
        """Forget ``path`` and everything below it."""
        stack = [path]
        while stack:
            current = stack.pop()
            entry = self._entries.pop(current, None)
            if entry is not None:
                self._count(entry, -1, current)
                parent, _, name = current.rpartition("/")
                self._children.get(parent, set()).discard(name)
            self._deep.discard(current)
            stack.extend(f"{current}/{name}" for name in self._children.pop(current, set()))

    def _count(self, entry: _Entry, sign: int, path: str) -> None:
        if stat.S_ISREG(entry.mode) and "/" in path:
            top = path.partition("/")[0]
            self._regular[top] = self._regular.get(top, 0) + sign
        if not entry.counted:
            links = self._inodes.get(entry.inode)
            if links is not None and sign > 0:  # a hard link of a counted file: its latest size
                self._inode_bytes += entry.charge - links[1]
                links[1] = entry.charge
            return
        if stat.S_ISREG(entry.mode) or stat.S_ISLNK(entry.mode):  # hard links count once
            links = self._inodes.setdefault(entry.inode, [0, 0])
            links[0] += sign
            if links[0] <= 0:
                self._inode_bytes -= links[1]
                del self._inodes[entry.inode]
            elif sign > 0:  # the latest stat of the inode is what it costs
                self._inode_bytes += entry.charge - links[1]
                links[1] = entry.charge
        else:  # a directory, or a special file (which the next clean removes)
            self._other_bytes += sign * entry.charge

    # -- watches ------------------------------------------------------------------------------

    def _watch(self, fd: int, path: str) -> bool:
        """Watch the directory open as ``fd`` (through its descriptor, never by path)."""
        try:
            wd = self._inotify.add_watch(f"/proc/self/fd/{fd}", _MASK)
        except OSError as exc:  # e.g. the user's watch limit: this tree cannot vouch
            log.info("cannot watch %s for changes (%s); walks stay whole", path or ".", exc)
            self._go_blind()
            return False
        self._watches[wd] = path
        return True

    def _unwatch(self, path: str) -> None:
        """Forget the watches of a directory that left the tree and of everything below it."""
        prefix = f"{path}/"
        for wd, watched in list(self._watches.items()):
            if watched == path or watched.startswith(prefix):
                del self._watches[wd]
                with contextlib.suppress(OSError):
                    self._inotify.rm_watch(wd)

    def _open_dir_path(self, path: str) -> int | None:
        """The directory ``path`` ("" : the root), opened from the root one component at a
        time without following a link; None when any of them is gone or is not a directory."""
        try:
            fd = os.open(self.root, _DIR_FLAGS)
        except OSError:
            return None
        for part in path.split("/") if path else ():
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError:
                os.close(fd)
                return None
            os.close(fd)
            fd = child
        return fd


def _charge_of(info: os.stat_result) -> int:
    return (
        charge(info)
        if stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode) or (stat.S_ISLNK(info.st_mode))
        else BLOCK
    )


def open_dir(dir_fd: int, name: str, info: os.stat_result) -> int | None:
    """Open a subdirectory without following links; None if it was swapped meanwhile."""
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except OSError:
        return None
    opened = os.fstat(fd)
    if (opened.st_dev, opened.st_ino) != (info.st_dev, info.st_ino):
        os.close(fd)
        return None
    return fd


def _collapsed(changes: Iterable[Change]) -> list[Change]:
    """Each path once (a subtree change wins), parents first, nothing below a subtree."""
    merged: dict[str, Change] = {}
    for change in changes:
        first = merged.get(change.path)
        if first is None:
            merged[change.path] = change
        elif change.subtree and not first.subtree:
            merged[change.path] = Change(change.path, True, first.before)
    found: list[Change] = []
    covered: set[str] = set()
    for path in sorted(merged, key=lambda p: (p.count("/"), p)):
        parts = path.split("/")
        if any("/".join(parts[:depth]) in covered for depth in range(1, len(parts))):
            continue
        found.append(merged[path])
        if merged[path].subtree:
            covered.add(path)
    return found
