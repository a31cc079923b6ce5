"""SandboxInterpreter emits DSPy's ``on_interpreter_*`` callbacks like dspy's own interpreters."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import dspy
import pytest
from dspy.utils.callback import BaseCallback
from sandbox_support import needs_bwrap

from fleet_core.config import SandboxSettings
from fleet_core.sandbox.interpreter import make_local_interpreter_factory

pytestmark = needs_bwrap


class Recorder(BaseCallback):
    def __init__(self) -> None:
        self.events: list[tuple[str, str, Any]] = []
        self.parents: dict[str, str | None] = {}
        self._lock = threading.Lock()

    def _start(self, kind: str, call_id: str, inputs: dict[str, Any]) -> None:
        from dspy.utils import callback as callback_module

        with self._lock:
            self.events.append((kind + "_start", call_id, inputs))
            self.parents[call_id] = callback_module.ACTIVE_CALL_ID.get()

    def _end(self, kind: str, call_id: str, outputs: Any, exception: BaseException | None) -> None:
        with self._lock:
            self.events.append((kind + "_end", call_id, exception or outputs))

    def on_interpreter_startup_start(self, call_id: str, instance: Any, inputs: Any) -> None:
        self._start("startup", call_id, inputs)

    def on_interpreter_startup_end(self, call_id: str, outputs: Any, exception: Any = None) -> None:
        self._end("startup", call_id, outputs, exception)

    def on_interpreter_execute_start(self, call_id: str, instance: Any, inputs: Any) -> None:
        self._start("execute", call_id, inputs)

    def on_interpreter_execute_end(self, call_id: str, outputs: Any, exception: Any = None) -> None:
        self._end("execute", call_id, outputs, exception)

    def on_interpreter_tool_call_start(self, call_id: str, instance: Any, inputs: Any) -> None:
        self._start("tool_call", call_id, inputs)

    def on_interpreter_tool_call_end(
        self, call_id: str, outputs: Any, exception: Any = None
    ) -> None:
        self._end("tool_call", call_id, outputs, exception)

    def on_interpreter_shutdown_start(self, call_id: str, instance: Any, inputs: Any) -> None:
        self._start("shutdown", call_id, inputs)

    def on_interpreter_shutdown_end(
        self, call_id: str, outputs: Any, exception: Any = None
    ) -> None:
        self._end("shutdown", call_id, outputs, exception)

    def kinds(self) -> list[str]:
        return [kind for kind, _id, _payload in self.events]


def test_interpreter_callbacks_cover_start_execute_tools_and_shutdown(tmp_path: Path) -> None:
    recorder = Recorder()
    factory = make_local_interpreter_factory(SandboxSettings(), parent_dir=tmp_path)
    interpreter = factory()
    interpreter.callbacks.append(recorder)

    def echo(value: Any) -> Any:
        return value

    async def shout(text: str) -> str:
        return text.upper()

    interpreter.tools.update({"echo": echo, "shout": shout})
    try:
        interpreter.start()
        # printed output, then the str value as it is (not its repr)
        assert interpreter.execute("print(echo(41) + 1)\nshout('hi')") == "42\nHI"
        with pytest.raises(dspy.CodeExecutionError):
            interpreter.execute("echo(1)\nraise ValueError('boom')")
    finally:
        interpreter.shutdown()

    kinds = recorder.kinds()
    assert kinds[:2] == ["startup_start", "startup_end"]
    assert kinds[-2:] == ["shutdown_start", "shutdown_end"]
    assert kinds.count("execute_start") == 2 and kinds.count("execute_end") == 2
    tool_starts = [e for e in recorder.events if e[0] == "tool_call_start"]
    assert [e[2]["tool_name"] for e in tool_starts] == ["echo", "shout", "echo"]
    # positional arguments arrive mapped onto the tool's signature
    assert tool_starts[0][2]["args"] == [] and tool_starts[0][2]["kwargs"] == {"value": 41}
    assert tool_starts[1][2]["kwargs"] == {"text": "hi"}
    assert [e[2] for e in recorder.events if e[0] == "tool_call_end"][:2] == [41, "HI"]
    executes = [e for e in recorder.events if e[0] == "execute_start"]
    assert all(recorder.parents[e[1]] == executes[0][1] for e in tool_starts[:2])
    failed = [e for e in recorder.events if e[0] == "execute_end"][1]
    assert isinstance(failed[2], dspy.CodeExecutionError)


def test_global_callbacks_from_dspy_settings(tmp_path: Path) -> None:
    recorder = Recorder()
    factory = make_local_interpreter_factory(SandboxSettings(), parent_dir=tmp_path)
    interpreter = factory()
    with dspy.context(callbacks=[recorder]):
        try:
            assert interpreter.execute("6 * 7") == "42"
        finally:
            interpreter.shutdown()
    assert "execute_end" in recorder.kinds() and "shutdown_end" in recorder.kinds()
