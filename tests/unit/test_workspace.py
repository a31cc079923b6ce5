"""Workspace path rules, streamed attach, symlink refusal and the bounded manifest."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from fleet_core.errors import (
    FileTooLarge,
    InvalidInput,
    WorkspaceFileNotFound,
    WorkspacePathError,
)
from fleet_core.workspace import (
    Workspace,
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
