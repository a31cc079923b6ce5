"""Adversarial suite against LocalSandbox: every attack is contained and the host unharmed."""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_support import TEST_LIMITS, MakeSandbox, needs_bwrap, needs_pids_cgroup

from fleet_core.sandbox import Sandbox
from fleet_core.sandbox.local import LocalSandbox

pytestmark = needs_bwrap


async def run(sandbox: Sandbox, code: str) -> str:
    result = await sandbox.execute(code)
    assert result.error is None, result.error
    return str(result.value_repr)


async def test_host_files_are_invisible(sandbox: Sandbox) -> None:
    code = (
        "import os\n"
        "def probe(p):\n"
        "    try:\n        open(p).read(); return 'READ'\n"
        "    except OSError as e:\n        return type(e).__name__\n"
        "[probe('/etc/passwd'), probe('/etc/shadow'), probe(os.path.expanduser('~root/.bashrc')),"
        " os.path.exists('/root/.ssh'), os.path.exists('/home'), os.getuid()]"
    )
    value = await run(sandbox, code)
    assert "READ" not in value
    assert value.endswith("False, False, 65534]")


async def test_writes_outside_the_workspace_do_not_reach_the_host(sandbox: Sandbox) -> None:
    marker = f"fleet-escape-{uuid.uuid4().hex}"
    code = (
        "def attempt(p):\n"
        "    try:\n        open(p, 'w').write('x'); return 'WROTE'\n"
        "    except OSError as e:\n        return type(e).__name__\n"
        f"[attempt('/usr/{marker}'), attempt('/tmp/{marker}'), attempt('/{marker}'),"
        " attempt('files/new.txt')]"
    )
    value = await run(sandbox, code)
    assert value.startswith("['OSError'") or value.startswith("['PermissionError'")
    assert "'WROTE'" in value  # its private /tmp is writable...
    assert not Path(f"/tmp/{marker}").exists()  # ...but is not the host's  # noqa: ASYNC240
    assert not Path(f"/usr/{marker}").exists() and not Path(f"/{marker}").exists()  # noqa: ASYNC240
    assert value.endswith("'OSError']") or value.endswith("Error']")  # files/ is read-only


@pytest.fixture
def loopback_server() -> Iterator[int]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(5)
    accepted: list[socket.socket] = []

    def serve() -> None:
        try:
            accepted.append(server.accept()[0])
        except OSError:
            return

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    server.close()
    assert not accepted, "the sandbox reached a host loopback server"


async def test_no_network_not_even_host_loopback(sandbox: Sandbox, loopback_server: int) -> None:
    code = (
        "import socket\n"
        "def connect(host, port):\n"
        "    try:\n"
        "        socket.create_connection((host, port), timeout=2).close(); return 'CONNECTED'\n"
        "    except OSError as e:\n        return type(e).__name__\n"
        f"[connect('127.0.0.1', {loopback_server}), connect('pypi.org', 443),"
        " connect('1.1.1.1', 53)]"
    )
    value = await run(sandbox, code)
    assert "CONNECTED" not in value


async def test_host_environment_secrets_do_not_leak(
    make_sandbox: MakeSandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = f"s3cret-{uuid.uuid4().hex}"
    monkeypatch.setenv("FLEET_LM_API_KEY", secret)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    sandbox = await make_sandbox("env")
    code = (
        "import os, glob\n"
        "seen = repr(dict(os.environ))\n"
        "for p in glob.glob('/proc/*/environ'):\n"
        "    try:\n        seen += open(p, 'rb').read().decode(errors='replace')\n"
        "    except OSError:\n        pass\n"
        "seen"
    )
    result = await sandbox.execute(code)
    assert secret not in (result.value_repr or "")
    assert "FLEET_LM_API_KEY" not in (result.value_repr or "")


async def test_cpu_budget_stops_an_infinite_loop_keeping_state(make_sandbox: MakeSandbox) -> None:
    limits = TEST_LIMITS.model_copy(update={"cpu_seconds_per_cell": 1})
    sandbox = await make_sandbox("cpu", limits=limits)
    await sandbox.execute("kept = 'yes'")
    result = await sandbox.execute("while True:\n    pass", timeout=15)
    assert result.error is not None and result.error.type == "CpuTimeExceeded"
    assert (await sandbox.execute("kept")).value_repr == "'yes'"


async def test_10_gib_allocation_is_a_memory_error(make_sandbox: MakeSandbox) -> None:
    limits = TEST_LIMITS.model_copy(update={"memory_bytes": 1 << 30})
    sandbox = await make_sandbox("mem", limits=limits)
    await sandbox.execute("kept = 1")
    result = await sandbox.execute("big = bytearray(10 * 2**30)")
    assert result.error is not None and result.error.type == "MemoryError"
    numpy = await sandbox.execute("import numpy as np\nnp.ones((3 * 2**30,), dtype=np.uint8)")
    assert numpy.error is not None and numpy.error.type in ("MemoryError", "_ArrayMemoryError")
    assert (await sandbox.execute("kept")).value_repr == "1"


async def test_file_size_limit(make_sandbox: MakeSandbox) -> None:
    limits = TEST_LIMITS.model_copy(update={"max_file_bytes": 1 << 20})
    sandbox = await make_sandbox("fsize", limits=limits)
    result = await sandbox.execute("open('artifacts/big.bin', 'wb').write(b'0' * (4 << 20))")
    assert result.error is not None and "File too large" in result.error.message


@needs_pids_cgroup
async def test_fork_bomb_is_bounded_by_the_pids_cgroup(make_sandbox: MakeSandbox) -> None:
    limits = TEST_LIMITS.model_copy(update={"max_processes": 16})
    sandbox = await make_sandbox("fork", limits=limits)
    code = (
        "import os, time\n"
        "n = 0\n"
        "try:\n"
        "    for _ in range(300):\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(60)\n"
        "            os._exit(0)\n"
        "        n += 1\n"
        "except OSError as e:\n"
        "    print(type(e).__name__)\n"
        "n"
    )
    result = await sandbox.execute(code, timeout=15)
    assert result.error is None, result.error
    assert int(result.value_repr or "999") < 16
    assert "BlockingIOError" in result.stdout or "OSError" in result.stdout
    assert isinstance(sandbox, LocalSandbox)
    pid = sandbox.worker_pid
    assert pid is not None
    await sandbox.destroy()
    assert not Path(f"/proc/{pid}").exists()  # noqa: ASYNC240


async def test_process_tree_dies_with_the_sandbox(make_sandbox: MakeSandbox) -> None:
    sandbox = await make_sandbox("tree")
    duration = f"{1000 + uuid.uuid4().int % 100000}"  # unique: other jobs may run sleep too
    code = (
        "import subprocess\n"
        f"p = subprocess.Popen(['sleep', '{duration}'], start_new_session=True)\n"
        "p.pid > 0"
    )
    result = await sandbox.execute(code)
    assert result.error is None, result.error
    before: set[int] = set()
    for _ in range(50):
        before = _host_sleepers(duration)
        if before:
            break
        await asyncio.sleep(0.02)
    assert before, "the sleeper should be visible from the host before destroy"
    await sandbox.destroy()
    assert not (_host_sleepers(duration) & before)


def _host_sleepers(duration: str) -> set[int]:
    wanted = f"sleep\x00{duration}\x00".encode()
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if Path(f"/proc/{entry}/cmdline").read_bytes() == wanted:
                    found.add(int(entry))
            except OSError:
                continue
    return found
