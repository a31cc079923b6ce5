"""Workspace path rules, streamed attach, symlink refusal and the bounded manifest."""

from __future__ import annotations

import fcntl
import hashlib
import os
import socket
import stat
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from fleet_core import workspace as workspace_module
from fleet_core.errors import (
    FileTooLarge,
    InvalidInput,
    WorkspaceFileNotFound,
    WorkspacePathError,
)
from fleet_core.workspace import (
    STAGING_DIR,
    TEMP_PREFIX,
    Workspace,
    prepare_workspaces,
    pseudo_filesystems,
    render_manifest,
    validate_relative_path,
    validate_session_id,
)


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    ws = Workspace(tmp_path / "ws", max_file_bytes=1_000_000, max_read_bytes=500_000)
    ws.ensure_layout()
    return ws


@pytest.mark.parametrize("session_id", ["a", "Sess_1.x-y", "9" * 64])
def test_valid_session_ids_are_accepted(session_id: str) -> None:
    assert validate_session_id(session_id) == session_id


@pytest.mark.parametrize(
    "session_id", ["", ".hidden", "_x", "a..b", "a/b", "a b", "x" * 65, "ä", "a\x00"]
)
def test_invalid_session_ids_are_rejected_with_a_clear_message(session_id: str) -> None:
    with pytest.raises(InvalidInput, match="Invalid session id"):
        validate_session_id(session_id)


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("files/../../etc/passwd", "traversal is not allowed"),
        ("/etc/passwd", "is absolute"),
        ("files/a\x00b", "NUL or control characters"),
        ("files/a\nb", "NUL or control characters"),
        ("files\\evil", "backslash"),
        ("secrets/x", "must start with one of"),
        ("files//x", "empty"),
        ("", "empty"),
    ],
)
def test_bad_workspace_paths_are_rejected(path: str, message: str) -> None:
    with pytest.raises(WorkspacePathError, match=message):
        validate_relative_path(path)


def test_attach_streams_the_file_and_reports_size_and_digest(
    workspace: Workspace, tmp_path: Path
) -> None:
    source = tmp_path / "sales.csv"
    data = b"region,revenue\nnorth,10\n" * 1000
    source.write_bytes(data)
    info = workspace.attach(source)
    assert info.path == "files/sales.csv"
    assert info.size_bytes == len(data)
    assert info.sha256 == hashlib.sha256(data).hexdigest()
    assert workspace.read("files/sales.csv") == data[:500_000]
    assert workspace.stat("files/sales.csv") == info


def test_attach_over_the_cap_fails_and_leaves_nothing_behind(
    workspace: Workspace, tmp_path: Path
) -> None:
    source = tmp_path / "big.bin"
    source.write_bytes(b"x" * 1_000_001)
    with pytest.raises(FileTooLarge, match="nothing was stored"):
        workspace.attach(source)
    assert list((workspace.root / "files").iterdir()) == []


def test_attach_over_the_cap_keeps_an_existing_file_of_that_name(
    workspace: Workspace, tmp_path: Path
) -> None:
    (tmp_path / "data.csv").write_bytes(b"old")
    workspace.attach(tmp_path / "data.csv")
    (tmp_path / "data.csv").write_bytes(b"y" * 2_000_000)
    with pytest.raises(FileTooLarge):
        workspace.attach(tmp_path / "data.csv")
    assert workspace.read("files/data.csv") == b"old"


def test_symlink_planted_in_the_workspace_is_never_followed(
    workspace: Workspace, tmp_path: Path
) -> None:
    secret = tmp_path / "host-secret.txt"
    secret.write_text("host secret")
    (workspace.root / "artifacts" / "leak.txt").symlink_to(secret)
    (workspace.root / "files" / "dir").symlink_to(tmp_path)
    for path in ("artifacts/leak.txt", "files/dir/host-secret.txt"):
        with pytest.raises(WorkspacePathError, match="symlink"):
            workspace.read(path)
        with pytest.raises(WorkspacePathError, match="symlink"):
            workspace.write(path, b"overwrite")
    assert workspace.paths() == []
    assert secret.read_text() == "host secret"


def test_non_regular_files_are_refused(workspace: Workspace) -> None:
    os.mkfifo(workspace.root / "files" / "pipe")
    with pytest.raises(WorkspacePathError, match="not a regular file"):
        workspace.read("files/pipe")
    assert workspace.paths() == []


def test_missing_file_gives_a_clear_error(workspace: Workspace) -> None:
    with pytest.raises(WorkspaceFileNotFound, match=r"No workspace file 'files/none\.txt'"):
        workspace.stat("files/none.txt")


def test_reads_are_bounded(workspace: Workspace) -> None:
    workspace.write("files/a.txt", b"0123456789")
    assert workspace.read("files/a.txt", max_bytes=4, offset=3) == b"3456"
    with pytest.raises(InvalidInput):
        workspace.read("files/a.txt", offset=-1)


def test_manifest_lists_files_with_digests_and_text_previews(workspace: Workspace) -> None:
    workspace.write("files/sales.csv", b"region,revenue\nnorth,10\n")
    workspace.write("files/blob.bin", b"\x00\x01\x02")
    manifest = render_manifest(workspace, max_files=10, preview_chars=200, max_chars=10_000)
    digest = hashlib.sha256(b"region,revenue\nnorth,10\n").hexdigest()
    assert f"files/sales.csv  (24 bytes, sha256 {digest})" in manifest
    assert "    region,revenue" in manifest
    assert "files/blob.bin  (3 bytes" in manifest and "[binary]" in manifest


def test_manifest_of_ten_thousand_files_stays_bounded(workspace: Workspace) -> None:
    for index in range(10_000):
        (workspace.root / "files" / f"f{index:05}.txt").write_text("x")
    manifest = render_manifest(workspace, max_files=100, preview_chars=100, max_chars=20_000)
    assert len(manifest) <= 20_100
    assert "files/f00000.txt  (1 bytes" in manifest
    assert "more files" in manifest


# ---------------------------------------------------------------------------------------------
# issue 13: attach refuses FIFOs, devices, directories and pseudo-filesystems; staging; modes;
# deleting symlinks; changed artifacts without re-hashing
# ---------------------------------------------------------------------------------------------

CANARY_ENV = "FLEET_TEST_ATTACH_CANARY"


def _in_thread(func: Callable[[], object], timeout: float = 10.0) -> object:
    """Run ``func`` in a daemon thread; a hang fails the test instead of hanging it."""
    box: dict[str, object] = {}

    def run() -> None:
        try:
            box["value"] = func()
        except BaseException as exc:
            box["error"] = exc

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        pytest.fail(f"still blocked after {timeout} s")
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box.get("value")


def test_attaching_a_fifo_is_refused_without_blocking(workspace: Workspace, tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(InvalidInput, match=r"named pipe \(FIFO\); only regular files"):
        _in_thread(lambda: workspace.attach(fifo))
    assert workspace.paths() == []


def test_attaching_a_symlink_to_a_fifo_is_refused_without_blocking(
    workspace: Workspace, tmp_path: Path
) -> None:
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "link.csv").symlink_to(tmp_path / "pipe")
    with pytest.raises(InvalidInput, match="FIFO"):
        _in_thread(lambda: workspace.attach(tmp_path / "link.csv"))


def test_attaching_proc_self_environ_is_refused_and_copies_nothing(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    canary = "canary-environ-5d1c0b"
    monkeypatch.setenv(CANARY_ENV, canary)
    for source in ("/proc/self/environ", f"/proc/{os.getpid()}/environ", "/proc/self/status"):
        with pytest.raises(InvalidInput, match="pseudo-filesystem"):
            _in_thread(lambda s=source: workspace.attach(Path(s)))  # type: ignore[misc]
    assert workspace.paths() == []
    for path in workspace.root.parent.rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert canary.encode() not in path.read_bytes(), path


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("/dev/null", "pseudo-filesystem"),
        ("/dev/zero", "pseudo-filesystem"),
        ("/sys/kernel/mm/transparent_hugepage/enabled", "pseudo-filesystem"),
        ("/proc/cpuinfo", "pseudo-filesystem"),
    ],
)
def test_attaching_devices_and_kernel_files_is_refused(
    workspace: Workspace, source: str, message: str
) -> None:
    if not os.path.exists(source):
        pytest.skip(f"{source} does not exist here")
    with pytest.raises(InvalidInput, match=message):
        _in_thread(lambda: workspace.attach(Path(source)))
    assert workspace.paths() == []


def test_attaching_a_directory_or_a_socket_is_refused(workspace: Workspace, tmp_path: Path) -> None:
    (tmp_path / "folder").mkdir()
    with pytest.raises(InvalidInput, match="it is a directory; only regular files"):
        workspace.attach(tmp_path / "folder", "files/folder")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(str(tmp_path / "sock"))
        with pytest.raises(InvalidInput, match="it is a socket"):
            _in_thread(lambda: workspace.attach(tmp_path / "sock"))
    finally:
        listener.close()
    assert workspace.paths() == []


def test_a_bind_mounted_pseudo_file_is_refused_by_its_file_system() -> None:
    """Outside /proc's path, the file system type still refuses it (st_dev of procfs)."""
    proc_dev = os.stat("/proc/self/environ").st_dev
    assert pseudo_filesystems().get(proc_dev) in {"proc", "/proc"}
    assert os.stat("/").st_dev not in pseudo_filesystems()


def test_attach_writes_no_temp_file_inside_the_listed_roots(
    workspace: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The temp file of an attach lives in the staging directory, outside every root."""
    seen: list[list[str]] = []
    original = Workspace._store_stream

    def spy(self: Workspace, handle: object, label: str) -> tuple[int, str]:
        class Reader:
            def readinto(self, buffer: bytearray) -> int:
                count = handle.readinto(buffer)  # type: ignore[attr-defined]
                seen.append(
                    [str(p.relative_to(workspace.root.parent)) for p in _all_files(workspace)]
                )
                return int(count)

        return original(self, Reader(), label)  # type: ignore[arg-type]

    monkeypatch.setattr(Workspace, "_store_stream", spy)
    source = tmp_path / "data.csv"
    source.write_bytes(b"a,b\n" * 1000)
    workspace.attach(source)
    during = {name for names in seen for name in names}
    staged = [name for name in during if name.startswith(f"{STAGING_DIR}/{TEMP_PREFIX}")]
    assert staged, during
    assert not [name for name in during if name.startswith("ws/") and TEMP_PREFIX in name]
    assert workspace.paths() == ["files/data.csv"]
    assert list(workspace.staging.iterdir()) == []


def _all_files(workspace: Workspace) -> list[Path]:
    return [p for p in workspace.root.parent.rglob("*") if p.is_file()]


def test_a_killed_writers_temp_file_is_never_listed_and_is_swept_at_start(
    tmp_path: Path,
) -> None:
    workspaces = tmp_path / "state" / "workspaces"
    ws = Workspace(workspaces / "s1", max_file_bytes=1_000_000, max_read_bytes=1_000_000)
    ws.ensure_layout()
    ws.write("files/keep.csv", b"a\n")
    staging = workspaces / STAGING_DIR
    stale = staging / f"{TEMP_PREFIX}deadbeef"
    stale.write_bytes(b"x" * 4096)  # what a kill -9 during an attach leaves
    legacy_name = ws.root / "files" / "notes.txt"
    legacy_name.write_text("kept")
    assert ws.paths() == ["files/keep.csv", "files/notes.txt"]
    # a live writer's temp file (its lock held) survives the sweep
    live = os.open(staging / f"{TEMP_PREFIX}live", os.O_CREAT | os.O_WRONLY, 0o600)
    fcntl.flock(live, fcntl.LOCK_EX)
    try:
        assert prepare_workspaces(workspaces) == 1
        assert not stale.exists()
        assert (staging / f"{TEMP_PREFIX}live").exists()
    finally:
        os.close(live)
    assert prepare_workspaces(workspaces) == 1  # its writer is gone now
    assert list(staging.iterdir()) == []
    assert ws.read("files/keep.csv") == b"a\n"


def test_workspace_directories_are_not_world_traversable(tmp_path: Path) -> None:
    workspaces = tmp_path / "state" / "workspaces"
    workspaces.mkdir(parents=True, mode=0o755)
    os.chmod(workspaces, 0o755)  # as an older version left it
    prepare_workspaces(workspaces)
    expected = 0o711 if os.geteuid() == 0 else 0o700
    assert stat.S_IMODE(workspaces.stat().st_mode) == expected
    assert not workspaces.stat().st_mode & (stat.S_IROTH | stat.S_IRGRP)
    ws = Workspace(workspaces / "s1", max_file_bytes=10, max_read_bytes=10)
    ws.ensure_layout()
    assert stat.S_IMODE(ws.root.stat().st_mode) == 0o700
    os.chmod(ws.root, 0o755)
    ws.ensure_layout()  # an existing workspace is tightened on load
    assert stat.S_IMODE(ws.root.stat().st_mode) == 0o700
    ws.write("files/a.txt", b"x")
    assert stat.S_IMODE((workspaces / STAGING_DIR).stat().st_mode) == 0o700


def test_deleting_a_symlink_removes_the_link_and_never_its_target(
    workspace: Workspace, tmp_path: Path
) -> None:
    secret = tmp_path / "host-secret.txt"
    secret.write_text("host secret")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.txt").write_text("victim")
    (workspace.root / "artifacts" / "leak.txt").symlink_to(secret)
    (workspace.root / "artifacts" / "dir").symlink_to(outside)
    (workspace.root / "files" / "dangling").symlink_to(tmp_path / "missing")
    os.mkfifo(workspace.root / "files" / "pipe")
    (workspace.root / "files" / "empty").mkdir()
    for path in ("artifacts/leak.txt", "artifacts/dir", "files/dangling", "files/pipe"):
        workspace.delete(path)
        assert not os.path.lexists(workspace.root / path), path
    workspace.delete("files/empty")
    assert not (workspace.root / "files" / "empty").exists()
    assert secret.read_text() == "host secret"
    assert (outside / "victim.txt").read_text() == "victim"


def test_delete_never_goes_through_a_symlinked_directory(
    workspace: Workspace, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.txt").write_text("victim")
    (workspace.root / "artifacts" / "dir").symlink_to(outside)
    with pytest.raises(WorkspacePathError, match="never followed"):
        workspace.delete("artifacts/dir/victim.txt")
    assert (outside / "victim.txt").read_text() == "victim"
    (workspace.root / "files" / "full").mkdir()
    (workspace.root / "files" / "full" / "a.txt").write_text("a")
    with pytest.raises(WorkspacePathError, match="not empty"):
        workspace.delete("files/full")
    with pytest.raises(WorkspaceFileNotFound):
        workspace.delete("files/none.txt")
    with pytest.raises(WorkspacePathError, match="traversal"):
        workspace.delete("files/../../etc/passwd")
    with pytest.raises(WorkspacePathError, match="workspace root; it cannot be deleted"):
        workspace.delete("memory")  # empty, but a root
    assert (workspace.root / "memory").is_dir()


def test_changed_since_hashes_only_new_or_changed_files(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    for index in range(50):
        workspace.write(f"artifacts/a{index:03}.txt", f"v1 {index}".encode())
    hashed: list[Path] = []
    real = workspace_module.file_sha256

    def counting(path: Path) -> str:
        hashed.append(path)
        return real(path)

    monkeypatch.setattr(workspace_module, "file_sha256", counting)
    fresh = Workspace(workspace.root, max_file_bytes=10**6, max_read_bytes=10**6)  # a restart
    before = fresh.stamps("artifacts")
    assert len(before) == 50 and hashed == []  # stamps read no file
    workspace.write("artifacts/a007.txt", b"v2 changed")
    workspace.write("artifacts/new.txt", b"new")
    changed, total = fresh.changed_since(before, "artifacts", limit=100)
    assert [info.path for info in changed] == ["artifacts/a007.txt", "artifacts/new.txt"]
    assert total == 2 and len(hashed) == 2
    # bounded: past the limit, files are counted but not read
    hashed.clear()
    changed, total = fresh.changed_since({}, "artifacts", limit=10)
    assert len(changed) == 10 and total == 51
    assert len(hashed) <= 10


# ---------------------------------------------------------------------------------------------
# many files: listings in path order, page by page, reading only the page; bounded manifests
# ---------------------------------------------------------------------------------------------


def _hash_counter(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    hashed: list[Path] = []
    real = workspace_module.file_sha256

    def counting(path: Path) -> str:
        hashed.append(path)
        return real(path)

    monkeypatch.setattr(workspace_module, "file_sha256", counting)
    return hashed


def test_ordered_listing_is_the_sorted_listing_and_resumes_after_any_path(
    workspace: Workspace,
) -> None:
    names = ["a", "a.b", "a-b", "a b", "ab", "A", "é", "z!", "0"]
    for first in names:
        for second in names[:4]:
            for top in ("files", "artifacts"):
                (workspace.root / top / first).mkdir(exist_ok=True)
                (workspace.root / top / first / second).write_text("x")
        (workspace.root / "memory" / f"{first}.md").write_text("m")  # files beside folders
    (workspace.root / "files" / "link").symlink_to("/etc/passwd")
    os.mkfifo(workspace.root / "files" / "fifo")
    everything = workspace.paths()
    assert [path for path, _fd, _name in workspace.ordered()] == everything
    for cursor in [*everything[::5], "files/a", "files/a/zzz", "artifacts", "zzz", "files/a.b/"]:
        after = [path for path, _fd, _name in workspace.ordered(after=cursor)]
        assert after == [path for path in everything if path > cursor], cursor
    assert [p for p, _fd, _name in workspace.ordered("memory")] == workspace.paths("memory")


def test_pages_concatenate_and_only_the_page_is_stated_and_hashed(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    for index in range(2_500):
        (workspace.root / "artifacts" / f"f{index:05}.txt").write_text(str(index))
    hashed = _hash_counter(monkeypatch)
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        infos, cursor = workspace.page(after=cursor, limit=1000)
        pages += 1
        assert len(hashed) == len(infos) <= 1000  # this page's files, none other
        hashed.clear()
        seen += [info.path for info in infos]
        if cursor is None:
            break
    assert pages == 3 and seen == workspace.paths() and len(set(seen)) == 2_500


def test_a_manifest_of_many_files_reads_only_the_first_ones(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    for index in range(12_000):
        (workspace.root / "artifacts" / f"f{index:05}.txt").touch()
    hashed = _hash_counter(monkeypatch)
    read: list[str] = []
    real_read = Workspace.read

    def counting_read(self: Workspace, path: str, **kwargs: object) -> bytes:
        read.append(path)
        return real_read(self, path, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Workspace, "read", counting_read)
    manifest = render_manifest(workspace, max_files=50, preview_chars=100, max_chars=20_000)
    assert len(manifest) <= 20_100
    assert len(hashed) == 50 and len(read) == 50  # previews and digests of the first 50 only
    last = manifest.splitlines()[-1]
    assert last.startswith("... and ") and last.endswith(" more files (use workspace.tree())")
    listed = sum(1 for line in manifest.splitlines() if line.startswith("artifacts/"))
    assert int(last.split()[2]) == 12_000 - listed  # the rest are counted, not listed


def test_entries_are_counted_as_the_sandbox_counts_them(workspace: Workspace) -> None:
    from fleet_core.sandbox import hygiene

    for index in range(30):
        (workspace.root / "artifacts" / "d" / str(index % 3)).mkdir(parents=True, exist_ok=True)
        (workspace.root / "artifacts" / "d" / str(index % 3) / f"{index}").touch()
    (workspace.root / "files" / "link").symlink_to("/etc")
    scan = hygiene.scan_workspace(workspace.root, sanitize=False)
    assert workspace.entry_count() == scan.entries == 4 + 1 + 3 + 30 + 1
    assert workspace.entry_count(stop_after=10) > 10
    assert (
        workspace_module.count_new_entries(
            workspace.root,
            ["artifacts/d/0/new", "artifacts/x/y/z", "artifacts/x/y/w", "files/link"],
        )
        == 1 + 4
    )


def test_a_manifest_counts_the_rest_alike_with_and_without_change_tracking(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tree's count of unlisted files (no walk) is the walk's count."""
    for index in range(3_000):
        (workspace.root / "artifacts" / f"f{index:05}.txt").touch()
    (workspace.root / "files" / "data.csv").write_text("a\n1\n")
    assert workspace.change_tree() is not None  # as a Session's sandbox opens it
    tracked = render_manifest(workspace, max_files=20, preview_chars=50, max_chars=4_000)
    monkeypatch.setattr(Workspace, "open_tree", None)
    walked = render_manifest(workspace, max_files=20, preview_chars=50, max_chars=4_000)
    assert tracked == walked and "more files" in tracked
