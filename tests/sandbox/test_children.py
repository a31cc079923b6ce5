"""Child workspaces: copied inputs with receipts, promotion with provenance, escapes refused."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from sandbox_support import TEST_LIMITS, needs_bwrap

from fleet_core.errors import InvalidInput, WorkspacePathError
from fleet_core.sandbox import SandboxSpec
from fleet_core.sandbox.children import (
    PromotionQuotaError,
    prepare_child_workspace,
    promote_child_artifacts,
)
from fleet_core.sandbox.errors import ResourceLimitError
from fleet_core.sandbox.local import LocalSandbox
from fleet_core.workspace import Workspace, count_entries


def workspace(root: Path) -> Workspace:
    ws = Workspace(root, max_file_bytes=10_000_000, max_read_bytes=10_000_000)
    ws.ensure_layout()
    return ws


@pytest.fixture
def parent(tmp_path: Path) -> Workspace:
    ws = workspace(tmp_path / "parent")
    ws.write("files/a.txt", b"alpha")
    ws.write("files/secret.txt", b"not for the child")
    ws.write("artifacts/earlier.csv", b"x,y\n1,2\n")
    return ws


def test_inputs_are_copied_with_receipts(parent: Workspace, tmp_path: Path) -> None:
    child = prepare_child_workspace(
        parent,
        tmp_path / "child",
        agent_id="c1",
        parent_agent_id="root",
        input_paths=["files/a.txt", "artifacts/earlier.csv"],
    )
    assert child.input_digests() == {
        "files/a.txt": hashlib.sha256(b"alpha").hexdigest(),
        "artifacts/earlier.csv": hashlib.sha256(b"x,y\n1,2\n").hexdigest(),
    }
    assert not (child.root / "files/secret.txt").exists()
    default = prepare_child_workspace(
        parent, tmp_path / "child2", agent_id="c2", parent_agent_id="root"
    )
    assert sorted(default.input_digests()) == ["files/a.txt", "files/secret.txt"]


@pytest.mark.parametrize("bad", ["../parent/files/a.txt", "/etc/passwd", "memory/x", "files/../x"])
def test_bad_input_paths_are_refused(parent: Workspace, tmp_path: Path, bad: str) -> None:
    with pytest.raises((WorkspacePathError, InvalidInput)):
        prepare_child_workspace(
            parent, tmp_path / "c", agent_id="c", parent_agent_id="p", input_paths=[bad]
        )


def test_symlinked_input_is_refused(parent: Workspace, tmp_path: Path) -> None:
    os.symlink("/etc/passwd", parent.root / "files" / "link.txt")
    with pytest.raises(WorkspacePathError):
        prepare_child_workspace(
            parent,
            tmp_path / "c",
            agent_id="c",
            parent_agent_id="p",
            input_paths=["files/link.txt"],
        )


def test_promotion_copies_new_and_changed_files_only(parent: Workspace, tmp_path: Path) -> None:
    child = prepare_child_workspace(
        parent,
        tmp_path / "child",
        agent_id="c1",
        parent_agent_id="a0",
        ancestors=["a0"],
        input_paths=["artifacts/earlier.csv"],
    )
    child.workspace.write("artifacts/report.md", b"# report")
    child.workspace.write("artifacts/sub/data.bin", b"\x00\x01")
    result = promote_child_artifacts(
        child, parent, source_sandbox_id="sbx-1", max_files=100, max_bytes=25_000_000
    )
    by_path = {r.path: r for r in result.promoted}
    assert sorted(by_path) == ["artifacts/c1/report.md", "artifacts/c1/sub/data.bin"]
    receipt = by_path["artifacts/c1/report.md"]
    assert receipt.root_path == "artifacts/a0/c1/report.md"
    assert receipt.sha256 == hashlib.sha256(b"# report").hexdigest()
    assert receipt.size_bytes == 8 and receipt.source_agent_id == "c1"
    assert receipt.source_sandbox_id == "sbx-1" and receipt.source_path == "artifacts/report.md"
    assert parent.read("artifacts/c1/report.md") == b"# report"
    child.workspace.write("artifacts/earlier.csv", b"changed")
    again = promote_child_artifacts(
        child, parent, source_sandbox_id="sbx-1", max_files=100, max_bytes=25_000_000
    )
    assert "artifacts/c1/earlier.csv" in {r.path for r in again.promoted}


def test_quota_violation_promotes_nothing(parent: Workspace, tmp_path: Path) -> None:
    child = prepare_child_workspace(
        parent, tmp_path / "child", agent_id="c1", parent_agent_id="root", input_paths=[]
    )
    for i in range(4):
        child.workspace.write(f"artifacts/f{i}.txt", b"x" * 10)
    with pytest.raises(PromotionQuotaError, match="3 files"):
        promote_child_artifacts(child, parent, source_sandbox_id="s", max_files=3, max_bytes=10**6)
    with pytest.raises(PromotionQuotaError):
        promote_child_artifacts(child, parent, source_sandbox_id="s", max_files=10, max_bytes=25)
    assert not (parent.root / "artifacts" / "c1").exists()


@needs_bwrap
async def test_sandbox_made_symlinks_and_fifos_are_never_promoted(
    parent: Workspace, tmp_path: Path
) -> None:
    child = prepare_child_workspace(
        parent, tmp_path / "child", agent_id="evil", parent_agent_id="root", input_paths=[]
    )
    spec = SandboxSpec(
        session_id="s",
        agent_id="evil",
        parent_agent_id="root",
        workspace=child.root,
        limits=TEST_LIMITS,
    )
    async with LocalSandbox(spec) as sandbox:
        result = await sandbox.execute(
            "import os\n"
            "os.symlink('/etc/passwd', 'artifacts/passwd')\n"
            "os.makedirs('artifacts/d')\n"
            "os.symlink('/root', 'artifacts/d/home')\n"
            "os.mkfifo('artifacts/pipe')\n"
            "open('artifacts/ok.txt', 'w').write('fine')\n"
        )
        assert result.error is None, result.error
    # The sandbox's FIFO was removed when the cell ended (sandbox.hygiene); plant one on the
    # host side too, so promotion's own refusal is still exercised.
    assert not (child.root / "artifacts" / "pipe").exists()
    os.mkfifo(child.root / "artifacts" / "pipe")
    promoted = promote_child_artifacts(
        child, parent, source_sandbox_id=sandbox.id, max_files=100, max_bytes=10**6
    )
    assert [r.path for r in promoted.promoted] == ["artifacts/evil/ok.txt"]
    assert {p for p, _ in promoted.skipped} == {
        "artifacts/d/home",
        "artifacts/passwd",
        "artifacts/pipe",
    }
    assert not (parent.root / "artifacts/evil/passwd").exists()
    host_passwd = Path("/etc/passwd").read_bytes()  # noqa: ASYNC240
    for info in parent.tree("artifacts"):
        assert parent.read(info.path) != host_passwd


@needs_bwrap
async def test_child_cannot_escape_its_copied_inputs(parent: Workspace, tmp_path: Path) -> None:
    child = prepare_child_workspace(
        parent,
        tmp_path / "child",
        agent_id="c",
        parent_agent_id="root",
        input_paths=["files/a.txt"],
    )
    spec = SandboxSpec(session_id="s", agent_id="c", workspace=child.root, limits=TEST_LIMITS)
    async with LocalSandbox(spec) as sandbox:
        code = (
            "import os\n"
            "def read(p):\n"
            "    try:\n        return open(p).read()\n"
            "    except OSError as e:\n        return type(e).__name__\n"
            "def write(p):\n"
            "    try:\n        open(p, 'w').write('tampered'); return 'WROTE'\n"
            "    except OSError as e:\n        return type(e).__name__\n"
            f"[read('files/a.txt'), read('files/secret.txt'), read('{parent.root}/files/secret.txt'),"  # noqa: E501
            " read('../parent/files/secret.txt'), write('files/a.txt'),"
            f" write('{parent.root}/files/a.txt')]"
        )
        result = await sandbox.execute(code)
    assert result.value_repr is not None
    values = eval(result.value_repr)
    assert values[0] == "alpha"
    assert "not for the child" not in result.value_repr
    assert "WROTE" not in values
    assert parent.read("files/a.txt") == b"alpha"
    assert child.workspace.read("files/a.txt") == b"alpha"


@needs_bwrap
async def test_a_child_file_with_an_unholdable_name_is_promoted_under_its_escaped_name(
    parent: Workspace, tmp_path: Path
) -> None:
    child = prepare_child_workspace(
        parent, tmp_path / "child", agent_id="kid", parent_agent_id="root", input_paths=[]
    )
    spec = SandboxSpec(
        session_id="s",
        agent_id="kid",
        parent_agent_id="root",
        workspace=child.root,
        limits=TEST_LIMITS,
    )
    async with LocalSandbox(spec) as sandbox:
        result = await sandbox.execute(
            "open('artifacts/x\\x1b\\n.txt', 'w').write('kept')\n"
            "long = 'artifacts/' + '/'.join(['n' * 250] * 4)\n"
            "import os; os.makedirs(long)\n"
            "open(long + '/deep.txt', 'w').write('deep')\n"
        )
        assert result.error is None, result.error
        assert "renamed" in result.stderr and "x%1B%0A.txt" in result.stderr
    promoted = promote_child_artifacts(
        child, parent, source_sandbox_id=sandbox.id, max_files=100, max_bytes=10**6
    )
    paths = sorted(r.path for r in promoted.promoted)
    assert "artifacts/kid/x%1B%0A.txt" in paths and len(paths) == 2, paths
    assert promoted.skipped == ()
    assert parent.read("artifacts/kid/x%1B%0A.txt") == b"kept"
    assert set(paths) <= set(parent.paths("artifacts"))  # the parent lists all of them


# -- the file-count quota (sandbox.max_files) -----------------------------------------------------
def test_a_child_whose_inputs_exceed_the_file_count_quota_is_refused(
    parent: Workspace, tmp_path: Path
) -> None:
    for i in range(30):
        parent.write(f"files/many/f{i}.txt", b"x")
    with pytest.raises(ResourceLimitError, match=r"37 entries.*quota of 20.*sandbox\.max_files"):
        prepare_child_workspace(  # all of files/: 32 files, a folder and the 4 roots
            parent, tmp_path / "child", agent_id="c1", parent_agent_id="root", max_entries=20
        )
    assert not (tmp_path / "child").exists()  # refused before anything was made
    named = prepare_child_workspace(
        parent,
        tmp_path / "child2",
        agent_id="c2",
        parent_agent_id="root",
        input_paths=["files/a.txt"],
        max_entries=20,
    )
    assert list(named.input_digests()) == ["files/a.txt"]


def test_a_promotion_past_the_parents_file_count_quota_promotes_nothing(
    parent: Workspace, tmp_path: Path
) -> None:
    child = prepare_child_workspace(
        parent, tmp_path / "child", agent_id="c1", parent_agent_id="root", input_paths=[]
    )
    for i in range(5):
        child.workspace.write(f"artifacts/out/f{i}.txt", b"y")
    held = count_entries(parent.root)  # 4 roots + 3 files
    with pytest.raises(PromotionQuotaError, match=r"hold 14 entries.*quota of 13"):
        promote_child_artifacts(  # 5 files + artifacts/c1/ + artifacts/c1/out/
            child,
            parent,
            source_sandbox_id="s",
            max_files=100,
            max_bytes=10**6,
            max_entries=held + 6,
        )
    assert not (parent.root / "artifacts" / "c1").exists()
    done = promote_child_artifacts(
        child, parent, source_sandbox_id="s", max_files=100, max_bytes=10**6, max_entries=held + 7
    )
    assert len(done.promoted) == 5 and count_entries(parent.root) == held + 7
