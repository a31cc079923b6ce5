"""The change-tracked workspace tree (fleet_core/tracking.py) measures what a whole walk
measures, after any sequence of changes, and names the paths that changed."""

from __future__ import annotations

import os
import random
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fleet_core.sandbox import hygiene
from fleet_core.sandbox.hygiene import clean_changes, scan_workspace
from fleet_core.tracking import MAX_LOG, Change, WorkspaceTree

EXCLUDE = frozenset({"files"})


@pytest.fixture(params=[20261202, 1, 6])
def seed(request: pytest.FixtureRequest) -> int:
    return int(request.param)


@pytest.fixture
def tree(tmp_path: Path) -> Iterator[WorkspaceTree]:
    root = tmp_path / "ws"
    for top in ("files", "artifacts", "scratch"):
        (root / top).mkdir(parents=True)
    opened = WorkspaceTree.open(root, exclude=EXCLUDE)
    assert opened is not None, "inotify is available on Linux"
    yield opened
    opened.close()


def _whole(root: Path) -> tuple[int, int, bool]:
    scan = scan_workspace(root, sanitize=False, exclude=EXCLUDE)
    return scan.bytes_used, scan.entries, scan.too_deep


def _regular_files(root: Path, top: str) -> set[str]:
    found = set()
    for dirpath, _dirs, files in os.walk(root / top):
        for name in files:
            path = Path(dirpath) / name
            if stat.S_ISREG(path.lstat().st_mode):
                found.add(str(path.relative_to(root)))
    return found


def _random_change(root: Path, rng: random.Random, outside: Path) -> None:
    dirs = [p for p in root.rglob("*") if p.is_dir() and not p.is_symlink()] + [root / "artifacts"]
    files = [p for p in root.rglob("*") if p.is_file() and not p.is_symlink()]
    inner = [d for d in dirs if d.parent != root and d != root]  # below a top-level directory
    where = rng.choice(dirs)
    op = rng.randrange(12)
    name = f"n{rng.randrange(1000)}"
    if op == 0:
        (where / name).write_bytes(b"x" * rng.randrange(0, 9000))
    elif op == 1 and files:
        with rng.choice(files).open("ab") as handle:
            handle.write(b"y" * rng.randrange(1, 20000))
    elif op == 2:  # a directory made and filled at once (before any watch can exist)
        nested = where / name / "a" / "b"
        nested.mkdir(parents=True, exist_ok=True)
        for i in range(rng.randrange(1, 6)):
            (nested / f"f{i}").write_bytes(b"z" * i * 1000)
    elif op == 3 and files:
        target = where / name
        if not target.exists():
            os.link(rng.choice(files), target)
    elif op == 4:
        target = where / name
        if not target.exists():
            target.symlink_to("/etc/passwd")
    elif op == 5 and files:
        os.chmod(rng.choice(files), 0o4755)
    elif op == 6 and files:
        victim = rng.choice(files)
        victim.rename(where / f"moved-{name}")
    elif op == 7 and inner:
        victim = rng.choice(inner)
        if victim.exists() and not (where == victim or victim in where.parents):
            victim.rename(where / f"dmoved-{name}")
    elif op == 8 and inner:
        shutil.rmtree(rng.choice(inner), ignore_errors=True)
    elif op == 9 and files:
        rng.choice(files).unlink(missing_ok=True)
    elif op == 10:  # a directory leaves the tree and comes back with changes
        victim = where / name
        victim.mkdir(exist_ok=True)
        away = outside / f"away-{rng.randrange(10**9)}"
        victim.rename(away)
        (away / "while-away").write_bytes(b"w" * 5000)
        away.rename(where / f"back-{name}")
    elif op == 11:
        target = where / f"fifo-{name}"
        if not target.exists():
            os.mkfifo(target)


def test_the_tree_measures_what_a_whole_walk_measures_after_random_changes(
    tree: WorkspaceTree, tmp_path: Path, seed: int
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    rng = random.Random(seed)
    assert tree.refresh() is not None
    for round_ in range(60):
        for _ in range(rng.randrange(1, 8)):
            _random_change(tree.root, rng, outside)
        assert tree.refresh() is not None
        assert tree.totals() == _whole(tree.root), f"round {round_}"
        keys = tree.file_keys("artifacts")
        assert set(keys) == _regular_files(tree.root, "artifacts"), f"round {round_}"


def test_changed_since_names_the_changed_paths_and_nothing_else(tree: WorkspaceTree) -> None:
    root = tree.root
    for i in range(50):
        (root / "artifacts" / f"untouched-{i}.txt").write_text("u")
    start = tree.refresh()
    assert start is not None
    (root / "artifacts" / "new.csv").write_text("a,b\n")
    (root / "scratch" / "deep" / "er").mkdir(parents=True)
    (root / "scratch" / "deep" / "er" / "x").write_text("x")
    os.chmod(root / "artifacts" / "untouched-3.txt", 0o2644)
    after = tree.refresh()
    assert after is not None
    changes = tree.changed_since(start)
    assert changes is not None
    paths = {change.path for change in changes}
    assert "artifacts/new.csv" in paths and "artifacts/untouched-3.txt" in paths
    assert Change("scratch/deep", True) in changes  # a new directory: its whole subtree
    assert not any(path.startswith("scratch/deep/") for path in paths)  # covered by it
    assert not any("untouched-1" in path for path in paths)
    assert tree.changed_since(after) == []


def test_an_overflowing_log_makes_old_cursors_walk_everything(tree: WorkspaceTree) -> None:
    start = tree.refresh()
    assert start is not None
    for i in range(MAX_LOG // 1000 + 1):
        (tree.root / "scratch" / f"f{i}").write_text("x")
    tree.refresh()
    assert tree.changed_since(start) is not None
    tree._floor = tree.refresh() or 0  # as if the log had dropped everything before now
    assert tree.changed_since(start) is None


def test_a_closed_tree_vouches_for_nothing(tree: WorkspaceTree) -> None:
    start = tree.refresh()
    assert start is not None
    tree.close()
    assert tree.refresh() is None and tree.changed_since(start) is None


def test_the_tracked_clean_visits_only_changes_and_cleans_them_as_the_whole_walk(
    tree: WorkspaceTree, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a first (whole) clean, a clean visits only what changed, and still strips a
    setuid bit, removes a FIFO and quarantines a name the workspace cannot hold, in new and in
    old files; what it measures is what a whole walk measures."""
    root = tree.root
    for i in range(300):
        (root / "artifacts" / f"untouched-{i}.txt").write_text("u")
    first = clean_changes(tree)
    assert first.entries == 303 and not first.stripped
    visited: list[str] = []
    real_visit = hygiene._visit

    def counting_visit(dir_fd: int, name: str, rel: str, *args: Any, **kwargs: Any) -> Any:
        visited.append(rel)
        return real_visit(dir_fd, name, rel, *args, **kwargs)

    monkeypatch.setattr(hygiene, "_visit", counting_visit)
    os.chmod(root / "artifacts" / "untouched-7.txt", 0o4755)  # an old file changed
    (root / "scratch" / "new" / "deeper").mkdir(parents=True)
    os.mkfifo(root / "scratch" / "new" / "deeper" / "pipe")
    (root / "artifacts" / "x\x1bname.txt").write_text("bad name")
    scan = clean_changes(tree)
    assert scan.stripped == ["artifacts/untouched-7.txt"]
    assert scan.removed == ["scratch/new/deeper/pipe"]
    assert [r.old for r in scan.renamed] == ["artifacts/x\x1bname.txt"]
    assert len(visited) <= 6, visited  # the changes, not the 300 untouched files
    assert not stat.S_IMODE(os.stat(root / "artifacts" / "untouched-7.txt").st_mode) & 0o4000
    assert (scan.bytes_used, scan.entries, scan.too_deep) == _whole(root)
    visited.clear()
    again = clean_changes(tree)  # only this clean's own renames and chmods come back
    assert not again.stripped and not again.removed and not again.renamed
    assert len(visited) <= 4, visited
