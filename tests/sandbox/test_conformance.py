"""Backend-neutral conformance suite: every Sandbox backend must pass it."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from sandbox_support import (
    CAPABILITIES,
    TEST_LIMITS,
    MakeSandbox,
    break_transport_after_next_cell,
)

from fleet_core.errors import WorkspacePathError
from fleet_core.sandbox import (
    ExecutionCancelledError,
    ExecutionOutcomeUnknownError,
    ExecutionTimeoutError,
    Sandbox,
    SandboxCrashedError,
    SandboxLimits,
)

RUNS_ON_DAYTONA = True  # also against the fake Daytona server (tests/sandbox/daytona_fake.py)


async def test_state_persists_across_cells(sandbox: Sandbox) -> None:
    await sandbox.execute("import math\nx = 40\ndef add(a): return a + x")
    result = await sandbox.execute("add(2)")
    assert result.ok and result.value_repr == "42"
    assert (await sandbox.execute("math.floor(2.5)")).value_repr == "2"


async def test_variables_are_injected(sandbox: Sandbox) -> None:
    result = await sandbox.execute("len(text) + n", variables={"text": "abc", "n": 1})
    assert result.value_repr == "4"


async def test_print_and_trailing_expression_both_kept(sandbox: Sandbox) -> None:
    result = await sandbox.execute("print('shown')\n6 * 7")
    assert result.stdout == "shown\n"
    assert result.value_repr == "42"


async def test_error_is_data_and_keeps_earlier_output(sandbox: Sandbox) -> None:
    result = await sandbox.execute("print('before')\nraise ValueError('bad')")
    assert result.stdout == "before\n"
    assert result.error is not None and result.error.type == "ValueError"
    assert result.error.message == "bad"
    assert "<cell-" in result.error.traceback


async def test_syntax_error_is_data(sandbox: Sandbox) -> None:
    result = await sandbox.execute("def (")
    assert result.error is not None and result.error.type == "SyntaxError"


async def test_submit_with_output_fields(sandbox: Sandbox) -> None:
    fields = [{"name": "answer", "type": "str"}, {"name": "n", "type": "int"}]
    result = await sandbox.execute("SUBMIT(answer='x', n=3)\nprint('never')", output_fields=fields)
    assert result.final == {"answer": "x", "n": 3}
    assert "never" not in result.stdout
    positional = await sandbox.execute("SUBMIT('y', 4)", output_fields=fields)
    assert positional.final == {"answer": "y", "n": 4}
    wrong = await sandbox.execute("SUBMIT(answer='z')", output_fields=fields)
    assert wrong.final is None and wrong.error is not None and wrong.error.type == "TypeError"


async def test_submit_numpy_values(sandbox: Sandbox) -> None:
    result = await sandbox.execute("import numpy as np\nSUBMIT(total=np.int64(6), v=np.arange(3))")
    assert result.final == {"total": 6, "v": [0, 1, 2]}


async def test_tools_positional_keyword_async_and_errors(sandbox: Sandbox) -> None:
    async def double(x: int) -> int:
        return 2 * x

    def fail() -> None:
        raise LookupError("nope")

    tools = {"add": lambda a, b=0: a + b, "double": double, "fail": fail}
    result = await sandbox.execute(
        "r = [add(1, 2), add(1, b=5), double(4)]\n"
        "try:\n    fail()\nexcept RuntimeError as e:\n    r.append(str(e))\nr",
        tools=tools,
    )
    assert result.value_repr == "[3, 6, 8, 'LookupError: nope']"
    assert result.tool_calls == 4


async def test_tool_calls_from_threads_run_concurrently(sandbox: Sandbox) -> None:
    active, peak = 0, 0
    lock = threading.Lock()

    def slow_echo(value: int) -> int:
        nonlocal active, peak
        with lock:
            active += 1
            peak = max(peak, active)
        time.sleep(0.3)
        with lock:
            active -= 1
        return value

    code = (
        "from concurrent.futures import ThreadPoolExecutor\n"
        "with ThreadPoolExecutor(8) as pool:\n"
        "    out = list(pool.map(slow_echo, range(8)))\n"
        "out"
    )
    started = time.perf_counter()
    result = await sandbox.execute(code, tools={"slow_echo": slow_echo})
    assert result.value_repr == str(list(range(8)))
    assert peak >= 4
    assert time.perf_counter() - started < 2.0


async def test_output_is_bounded(make_sandbox: MakeSandbox) -> None:
    limits = TEST_LIMITS.model_copy(update={"max_output_chars": 1_000})
    sandbox = await make_sandbox(limits=limits)
    result = await sandbox.execute(
        "import sys\nprint('x' * 300_000)\nsys.stderr.write('e' * 5000)\n['v'] * 5000"
    )
    assert len(result.stdout) <= 1_000 and result.stdout_truncated
    assert len(result.stderr) <= 1_000 and result.stderr_truncated
    assert result.value_type == "repr" and result.value is not None
    assert len(result.value) < 1_100 and result.value.endswith("... [truncated]")


TRICKY = "a 'quoted' \"line\"\nnext\tline \\ back — ünïcødé 🚀 \u2028 end"


async def test_str_value_comes_back_raw(sandbox: Sandbox) -> None:
    result = await sandbox.execute("text", variables={"text": TRICKY})
    assert result.value_type == "str" and result.value == TRICKY  # the characters, not a repr
    assert result.value_repr == repr(TRICKY)
    assert (await sandbox.execute("''")).value == ""
    subclass = await sandbox.execute("class S(str):\n    def __str__(self): return 'lie'\nS('x')")
    assert subclass.value_type == "str" and subclass.value == "x"
    number = await sandbox.execute("42")
    assert number.value_type == "repr" and number.value == "42"
    assert (await sandbox.execute("None")).value is None


async def test_str_value_over_the_limit_is_a_clear_cell_error(make_sandbox: MakeSandbox) -> None:
    limits = TEST_LIMITS.model_copy(update={"max_value_chars": 5_000})
    sandbox = await make_sandbox(limits=limits)
    assert (await sandbox.execute("'v' * 5_000")).value == "v" * 5_000
    result = await sandbox.execute("print('before')\nbig = 'v' * 5_001\nbig")
    assert result.value is None and result.stdout == "before\n"
    assert result.error is not None and result.error.type == "ValueTooLarge"
    assert "5001 characters; at most 5000" in result.error.message
    assert "artifacts/" in result.error.message
    assert (await sandbox.execute("len(big)")).value == "5001"  # the REPL state is kept


async def test_fd_level_output_is_captured_not_protocol(sandbox: Sandbox, backend: str) -> None:
    result = await sandbox.execute("import os\nos.write(1, b'raw fd output\\n')\n1")
    assert result.value_repr == "1"
    if CAPABILITIES[backend]["fd_output_captured"]:
        assert "raw fd output" in result.stdout
    assert (await sandbox.execute("2")).value_repr == "2"  # the protocol is intact


async def test_timeout_interrupts_and_keeps_state(sandbox: Sandbox) -> None:
    await sandbox.execute("x = 41")
    with pytest.raises(ExecutionTimeoutError) as caught:
        await sandbox.execute("print('started')\nwhile True:\n    pass", timeout=0.5)
    assert caught.value.state_preserved
    assert "started" in caught.value.partial.stdout
    assert (await sandbox.execute("x + 1")).value_repr == "42"
    with pytest.raises(ExecutionTimeoutError) as slept:
        await sandbox.execute("import time\ntime.sleep(60)", timeout=0.3)
    assert slept.value.state_preserved


async def test_timeout_kills_when_interrupt_is_ignored(sandbox: Sandbox) -> None:
    code = "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass"
    started = time.perf_counter()
    with pytest.raises(ExecutionTimeoutError) as caught:
        await sandbox.execute(code, timeout=0.3)
    assert not caught.value.state_preserved
    assert time.perf_counter() - started < 5
    with pytest.raises(SandboxCrashedError):
        await sandbox.execute("1")
    await sandbox.start()
    assert (await sandbox.execute("1 + 1")).value_repr == "2"


async def test_interrupt_cancels_running_cell_keeping_state(sandbox: Sandbox) -> None:
    await sandbox.execute("y = 'kept'")
    task = asyncio.create_task(sandbox.execute("import time\ntime.sleep(30)"))
    await asyncio.sleep(0.3)
    await sandbox.interrupt()
    with pytest.raises(ExecutionCancelledError) as caught:
        await task
    assert caught.value.state_preserved
    assert (await sandbox.execute("y")).value_repr == "'kept'"


async def test_task_cancellation_interrupts_the_cell(sandbox: Sandbox) -> None:
    task = asyncio.create_task(sandbox.execute("z = 1\nimport time\ntime.sleep(30)"))
    await asyncio.sleep(0.3)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (await sandbox.execute("z")).value_repr == "1"


async def test_crash_is_reported_and_workspace_survives(sandbox: Sandbox) -> None:
    await sandbox.execute("open('artifacts/before.txt', 'w').write('kept')\nv = 1")
    with pytest.raises(SandboxCrashedError):
        await sandbox.execute("import os\nos._exit(3)")
    assert await sandbox.read_file("artifacts/before.txt") == b"kept"
    with pytest.raises(SandboxCrashedError):
        await sandbox.execute("v")
    await sandbox.start()
    result = await sandbox.execute("'v' in globals()")
    assert result.value_repr == "False"


async def test_unknown_outcome_is_never_replayed(sandbox: Sandbox) -> None:
    code = (
        "import os, time\n"
        "with open('artifacts/runs.txt', 'a') as f:\n    f.write('ran\\n')\n"
        "for fd in range(3, 256):\n"
        "    try:\n        os.close(fd)\n    except OSError:\n        pass\n"
    )
    break_transport_after_next_cell(sandbox)
    with pytest.raises(ExecutionOutcomeUnknownError):
        await sandbox.execute(code, timeout=10)
    with pytest.raises(SandboxCrashedError):
        await sandbox.execute("1")
    await sandbox.start()
    assert await sandbox.read_file("artifacts/runs.txt") == b"ran\n"


async def test_workspace_files_roundtrip(sandbox: Sandbox) -> None:
    await sandbox.write_file("artifacts/in.txt", b"hello")
    result = await sandbox.execute("open('artifacts/in.txt').read().upper()")
    assert result.value_repr == "'HELLO'"
    await sandbox.execute("open('artifacts/out.txt', 'w').write('made')")
    paths = [f.path for f in await sandbox.list_files("artifacts")]
    assert paths == ["artifacts/in.txt", "artifacts/out.txt"]
    await sandbox.delete_file("artifacts/in.txt")
    assert [f.path for f in await sandbox.list_files("artifacts")] == ["artifacts/out.txt"]
    with pytest.raises(WorkspacePathError):
        await sandbox.read_file("../etc/passwd")


async def test_destroy_is_idempotent(make_sandbox: MakeSandbox) -> None:
    sandbox = await make_sandbox("d")
    await sandbox.destroy()
    await sandbox.destroy()
    never_started = await make_sandbox("n", start=False)
    await never_started.destroy()


async def test_info_reports_packages(sandbox: Sandbox) -> None:
    assert sandbox.info is not None
    assert sandbox.info.packages["numpy"] and sandbox.info.packages["pandas"]


async def test_limits_from_settings() -> None:
    from fleet_core.config import SandboxSettings

    limits = SandboxLimits.from_settings(SandboxSettings(memory_limit_mb=512))
    assert limits.memory_bytes == 512 << 20
