"""Hostile code (issue 13): a corpus of sandbox escape attempts run as cells in a real LocalSandbox.

Each attempt is a cell that returns ``"blocked"`` when the sandbox held, or a description of what
got through. Afterwards the host must be unchanged: a few host paths are stat'ed before and after,
a host canary file keeps its content, the host process is alive, and nothing special (setuid
bits, FIFOs) is left in the workspace. The long variant (``FLEET_LONG_TESTS=1``) repeats the
corpus and uses bigger floods.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import stat
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from fleet_core.api import FleetRuntime
from fleet_core.config import load_config
from fleet_core.engine.scripted_lm import SwitchableLms, action, scripted_lm, submit
from fleet_core.models import TurnRequest
from fleet_core.sandbox import SandboxLimits, SandboxSpec, WorkspaceQuotaError, hygiene
from fleet_core.sandbox.errors import SandboxCrashedError
from fleet_core.sandbox.isolation import find_bwrap
from fleet_core.sandbox.local import LocalSandbox

pytestmark = pytest.mark.skipif(find_bwrap() is None, reason="bubblewrap not available")

QUOTA = 48 << 20
HOST_PATHS = (
    "/etc/passwd",
    "/etc/shadow",
    "/etc",
    "/root",
    "/usr/bin",
    "/usr/bin/passwd",
    "/usr/fleet-escape",  # must never exist
    "/usr/bin/fleet-escape",
)
CANARY = "fleet-hostile-canary-7f3a"

_PROBE = """
def attempt(fn):
    try:
        out = fn()
    except BaseException as e:
        return 'blocked'
    return 'ESCAPED: ' + repr(out)[:200]
"""

# name -> cell code; the cell's value must be 'blocked'. ``host_port`` and ``host_pid`` are
# variables from the host.
ATTEMPTS: dict[str, str] = {
    "read /etc/shadow": "attempt(lambda: open('/etc/shadow').read())",
    "read /etc/passwd": "attempt(lambda: open('/etc/passwd').read())",
    "read the host's home": (
        "import os\nattempt(lambda: (os.listdir('/root/.ssh'), open('/root/.bashrc').read()))"
    ),
    "list /home": "attempt(lambda: __import__('os').listdir('/home'))",
    "host process in /proc": ("attempt(lambda: open(f'/proc/{host_pid}/environ').read())"),
    "only sandbox pids in /proc": (
        "import os\n"
        "pids = [int(p) for p in os.listdir('/proc') if p.isdigit()]\n"
        "'blocked' if max(pids) < 1000 else f'ESCAPED: {sorted(pids)[-5:]}'"
    ),
    "connect to the host's loopback": (
        "import socket, time\n"
        "t = time.monotonic()\n"
        "r = attempt(lambda: socket.create_connection(('127.0.0.1', host_port), timeout=5))\n"
        "r if time.monotonic() - t < 1 else 'ESCAPED: connect did not fail at once'"
    ),
    "connect to an external address": (
        "import socket, time\n"
        "t = time.monotonic()\n"
        "r = attempt(lambda: socket.create_connection(('192.0.2.1', 80), timeout=5))\n"
        "r if time.monotonic() - t < 1 else 'ESCAPED: connect did not fail at once'"
    ),
    "resolve a name": "attempt(lambda: __import__('socket').getaddrinfo('example.com', 80))",
    "write to /usr": "attempt(lambda: open('/usr/fleet-escape', 'w').write('x'))",
    "write to the read-only files/": "attempt(lambda: open('files/input.txt', 'w').write('x'))",
    "host environment": (
        "import os\n"
        f"'ESCAPED: canary' if any('{CANARY}' in v for v in os.environ.values()) else 'blocked'"
    ),
    "device node": (
        "import os, stat\n"
        "attempt(lambda: os.mknod('artifacts/null', 0o666 | stat.S_IFCHR, os.makedev(1, 3)))"
    ),
    "mount something": (
        "import subprocess\n"
        "r = subprocess.run(['mount', '-t', 'tmpfs', 'x', 'artifacts'], capture_output=True)\n"
        "'blocked' if r.returncode else 'ESCAPED: mounted'"
    ),
    "setuid binary runs as root": (
        "import os, shutil, subprocess\n"
        "shutil.copy('/usr/bin/id', 'artifacts/id'); os.chmod('artifacts/id', 0o4755)\n"
        "out = subprocess.run(['./artifacts/id', '-u'], capture_output=True, text=True).stdout\n"
        "'blocked' if out.strip() != '0' else 'ESCAPED: euid 0'"
    ),
    "symlink out of the workspace, then write through it": (
        "import os\n"
        "if os.path.lexists('artifacts/out'): os.remove('artifacts/out')\n"
        "os.symlink('/usr/bin', 'artifacts/out')\n"
        "attempt(lambda: open('artifacts/out/fleet-escape', 'w').write('x'))"
    ),
    "hard link a host binary": (
        "import os\nattempt(lambda: os.link('/usr/bin/passwd', 'artifacts/passwd'))"
    ),
    "signal the parent": (
        "import os, signal\n"
        "os.kill(os.getppid(), signal.SIGKILL) if os.getppid() > 0 else None\n"
        "attempt(lambda: os.kill(host_pid, signal.SIGKILL))"
    ),
    "ptrace the host process": (
        "import ctypes, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "'blocked' if libc.ptrace(16, host_pid, 0, 0) != 0 else 'ESCAPED: attached'"
    ),
    "new user namespace with root": (
        "import subprocess\n"
        "r = subprocess.run(['unshare', '-r', 'cat', '/etc/shadow'], capture_output=True)\n"
        "'blocked' if r.returncode else 'ESCAPED: read /etc/shadow'"
    ),
}
for _name, _code in list(ATTEMPTS.items()):  # every cell starts with the probe helper
    ATTEMPTS[_name] = _PROBE + _code


def _snapshot() -> dict[str, tuple[int, ...] | None]:
    snap: dict[str, tuple[int, ...] | None] = {}
    for path in HOST_PATHS:
        try:
            info = os.lstat(path)
        except OSError:
            snap[path] = None
            continue
        snap[path] = (info.st_mode, info.st_uid, info.st_gid, info.st_size, info.st_mtime_ns)
    return snap


@pytest.fixture
def host_listener() -> Iterator[int]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    try:
        yield server.getsockname()[1]
    finally:
        server.close()


@pytest.fixture
async def hostile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[LocalSandbox]:
    monkeypatch.setenv("FLEET_HOSTILE_CANARY", CANARY)
    workspace = tmp_path / "ws"
    (workspace / "files").mkdir(parents=True)
    (workspace / "files" / "input.txt").write_text("input")
    limits = SandboxLimits(
        workspace_quota_bytes=QUOTA, cell_timeout_seconds=30, interrupt_grace_seconds=1.0
    )
    spec = SandboxSpec(session_id="hostile", agent_id="root", workspace=workspace, limits=limits)
    sandbox = LocalSandbox(spec, use_dedicated_uid=False)
    await sandbox.start()
    try:
        yield sandbox
    finally:
        await sandbox.destroy()


async def _run_corpus(sandbox: LocalSandbox, variables: dict[str, Any]) -> dict[str, str]:
    verdicts: dict[str, str] = {}
    for name, code in ATTEMPTS.items():
        result = await sandbox.execute(code, variables=variables)
        verdicts[name] = (
            str(result.value) if result.error is None else f"{result.error.type}: error"
        )
    return verdicts


async def _floods(sandbox: LocalSandbox, *, mib: int) -> None:
    flood = await sandbox.execute(f"print('x' * ({mib} << 20))")
    assert flood.stdout_truncated and len(flood.stdout) <= 2 * sandbox.spec.limits.max_output_chars
    fd_flood = await sandbox.execute(f"import os\nos.write(1, b'y' * ({mib} << 20))")
    assert len(fd_flood.stdout) <= 2 * sandbox.spec.limits.max_output_chars
    try:
        disk = await sandbox.execute(
            "b = b'z' * (1 << 20)\nwith open('artifacts/fill', 'wb') as f:\n"
            "    while True: f.write(b)\n"
        )
        assert disk.error is not None and disk.error.type == "WorkspaceQuotaExceeded"
    except WorkspaceQuotaError:
        await sandbox.start()
    usage = hygiene.scan_workspace(sandbox.spec.workspace, sanitize=False, exclude=("files",))
    assert usage.bytes_used <= QUOTA + (128 << 20)
    await sandbox.execute("import os\nos.remove('artifacts/fill')")


async def _kill_everything(sandbox: LocalSandbox) -> None:
    """The last attempt: SIGKILL every process the sandbox can see (itself included)."""
    with contextlib.suppress(SandboxCrashedError):
        await sandbox.execute("import os, signal\nos.kill(-1, signal.SIGKILL)\nos.kill(0, 9)")


def _workspace_is_clean(root: Path) -> None:
    for path in [root, *root.rglob("*")]:
        mode = path.lstat().st_mode
        assert not mode & hygiene.SPECIAL_BITS, path
        assert stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode), path


async def _corpus_round(sandbox: LocalSandbox, port: int, *, mib: int) -> None:
    before = _snapshot()
    canary = sandbox.spec.workspace.parent / "host-canary.txt"
    canary.write_text(CANARY)
    started = time.monotonic()
    verdicts = await _run_corpus(sandbox, {"host_port": port, "host_pid": os.getpid()})
    escaped = {k: v for k, v in verdicts.items() if v != "blocked"}
    assert escaped == {}, escaped
    await _floods(sandbox, mib=mib)
    await _kill_everything(sandbox)
    assert time.monotonic() - started < 120
    assert _snapshot() == before  # the host is unchanged
    assert canary.read_text() == CANARY
    await sandbox.start()  # the host process is alive and can start a fresh REPL
    _workspace_is_clean(sandbox.spec.workspace)


async def test_hostile_corpus_fails_inside_and_leaves_the_host_unchanged(
    hostile: LocalSandbox, host_listener: int
) -> None:
    await _corpus_round(hostile, host_listener, mib=8)


@pytest.mark.long
async def test_hostile_corpus_long(hostile: LocalSandbox, host_listener: int) -> None:
    for _round in range(5):
        await _corpus_round(hostile, host_listener, mib=256)


# -- many files: the file-count quota, a Session's next Turn and paged listings -----------------
MANY_FILES = 50_000
MANY_FILES_LIMIT = 2_000  # sandbox.max_files for this test (the default is 10,000)
FLOOD = (
    "import os\nos.makedirs('artifacts/flood', exist_ok=True)\n"
    f"for i in range({MANY_FILES}):\n    open(f'artifacts/flood/{{i}}', 'w').close()\n"
)


async def test_many_files_are_stopped_by_the_quota_and_the_session_stays_bounded(
    tmp_path: Path,
) -> None:
    """Model code tries 50,000 empty files (nothing written: the byte quota never sees them).
    The file-count quota stops the cell with its message and the Turn goes on; the files made
    stay. The Session's next Turn completes, its manifest and artifact list stay bounded, and
    ``fleet/workspace/list``'s pages are bounded by their limit, not by the workspace."""
    config = load_config(
        environ={
            "FLEET_STATE_DIR": str(tmp_path / "state"),
            "FLEET_SANDBOX__MAX_FILES": str(MANY_FILES_LIMIT),
        },
        cwd=tmp_path,
    )
    lms = SwitchableLms()
    runtime = await FleetRuntime.open(config, lm_provider=lms, trace_export="deferred")
    try:
        await runtime.new_session("many", mode="rlm")
        lms.root = scripted_lm([action(FLOOD), submit("'flooded'")])
        events: list[Any] = []
        flooded = await runtime.run_turn(
            TurnRequest(session_id="many", task="make files"), on_event=events.append
        )
        assert flooded.status == "completed", flooded.error
        stopped = [
            e.payload
            for e in events
            if e.kind == "cell_output" and e.payload.get("phase") == "task" and not e.payload["ok"]
        ]
        assert stopped and "WorkspaceQuotaExceeded" in stopped[0]["error"], stopped
        assert "The cell created too many files" in stopped[0]["error"]
        assert f"the limit is {MANY_FILES_LIMIT:,}" in stopped[0]["error"]
        root = runtime.workspace("many").root
        held = hygiene.scan_workspace(root, sanitize=False).entries
        assert MANY_FILES_LIMIT < held < MANY_FILES // 4, held  # stopped early, nothing lost
        storage = config.settings.storage
        assert len(flooded.artifacts) <= storage.max_turn_artifacts

        lms.root = scripted_lm([action("x = 1"), submit("'still here'")])
        after = await runtime.run_turn(TurnRequest(session_id="many", task="anything else?"))
        assert after.status == "completed" and after.answer == "still here", after.error
        assert after.artifacts == [] and after.artifacts_omitted == 0  # nothing it did not touch
        manifest = await runtime.manifest("many")
        assert len(manifest) <= storage.manifest_max_chars + 200
        assert "more files" in manifest

        page = await runtime.workspace_page("many")
        assert len(page.files) + len(page.artifacts) == 500 and page.next_cursor
        size = len(json.dumps({"files": [f.wire() for f in page.files],
                               "artifacts": [f.wire() for f in page.artifacts]}))  # fmt: skip
        assert size <= 500 * 200  # bounded by the page, whatever the workspace holds
        sessions = await runtime.sessions_page(limit=1)
        assert [s.session_id for s in sessions.sessions] == ["many"]
    finally:
        await runtime.close()
