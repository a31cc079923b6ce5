"""LocalSandbox isolation layers: rlimits applied by the worker, the cgroup join without
``preexec_fn``, the dedicated-uid fork bound, and the sweep of stale cgroups."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from sandbox_support import TEST_LIMITS, needs_bwrap, needs_pids_cgroup

from fleet_core.sandbox import SandboxLimits, SandboxSpec, isolation
from fleet_core.sandbox.local import LocalSandbox

SYSTEM_PYTHON = "/usr/bin/python3"
FORK_BOMB = (
    "import os, time\n"
    "n = 0\n"
    "try:\n"
    "    for _ in range(200):\n"
    "        if os.fork() == 0:\n"
    "            time.sleep(60)\n"
    "            os._exit(0)\n"
    "        n += 1\n"
    "except OSError as e:\n"
    "    print(type(e).__name__)\n"
    "n"
)


# -- rlimits: applied by the worker itself, before ready ---------------------------------------
def _run_worker(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-I", "-B", str(isolation.WORKER_FILE), *args],
        input="",
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_worker_refuses_to_run_when_rlimits_cannot_be_applied() -> None:
    done = _run_worker(["--rlimits", json.dumps({"RLIMIT_BOGUS": [1, 1]})])
    assert done.returncode == 71
    assert "refusing to run" in done.stderr
    assert '"type":"ready"' not in done.stdout  # no ready frame, so no cell can ever be sent
    assert _run_worker(["--bogus"]).returncode == 71


def test_worker_applies_rlimits_before_ready() -> None:
    limits = {"RLIMIT_NOFILE": [100, 100], "RLIMIT_CORE": [0, 0]}
    worker = subprocess.Popen(
        [sys.executable, "-I", "-B", str(isolation.WORKER_FILE), "--rlimits", json.dumps(limits)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert worker.stdout is not None and worker.stdin is not None
    try:
        ready = json.loads(worker.stdout.readline())
        assert ready["type"] == "ready"
        soft_hard = Path(f"/proc/{worker.pid}/limits").read_text()
        assert any(
            line.startswith("Max open files") and line.split()[3:5] == ["100", "100"]
            for line in soft_hard.splitlines()
        )
    finally:
        worker.stdin.close()
        worker.wait(timeout=10)


@needs_bwrap
async def test_sandbox_sees_its_rlimits_and_no_preexec_fn_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[dict[str, Any]] = []
    real = asyncio.create_subprocess_exec

    async def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs)
        return await real(*args, **kwargs)

    monkeypatch.setattr(asyncio, "create_subprocess_exec", spy)
    limits = TEST_LIMITS.model_copy(update={"memory_bytes": 1 << 30, "max_open_files": 123})
    spec = SandboxSpec(session_id="t", agent_id="rl", workspace=tmp_path, limits=limits)
    async with LocalSandbox(spec) as sandbox:
        result = await sandbox.execute(
            "import resource as r\n"
            "[r.getrlimit(r.RLIMIT_AS), r.getrlimit(r.RLIMIT_NOFILE), r.getrlimit(r.RLIMIT_CORE)]"
        )
    assert result.value_repr == f"[({1 << 30}, {1 << 30}), (123, 123), (0, 0)]"
    assert seen and all("preexec_fn" not in kwargs for kwargs in seen)


# -- cgroup join -----------------------------------------------------------------------------------
@needs_bwrap
@needs_pids_cgroup
async def test_worker_tree_is_in_the_cgroup_before_the_first_cell(tmp_path: Path) -> None:
    spec = SandboxSpec(session_id="t", agent_id="cg", workspace=tmp_path, limits=TEST_LIMITS)
    async with LocalSandbox(spec) as sandbox:
        name = isolation.cgroup_name(sandbox.id)
        worker = sandbox.worker_pid
        assert worker is not None
        assert f"/{name}" in _pids_cgroup_of(worker)  # before any cell was sent
        proc = sandbox._proc
        assert proc is not None
        assert f"/{name}" not in _pids_cgroup_of(proc.pid)  # bwrap itself stays outside
        result = await sandbox.execute(
            "import subprocess\nsubprocess.run(['cat', '/proc/self/cgroup'], "
            "capture_output=True, text=True).stdout"
        )
        assert result.error is None, result.error
        procs = isolation._own_cgroup_dir("pids")
        assert procs is not None and (procs / name).is_dir()
    assert not (procs / name).exists()  # removed at destroy


def _pids_cgroup_of(pid: int) -> str:
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _num, controllers, path = line.split(":", 2)
        if "pids" in controllers.split(","):
            return path
    return ""


# -- dedicated uid ---------------------------------------------------------------------------------
@pytest.fixture
def world_workspace() -> Iterator[Path]:
    """A workspace whose parents other uids can search (pytest's tmp_path is under a 0700 dir)."""
    root = Path(tempfile.mkdtemp(prefix="fleet-uid-test-"))
    root.chmod(0o755)
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _uid_blocker(workspace: Path) -> str | None:
    bwrap = isolation.find_bwrap()
    if bwrap is None:
        return "no bubblewrap"
    if not os.path.exists(SYSTEM_PYTHON):
        return f"no {SYSTEM_PYTHON}"
    return isolation.dedicated_uid_blocker(bwrap, SYSTEM_PYTHON, workspace)


@pytest.fixture
async def uid_sandboxes(world_workspace: Path) -> AsyncIterator[list[LocalSandbox]]:
    made: list[LocalSandbox] = []
    yield made
    for sandbox in made:
        await sandbox.destroy()


def _uid_sandbox(workspace: Path, made: list[LocalSandbox], name: str) -> LocalSandbox:
    (workspace / name).mkdir(exist_ok=True)
    blocker = _uid_blocker(workspace / name)
    if blocker:
        pytest.skip(f"a dedicated uid is not possible here: {blocker}")
    limits = TEST_LIMITS.model_copy(update={"max_processes": 16})
    spec = SandboxSpec(session_id="t", agent_id=name, workspace=workspace / name, limits=limits)
    # The stdlib-only worker runs on the system Python: this machine's project interpreter lives
    # under /root (0700), which no other uid can reach.
    sandbox = LocalSandbox(spec, use_cgroups=False, python=SYSTEM_PYTHON)
    made.append(sandbox)
    return sandbox


async def test_dedicated_uid_bounds_a_fork_bomb_without_a_pids_cgroup(
    world_workspace: Path, uid_sandboxes: list[LocalSandbox]
) -> None:
    (world_workspace / "uid" / "files").mkdir(parents=True)
    (world_workspace / "uid" / "files" / "input.txt").write_text("in")
    (world_workspace / "uid" / "files" / "input.txt").chmod(0o600)  # as attach writes it
    sandbox = _uid_sandbox(world_workspace, uid_sandboxes, "uid")
    info = await sandbox.start()
    report = info.isolation
    uid = report["uid"]
    assert report["dedicated_uid"] is True and report["cgroup_pids"] is False
    assert isinstance(uid, int)
    assert isolation.DEDICATED_UID_BASE <= uid < isolation.DEDICATED_UID_BASE + (1 << 16)
    assert "RLIMIT_NPROC" in report["rlimits"] and "RLIMIT_NPROC" in report["fork_bound"]
    assert not any("fork bomb" in w for w in report["warnings"])

    result = await sandbox.execute(FORK_BOMB, timeout=15)
    assert result.error is None, result.error
    assert int(result.value_repr or "999") < 16
    assert "BlockingIOError" in result.stdout or "OSError" in result.stdout

    written = await sandbox.execute(
        "import os\nopen('artifacts/out.txt', 'w').write('x')\nos.getuid()"
    )
    assert written.value_repr == "65534"  # uid inside; on the host the file belongs to `uid`
    assert (world_workspace / "uid" / "artifacts" / "out.txt").stat().st_uid == uid
    read = await sandbox.execute("open('files/input.txt').read()")  # an attached 0600 file
    assert read.error is None and read.value == "in", read.error
    changed = await sandbox.execute("open('files/input.txt', 'w').write('x')")
    assert changed.error is not None  # files/ stays read-only (the mount, not the owner)
    assert (world_workspace / "uid" / "files" / "input.txt").read_text() == "in"
    worker = sandbox.worker_pid
    assert worker is not None
    await sandbox.destroy()
    assert not os.path.exists(f"/proc/{worker}")  # noqa: ASYNC240
    assert not isolation.DedicatedUid(uid, None).processes()  # all dead (zombies aside)
    assert _uid_lock_free(uid)  # released with the sandbox


async def test_concurrent_sandboxes_get_distinct_dedicated_uids(
    world_workspace: Path, uid_sandboxes: list[LocalSandbox]
) -> None:
    first = _uid_sandbox(world_workspace, uid_sandboxes, "a")
    second = _uid_sandbox(world_workspace, uid_sandboxes, "b")
    one, two = await asyncio.gather(first.start(), second.start())
    assert one.isolation["uid"] != two.isolation["uid"]
    assert not _uid_lock_free(one.isolation["uid"])


def _uid_lock_free(uid: int) -> bool:
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.bind("\0" + isolation._UID_LOCK_NAME.format(uid))
    except OSError:
        return False
    finally:
        probe.close()
    return True


@needs_bwrap
async def test_report_says_why_there_is_no_fork_bound(tmp_path: Path) -> None:
    spec = SandboxSpec(session_id="t", agent_id="nofb", workspace=tmp_path, limits=TEST_LIMITS)
    sandbox = LocalSandbox(spec, use_cgroups=False, use_dedicated_uid=False)
    async with sandbox:
        report = sandbox.info.isolation if sandbox.info else {}
    assert report["fork_bound"] == "none" and report["dedicated_uid"] is False
    assert "RLIMIT_NPROC" not in report["rlimits"]
    assert any("use_dedicated_uid=False" in w and "fork bomb" in w for w in report["warnings"])


def test_dedicated_uid_blocker_names_the_unreachable_directory(world_workspace: Path) -> None:
    bwrap = isolation.find_bwrap() or Path("/bin/true")
    private = world_workspace / "private"
    private.mkdir(mode=0o700)
    (private / "ws").mkdir()
    blocker = isolation.dedicated_uid_blocker(bwrap, SYSTEM_PYTHON, private / "ws")
    if os.geteuid() != 0:
        assert blocker is not None and "not root" in blocker
        return
    # Checks run in order (bwrap, Python, the worker, then the workspace): when the checkout
    # itself is private to root (a clone under a 0700 temp dir), that is what gets named.
    checkout_blocker = isolation.dedicated_uid_blocker(
        bwrap, SYSTEM_PYTHON, world_workspace / "reachable"
    )
    assert blocker is not None
    assert str(private) in blocker if checkout_blocker is None else blocker == checkout_blocker
    workspace_blocker = isolation.workspace_blocker(private / "ws")
    assert workspace_blocker is not None
    assert str(private) in workspace_blocker
    assert isolation.workspace_blocker(world_workspace / "reachable") is None


@pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")
def test_chown_workspace_skips_read_only_roots_symlinks_and_hard_links(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    for name in ("files", "artifacts/sub"):
        (ws / name).mkdir(parents=True)
    (ws / "files" / "in.txt").write_text("x")
    (ws / "artifacts" / "sub" / "a.txt").write_text("x")
    host = tmp_path / "host-secret"
    host.write_text("secret")
    os.link(host, ws / "artifacts" / "linked")
    (ws / "artifacts" / "link").symlink_to(host)
    uid = isolation.DEDICATED_UID_BASE + 7
    isolation.chown_workspace(ws, uid, skip=("files",))
    assert ws.stat().st_uid == uid
    assert (ws / "artifacts" / "sub" / "a.txt").stat().st_uid == uid
    assert (ws / "files" / "in.txt").stat().st_uid == 0
    assert host.stat().st_uid == 0  # neither the hard link nor the symlink handed it over
    assert (ws / "artifacts" / "link").lstat().st_uid == 0


# -- sweep of stale cgroups ------------------------------------------------------------------------
@needs_pids_cgroup
def test_sweep_removes_only_our_empty_orphans() -> None:
    parent = isolation._own_cgroup_dir("pids")
    assert parent is not None
    dead = _dead_pid()
    orphan = parent / f"{isolation.CGROUP_PREFIX}{dead}-local-orphan"
    busy = parent / f"{isolation.CGROUP_PREFIX}{dead}-local-busy"
    mine = parent / isolation.cgroup_name("local-live")
    foreign = parent / "someone-else-sbx"
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        for directory in (orphan, busy, mine, foreign):
            directory.mkdir()
        (busy / "cgroup.procs").write_text(str(sleeper.pid))
        removed = isolation.sweep_stale_cgroups()
        assert orphan in removed and not orphan.exists()
        assert busy.exists() and busy not in removed  # a process is still inside
        assert mine.exists() and foreign.exists()  # our live host's, and not ours at all
    finally:
        sleeper.kill()
        sleeper.wait()
        for directory in (orphan, busy, mine, foreign):
            _rmdir_retrying(directory)


def _dead_pid() -> int:
    done = subprocess.run(["true"], check=True)
    assert done.returncode == 0
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def _rmdir_retrying(directory: Path) -> None:
    for _ in range(200):
        try:
            directory.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            import time

            time.sleep(0.01)


def test_one_file_may_never_outgrow_the_workspace_quota() -> None:
    """RLIMIT_FSIZE is the smaller of the file cap and the quota, so a writer the polling quota
    watchdog reaches late (a loaded host) still stops at the quota per file."""
    small_quota = SandboxLimits(max_file_bytes=256 << 20, workspace_quota_bytes=32 << 20)
    assert isolation.rlimit_values(small_quota)["RLIMIT_FSIZE"] == (32 << 20, 32 << 20)
    big_quota = SandboxLimits(max_file_bytes=256 << 20, workspace_quota_bytes=1 << 30)
    assert isolation.rlimit_values(big_quota)["RLIMIT_FSIZE"] == (256 << 20, 256 << 20)


def test_limits_with_nproc_only_under_a_dedicated_uid() -> None:
    limits = SandboxLimits(max_processes=32)
    assert "RLIMIT_NPROC" not in isolation.rlimit_values(limits)
    assert isolation.rlimit_values(limits, nproc=True)["RLIMIT_NPROC"] == (32, 32)
    args = isolation.worker_args(limits, nproc=True)
    assert args[0] == "--rlimits" and json.loads(args[1])["RLIMIT_NPROC"] == [32, 32]
