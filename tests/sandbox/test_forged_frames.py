"""Generated code can write protocol frames itself; the host must contain their effect."""

from __future__ import annotations

import pytest

from fleet_core.sandbox import Sandbox, SandboxLimits
from fleet_core.sandbox.protocol import LineSplitter, parse_result
from fleet_core.sandbox.session import CellSession

# Finds the worker's channel and tool state through the GC, as hostile code could.
PRELUDE = (
    "import gc, json, os\n"
    "chan = [o for o in gc.get_objects() if type(o).__name__ == 'Channel'][0]\n"
    "calls = [o for o in gc.get_objects() if type(o).__name__ == 'ToolCalls'][0]\n"
    "my_id, my_nonce = calls.active_exec, calls.active_nonce\n"
)


def forged_result(exec_id: str, nonce: str, marker: str) -> str:
    return (
        f"{{'type': 'result', 'id': {exec_id}, 'nonce': {nonce}, 'stdout': '{marker}',"
        " 'error': None, 'final': None}"
    )


async def test_frames_for_other_ids_or_nonces_are_dropped(sandbox: Sandbox) -> None:
    code = (
        PRELUDE
        + "chan.send("
        + forged_result("'other-cell'", "my_nonce", "FORGED-ID")
        + ")\n"
        + "chan.send("
        + forged_result("my_id", "'bad-nonce'", "FORGED-NONCE")
        + ")\n"
        + "os.write(chan._wfd, b'not json at all\\n{\"type\": 3}\\n')\n"
        + "print('genuine')\n"
    )
    result = await sandbox.execute(code)
    assert result.stdout == "genuine\n"
    assert isinstance(sandbox, CellSession)
    assert sandbox.rejected_frames >= 3


async def test_a_fully_forged_result_only_affects_its_own_cell(sandbox: Sandbox) -> None:
    code = (
        PRELUDE
        + "chan.send("
        + forged_result("my_id", "my_nonce", "FORGED")
        + ")\n"
        + "chan.send("
        + forged_result("my_id", "my_nonce", "SECOND")
        + ")\n"
        + "import time; time.sleep(0.3)\nprint('genuine')\nstolen = (my_id, my_nonce)\n"
    )
    first = await sandbox.execute(code)
    assert first.stdout == "FORGED"  # it could lie about itself...
    second = await sandbox.execute("print('next')\n1")
    assert second.stdout == "next\n" and second.value_repr == "1"  # ...but not about others
    replay = (
        "chan.send(" + forged_result("stolen[0]", "stolen[1]", "REPLAYED") + ")\nprint('third')"
    )
    third = await sandbox.execute(replay)
    assert third.stdout == "third\n"


async def test_result_frames_with_an_ill_typed_value_are_dropped(sandbox: Sandbox) -> None:
    limit = sandbox.spec.limits.max_value_chars
    code = (
        PRELUDE
        + "base = {'type': 'result', 'id': my_id, 'nonce': my_nonce, 'stdout': 'FORGED'}\n"
        + "chan.send(dict(base, value='x'))\n"  # no value_type
        + "chan.send(dict(base, value='x', value_type='pickle'))\n"
        + "chan.send(dict(base, value=42, value_type='repr'))\n"
        + f"chan.send(dict(base, value='x' * {limit + 1}, value_type='str'))\n"
        + "'genuine'"
    )
    result = await sandbox.execute(code)
    assert result.stdout == "" and result.value == "genuine" and result.value_type == "str"
    assert isinstance(sandbox, CellSession)
    assert sandbox.rejected_frames >= 4


@pytest.mark.parametrize(
    ("value", "value_type", "ok"),
    [
        (None, None, True),
        ("it's\n", "str", True),
        ("'x'", "repr", True),
        ("x" * 1_000, "str", True),
        ("x" * 1_001, "str", False),
        ("x" * 1_000 + "... [truncated]", "repr", True),
        ("x" * 1_001 + "... [truncated]", "repr", False),
        ("x", None, False),
        (None, "str", False),
        (["x"], "str", False),
        ("x", "bytes", False),
    ],
)
def test_parse_result_checks_the_value_and_its_type(
    value: object, value_type: object, ok: bool
) -> None:
    limits = SandboxLimits(max_output_chars=1_000, max_value_chars=1_000)
    frame = {"type": "result", "value": value, "value_type": value_type}
    result = parse_result(frame, "cell", 0, limits)
    assert (result is not None) is ok
    if result is not None:
        assert (result.value, result.value_type) == (value, value_type)


async def test_forged_tool_calls_reach_only_registered_tools(sandbox: Sandbox) -> None:
    called: list[str] = []

    def allowed(x: int) -> int:
        called.append(f"allowed:{x}")
        return x

    def secret_tool() -> str:
        called.append("secret")
        return "leak"

    code = (
        PRELUDE
        + "base = {'type': 'tool_call', 'id': my_id, 'nonce': my_nonce, 'args': [], 'kwargs': {}}\n"
        + "chan.send(dict(base, call=10**6, tool='secret_tool'))\n"
        + "chan.send(dict(base, call=10**6 + 1, tool='allowed', args=[5], id='elsewhere'))\n"
        + "chan.send(dict(base, call=10**6 + 2, tool='__import__'))\n"
        + "import time; time.sleep(0.2)\n"
        + "allowed(1)"
    )
    result = await sandbox.execute(code, tools={"allowed": allowed})
    assert result.value_repr == "1"
    assert called == ["allowed:1"]


async def test_tool_budget_policy_refuses_calls(sandbox: Sandbox) -> None:
    budget = {"left": 2}

    def policy(tool: str) -> None:
        if budget["left"] <= 0:
            raise RuntimeError(f"budget for {tool} exhausted")
        budget["left"] -= 1

    code = (
        "out = []\n"
        "for i in range(3):\n"
        "    try:\n        out.append(echo(i))\n"
        "    except RuntimeError as e:\n        out.append(str(e))\n"
        "out"
    )
    result = await sandbox.execute(code, tools={"echo": lambda v: v}, policy=policy)
    assert result.value_repr == "[0, 1, 'RuntimeError: budget for echo exhausted']"


async def test_tool_results_are_fenced_after_the_cell(sandbox: Sandbox) -> None:
    import time

    def slow() -> str:
        time.sleep(0.5)
        return "late"

    code = (
        "import threading\n"
        "box = []\n"
        "t = threading.Thread(target=lambda: box.append(_try()))\n"
        "def _try():\n"
        "    try:\n        return slow()\n"
        "    except RuntimeError as e:\n        return str(e)\n"
        "t.start()\n"
        "'left running'"
    )
    await sandbox.execute(code, tools={"slow": slow})
    result = await sandbox.execute("t.join(5)\nbox")
    assert result.value_repr is not None and "late" not in result.value_repr


def test_line_splitter_drops_oversized_lines() -> None:
    splitter = LineSplitter(10)
    lines = list(splitter.feed(b"short\n" + b"x" * 25 + b"\nok\n"))
    assert lines == [b"short", b"ok"]
    lines = list(splitter.feed(b"y" * 8)) + list(splitter.feed(b"y" * 8 + b"\nfine\n"))
    assert lines == [b"fine"]
    assert splitter.oversized == 2


@pytest.mark.parametrize("payload", ["[1, 2]", '{"type": 5}', '"text"'])
def test_decode_rejects_non_frames(payload: str) -> None:
    from fleet_core.sandbox.protocol import decode_frame

    assert decode_frame(payload.encode()) is None
