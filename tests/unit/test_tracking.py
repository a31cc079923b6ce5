"""The change-tracked workspace tree (fleet_core/tracking.py) measures what a whole walk
measures, after any sequence of changes, and names the paths that changed."""

from __future__ import annotations

import os
import random
import shutil
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fleet_core.sandbox import hygiene
from fleet_core.sandbox.hygiene import clean_changes, scan_workspace
from fleet_core.tracking import MAX_LOG, Change, WorkspaceTree
from fleet_core.workspace import Baseline, Workspace

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
        tops = ("files", "artifacts", "scratch")
        regular = sum(len(_regular_files(tree.root, top)) for top in tops)
        assert tree.regular_count(tops) == regular, f"round {round_}"


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


def _workspace(tmp_path: Path) -> Workspace:
    workspace = Workspace(tmp_path / "ws2", max_file_bytes=1 << 20, max_read_bytes=1 << 20)
    workspace.ensure_layout()
    return workspace


def test_a_turns_changed_artifacts_come_from_the_tree_without_visiting_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a change tree, what a Turn changed under artifacts/ is listed from the paths the
    tree saw change: new and rewritten files; not an identical rewrite of a file whose digest
    was known, a chmod, a removed file or any of the untouched ones (which are never hashed)."""
    workspace = _workspace(tmp_path)
    art = workspace.root / "artifacts"
    for i in range(200):
        (art / f"old-{i}.txt").write_text(f"old {i}")
    workspace.stat("artifacts/old-2.txt")  # its digest is known before the Turn
    before = Baseline("artifacts")
    workspace.mark(before)
    assert before.generation is not None and before.stamps == {}
    hashed: list[str] = []
    real_stat = Workspace.stat

    def counting_stat(self: Workspace, path: str) -> Any:
        hashed.append(path)
        return real_stat(self, path)

    monkeypatch.setattr(Workspace, "stat", counting_stat)
    (art / "new.csv").write_text("a,b\n")
    (art / "old-1.txt").write_text("rewritten")
    time.sleep(0.01)
    (art / "old-2.txt").write_text("old 2")  # the same content again: a new stamp, same digest
    os.chmod(art / "old-3.txt", 0o600)
    (art / "old-4.txt").unlink()
    (art / "sub").mkdir()
    (art / "sub" / "inner.json").write_text("{}")
    changed, total = workspace.changed_after(before, limit=100)
    assert [info.path for info in changed] == [
        "artifacts/new.csv",
        "artifacts/old-1.txt",
        "artifacts/sub/inner.json",
    ]
    assert total == 3
    assert len(hashed) <= 4, hashed  # the candidates only, never the 195 untouched files
    workspace.close()


def test_changed_artifacts_when_the_tree_lost_track_fall_back_to_known_digests(
    tmp_path: Path,
) -> None:
    workspace = _workspace(tmp_path)
    art = workspace.root / "artifacts"
    (art / "known.txt").write_text("k")
    workspace.stat("artifacts/known.txt")
    before = Baseline("artifacts")
    workspace.mark(before)
    (art / "fresh.txt").write_text("f")
    tree = workspace.change_tree()
    assert tree is not None
    tree._floor = (tree.refresh() or 0) + 1  # as if the log had dropped the Turn's changes
    changed, total = workspace.changed_after(before, limit=10)
    assert [info.path for info in changed] == ["artifacts/fresh.txt"] and total == 1
    workspace.close()


def test_without_a_tree_a_baseline_holds_every_stamp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = _workspace(tmp_path)
    monkeypatch.setattr(Workspace, "change_tree", lambda self: None)
    (workspace.root / "artifacts" / "a.txt").write_text("a")
    before = Baseline("artifacts")
    workspace.mark(before)
    assert before.generation is None and set(before.stamps) == {"artifacts/a.txt"}
    (workspace.root / "artifacts" / "b.txt").write_text("b")
    changed, _total = workspace.changed_after(before, limit=10)
    assert [info.path for info in changed] == ["artifacts/b.txt"]
