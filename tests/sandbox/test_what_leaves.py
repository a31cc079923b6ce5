"""What leaves a LocalSandbox (issue 13): no setuid/setgid/sticky bits or special files reach the
host workspace, the workspace is mounted nosuid,nodev inside, the workspace quota stops a cell,
and no sandbox process outlives its sandbox or its host."""

from __future__ import annotations

import asyncio
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from sandbox_support import TEST_LIMITS, needs_bwrap

from fleet_core.sandbox import SandboxSpec, WorkspaceQuotaError, hygiene
from fleet_core.sandbox.children import prepare_child_workspace, promote_child_artifacts
from fleet_core.sandbox.local import LocalSandbox
from fleet_core.workspace import Workspace

pytestmark = needs_bwrap
MIB = 1 << 20
QUOTA = 32 * MIB
SLACK = 64 * MIB  # the watchdog's measured overshoot is 7-16 MiB for one writer (docs/sandbox.md)

PLANT = """
import os, shutil, socket, stat
shutil.copy('/usr/bin/id', 'artifacts/suid'); os.chmod('artifacts/suid', 0o4755)
shutil.copy('/usr/bin/id', 'artifacts/sgid'); os.chmod('artifacts/sgid', 0o2755)
os.makedirs('artifacts/sticky'); os.chmod('artifacts/sticky', 0o1777)
os.makedirs('artifacts/setgid-dir'); os.chmod('artifacts/setgid-dir', 0o2775)
shutil.copy('/usr/bin/id', 'top-level-suid'); os.chmod('top-level-suid', 0o6755)
os.chmod('.', 0o777)
os.mkfifo('artifacts/fifo')
s = socket.socket(socket.AF_UNIX); s.bind('artifacts/sock'); s.close()
def mknod(path, kind):
    try:
        os.mknod(path, 0o666 | kind, os.makedev(1, 3)); return 'MADE'
    except OSError as e:
        return type(e).__name__
[stat.S_IMODE(os.stat('artifacts/suid').st_mode) & 0o7000, mknod('artifacts/null', stat.S_IFCHR),
 mknod('artifacts/blk', stat.S_IFBLK)]
"""


def _spec(workspace: Path, **limits: int) -> SandboxSpec:
    workspace.mkdir(exist_ok=True)
    return SandboxSpec(
        session_id="t",
        agent_id="leave",
        workspace=workspace,
        limits=TEST_LIMITS.model_copy(update=limits),
    )


def _special(root: Path) -> list[str]:
    """Every path under ``root`` with a special bit or of a special type."""
    found = []
    for path in [root, *root.rglob("*")]:
        mode = path.lstat().st_mode
        kind_ok = stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode)
        if not kind_ok or mode & hygiene.SPECIAL_BITS:
            found.append(f"{path.relative_to(root)} {stat.filemode(mode)}")
    return found


def _usage(root: Path) -> int:
    return hygiene.scan_workspace(root, sanitize=False, exclude=("files",)).bytes_used


# -- setuid, setgid, sticky bits and special files ----------------------------------------------
async def test_special_bits_and_files_never_reach_the_host(tmp_path: Path) -> None:
    """As root without the dedicated uid, files the sandbox makes belong to root on the host:
    after the cell none keeps a setuid/setgid/sticky bit and no FIFO/socket/device is left."""
    spec = _spec(tmp_path / "ws")
    async with LocalSandbox(spec, use_dedicated_uid=False) as sandbox:
        result = await sandbox.execute(PLANT)
        assert result.error is None, result.error
        inside = result.value_repr or ""
        assert inside.startswith("[2048, ")  # the bit was set inside...
        assert "MADE" not in inside  # ...device nodes cannot be made at all
        assert _special(spec.workspace) == []  # ...and nothing special is left on the host
        assert stat.S_IMODE(spec.workspace.stat().st_mode) == 0o700  # no other user gets in
        suid = spec.workspace / "artifacts" / "suid"
        assert suid.stat().st_size > 0 and not suid.stat().st_mode & stat.S_ISUID
        scan = sandbox.last_scan
        assert scan is not None
        assert not (spec.workspace / "artifacts" / "fifo").exists()
        # A process left running after the cell sets the bit again: stripped at teardown.
        late = await sandbox.execute(
            "import subprocess\nsubprocess.Popen(['sh', '-c', 'sleep 0.3; chmod 4755 "
            "artifacts/suid; mkfifo artifacts/late'])\n"
        )
        assert late.error is None, late.error
        time.sleep(0.6)  # noqa: ASYNC251 - let the background process finish
    assert _special(spec.workspace) == []


async def test_workspace_is_mounted_nosuid_nodev_inside(tmp_path: Path) -> None:
    spec = _spec(tmp_path / "ws")
    async with LocalSandbox(spec) as sandbox:
        result = await sandbox.execute(
            "[line.split()[5] for line in open('/proc/self/mountinfo')"
            " if line.split()[4] == '/workspace'][0]"
        )
    options = set((result.value or "").split(","))
    assert {"nosuid", "nodev"} <= options, options


def test_promotion_never_carries_special_bits(tmp_path: Path) -> None:
    """Promotion and Daytona's pull write through ``Workspace.write``: a fresh 0600 file."""
    parent = Workspace(tmp_path / "parent", max_file_bytes=10**6, max_read_bytes=10**6)
    parent.ensure_layout()
    child = prepare_child_workspace(
        parent, tmp_path / "child", agent_id="c1", parent_agent_id="root", input_paths=[]
    )
    planted = child.root / "artifacts" / "tool"
    planted.write_bytes(b"#!/bin/sh\n")
    planted.chmod(0o6755)
    result = promote_child_artifacts(
        child, parent, source_sandbox_id="s", max_files=10, max_bytes=10**6
    )
    assert [r.path for r in result.promoted] == ["artifacts/c1/tool"]
    mode = (parent.root / "artifacts" / "c1" / "tool").stat().st_mode
    assert not mode & hygiene.SPECIAL_BITS and stat.S_IMODE(mode) == 0o600


def test_hygiene_never_changes_a_host_file_linked_into_the_workspace(tmp_path: Path) -> None:
    host = tmp_path / "host-tool"
    host.write_bytes(b"x")
    host.chmod(0o4755)
    workspace = tmp_path / "ws"
    (workspace / "artifacts").mkdir(parents=True)
    os.link(host, workspace / "artifacts" / "linked")
    (workspace / "artifacts" / "sym").symlink_to(host)
    scan = hygiene.sanitize_workspace(workspace)
    assert scan.removed == ["artifacts/linked"]  # the link is dropped, the host file untouched
    assert host.stat().st_mode & stat.S_ISUID
    assert (workspace / "artifacts" / "sym").is_symlink()


# -- the workspace quota --------------------------------------------------------------------------
async def test_a_cell_writing_past_the_quota_is_stopped(tmp_path: Path) -> None:
    spec = _spec(tmp_path / "ws", workspace_quota_bytes=QUOTA)
    async with LocalSandbox(spec) as sandbox:
        await sandbox.execute("kept = 41")
        started = time.monotonic()
        result = await sandbox.execute(
            "chunk = b'x' * (1 << 20)\n"
            "with open('artifacts/flood.bin', 'wb') as f:\n"
            "    while True:\n"
            "        f.write(chunk)\n"
        )
        elapsed = time.monotonic() - started
        assert result.error is not None
        assert result.error.type == "WorkspaceQuotaExceeded"
        assert "quota" in result.error.message and "Delete files" in result.error.message
        used = _usage(spec.workspace)
        assert QUOTA < used <= QUOTA + SLACK, used
        assert elapsed < 5
        again = await sandbox.execute("kept + 1")  # REPL state kept
        assert again.value_repr == "42"
        small = await sandbox.execute(  # the model frees space and goes on
            "import os\nos.remove('artifacts/flood.bin')\nopen('artifacts/ok', 'w').write('y')"
        )
        assert small.error is None, small.error


DD = (
    "import subprocess\nsubprocess.run(['dd', 'if=/dev/zero', 'of=artifacts/dd', 'bs=1M', "
    "'count=4000'], capture_output=True)"
)
THREADS = (
    "import threading\n"
    "def w(k):\n"
    "    b = b'y' * (1 << 20)\n"
    "    with open(f'artifacts/t{k}', 'wb') as f:\n"
    "        for _ in range(1000): f.write(b)\n"
    "ts = [threading.Thread(target=w, args=(k,)) for k in range(4)]\n"
    "[t.start() for t in ts]\n[t.join() for t in ts]\n"
)
EMPTY_FILES = (
    "import os\nos.makedirs('artifacts/many')\n"
    "for i in range(100000):\n    open(f'artifacts/many/{i}', 'w').close()\n"
)


@pytest.mark.parametrize("code", [DD, THREADS, EMPTY_FILES], ids=["dd", "threads", "empty-files"])
async def test_quota_holds_against_subprocesses_threads_and_many_files(
    tmp_path: Path, code: str
) -> None:
    """Subprocesses are killed at the soft stop; threads that keep writing get the worker
    killed; empty files count one 4 KiB block each."""
    spec = _spec(tmp_path / "ws", workspace_quota_bytes=QUOTA)
    async with LocalSandbox(spec) as sandbox:
        try:
            result = await sandbox.execute(code)
        except WorkspaceQuotaError as exc:  # it kept writing after the soft stop: killed
            error = str(exc)
        else:
            assert result.error is not None
            assert result.error.type == "WorkspaceQuotaExceeded"
            error = result.error.message
        assert "quota" in error
        time.sleep(0.3)  # noqa: ASYNC251 - nothing may keep writing afterwards
        # Four writer threads at page-cache speed get furthest (docs/sandbox.md has figures).
        assert _usage(spec.workspace) <= QUOTA + (4 if code == THREADS else 2) * SLACK


# -- the file-count quota (sandbox.max_files) -----------------------------------------------------
MAX_ENTRIES = 1_000
FLOOD_FILES = (  # 50,000 empty files: nothing is written, only inodes are made
    "import os\nos.makedirs('artifacts/many', exist_ok=True)\n"
    "for i in range(50000):\n    open(f'artifacts/many/{i}', 'w').close()\n"
)


def _entries(root: Path) -> int:
    return hygiene.scan_workspace(root, sanitize=False).entries


async def test_a_cell_creating_more_files_than_the_count_quota_is_stopped(tmp_path: Path) -> None:
    """Model code really runs in the sandbox: 50,000 empty files stay under the byte quota, the
    file-count quota stops the cell with a message saying what happened and the bound; the files
    stay (nothing the user has is lost), the REPL is kept, the workspace may stay over the bound
    but not grow, and deleting files lets the model go on."""
    spec = _spec(tmp_path / "ws", workspace_max_entries=MAX_ENTRIES)
    async with LocalSandbox(spec) as sandbox:
        await sandbox.execute("kept = 41")
        result = await sandbox.execute(FLOOD_FILES)
        assert result.error is not None, "the flood was not stopped"
        assert result.error.type == "WorkspaceQuotaExceeded"
        message = result.error.message
        assert message.startswith("The cell created too many files: the workspace holds ")
        assert "entries, the limit is 1,000 (setting sandbox.max_files" in message
        assert "Delete files" in message and "REPL state is kept" in message
        held = _entries(spec.workspace)
        assert MAX_ENTRIES < held < 50_000 // 2, held  # stopped early, what was made is kept
        assert (await sandbox.execute("kept + 1")).value_repr == "42"
        more = await sandbox.execute("open('artifacts/one-more', 'w').close()")
        assert more.error is not None and "too many files" in more.error.message
        freed = await sandbox.execute(
            "import shutil\nshutil.rmtree('artifacts/many')\nopen('artifacts/ok', 'w').close()"
        )
        assert freed.error is None, freed.error
        assert _entries(spec.workspace) < MAX_ENTRIES


async def test_files_made_between_cells_past_the_count_quota_kill_the_worker(
    tmp_path: Path,
) -> None:
    """A background thread left creating files after its cell ended: the watchdog sees the
    file system's inodes move, kills the worker, and the next cell says why."""
    spec = _spec(tmp_path / "ws", workspace_max_entries=MAX_ENTRIES)
    async with LocalSandbox(spec) as sandbox:
        started = await sandbox.execute(
            "import os, threading, time\nos.makedirs('artifacts/bg')\n"
            "def flood():\n"
            "    time.sleep(1.5)\n"  # after the cell has ended (under load it once outran it)
            "    for i in range(50000):\n"
            "        open(f'artifacts/bg/{i}', 'w').close()\n"
            "threading.Thread(target=flood, daemon=True).start()\n"
        )
        assert started.error is None, started.error
        deadline = time.monotonic() + 20
        while sandbox.state.value != "failed" and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        with pytest.raises(WorkspaceQuotaError, match="created too many files") as info:
            await sandbox.execute("1")
        assert "sandbox.max_files" in str(info.value)
        assert _entries(spec.workspace) < 50_000 // 2


async def test_host_cells_skip_the_walk_only_until_model_code_ran(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The walk after a cell is skipped for the host's own cells while no model code ran in the
    REPL (nothing else could have changed the workspace); once model code ran, every cell is
    walked after, host cells too, and a setuid bit a model cell set is stripped at once."""
    walks: list[str] = []
    real = hygiene.sanitize_workspace

    def counting(root: Path, **kwargs: object) -> hygiene.WorkspaceScan:
        walks.append("walk")
        return real(root, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(hygiene, "sanitize_workspace", counting)
    spec = _spec(tmp_path / "ws")
    async with LocalSandbox(spec, use_dedicated_uid=False) as sandbox:
        started = len(walks)  # the walk before the first cell
        assert started == 1
        await sandbox.execute("facade = 1", host_code=True)
        await sandbox.execute("helpers = 2", host_code=True)
        assert len(walks) == started  # host cells only: the launch's walk stands
        planted = await sandbox.execute(
            "import os, shutil\nshutil.copy('/usr/bin/id', 'artifacts/x')\n"
            "os.chmod('artifacts/x', 0o4755)"
        )
        assert planted.error is None, planted.error
        assert len(walks) == started + 1
        assert not (spec.workspace / "artifacts" / "x").stat().st_mode & stat.S_ISUID
        await sandbox.execute("later = 3", host_code=True)  # model code ran: walked again
        assert len(walks) == started + 2


# -- no process outlives its sandbox -------------------------------------------------------------
def _state(pid: int) -> str | None:
    """The process's state letter, None if it does not exist at all (not even a zombie)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def _child(pid: int) -> int:
    """The first child of ``pid`` (bwrap's pid 1 under bwrap)."""
    return int(Path(f"/proc/{pid}/task/{pid}/children").read_text().split()[0])


def _gone(pids: list[int], timeout: float = 3.0) -> dict[int, str | None]:
    deadline = time.monotonic() + timeout
    left = {pid: _state(pid) for pid in pids}
    while time.monotonic() < deadline:
        left = {pid: state for pid in pids if (state := _state(pid)) is not None}
        if not left:
            break
        time.sleep(0.05)
    return left


async def test_teardown_leaves_no_process_not_even_a_zombie(tmp_path: Path) -> None:
    """bwrap exits as soon as its pid 1 reports the worker's exit, before reaping pid 1, which
    init then has to reap; the teardown (and the hard stop of a cell) kills pid 1 first so bwrap
    reaps it. (A worker that exits by itself, e.g. ``os._exit``, still races: docs/security.md.)"""
    for how in ("destroy", "timeout", "stop"):
        spec = _spec(tmp_path / how)
        sandbox = LocalSandbox(spec)
        await sandbox.start()
        proc = sandbox._proc
        assert proc is not None and sandbox.worker_pid is not None
        pids = [proc.pid, sandbox.worker_pid, _child(proc.pid)]
        assert all(pid > 0 for pid in pids)
        if how == "timeout":
            with pytest.raises(Exception, match="timed out"):
                await sandbox.execute(
                    "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass",
                    timeout=0.5,
                )
        elif how == "stop":
            await sandbox.execute("f = open('artifacts/unflushed', 'w')\nf.write('kept')")
            await sandbox.stop()  # the graceful path: the namespace is dropped first
            assert (spec.workspace / "artifacts" / "unflushed").read_text() == "kept"
        await sandbox.destroy()
        assert _gone(pids, timeout=0.5) == {}, how


_OWNER = """
import asyncio, sys
from pathlib import Path
from fleet_core.sandbox import SandboxSpec
from fleet_core.sandbox.local import LocalSandbox

async def main() -> None:
    ws = Path(sys.argv[1]); ws.mkdir(exist_ok=True)
    mode = sys.argv[2]
    sandbox = LocalSandbox(
        SandboxSpec(session_id="t", agent_id="owner", workspace=ws),
        isolation_mode=mode, allow_unisolated=mode == "none",
    )
    await sandbox.start()
    proc = sandbox._proc
    children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
    pids = [proc.pid, sandbox.worker_pid, int(children[0]) if children else proc.pid]
    print(" ".join(map(str, pids)), flush=True)
    await sandbox.execute(sys.argv[3], timeout=120)

asyncio.run(main())
"""


@pytest.mark.parametrize(
    ("mode", "code"),
    [
        # Under bwrap: a setsid'd grandchild too; the pid namespace ends with bwrap.
        (
            "auto",
            "import subprocess, time\nsubprocess.Popen(['setsid', 'sleep', '300'])\n"
            "time.sleep(300)",
        ),
        # Unisolated: a computation holding the GIL keeps the worker from noticing EOF on stdin;
        # only the parent-death signal ends it.
        ("none", "x = 10 ** (10 ** 8)"),
    ],
)
def test_no_sandbox_process_survives_a_killed_host(tmp_path: Path, mode: str, code: str) -> None:
    owner = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(_OWNER), str(tmp_path / "ws"), mode, code],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert owner.stdout is not None and owner.stderr is not None
    try:
        pids = [int(x) for x in owner.stdout.readline().split()]
        assert len(pids) == 3, owner.stderr.read() if owner.poll() is not None else pids
        time.sleep(1.0)  # the cell is running
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait()
        left = _gone(pids, timeout=5.0)
        alive = {pid: state for pid, state in left.items() if state not in ("Z", "X")}
        assert alive == {}, alive  # dead at once; a zombie waits only for init to reap it
    finally:
        owner.kill()
        owner.wait()
