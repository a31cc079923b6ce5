"""The Turn's view of a sandbox interpreter: gated by the TurnControl, evented, interruptible.

``TurnInterpreter`` wraps any DSPy ``CodeInterpreter`` (our sandbox adapter): it checks the Turn's
deadline/cancel/budget before and after every cell, emits ``code_cell``/``cell_output``, counts
sandbox errors, interrupts the running cell when the Turn stops, and runs host tools in a copy of
the calling thread's context (so ``dspy.context`` settings reach tool calls made from the sandbox).
"""

from __future__ import annotations

import contextvars
import functools
import itertools
import time
from collections.abc import Callable
from typing import Any

from dspy.primitives.code_interpreter import CodeExecutionError, FinalOutput
from dspy.primitives.facade import SHIM_SETUP

from fleet_core.engine.control import TurnControl
from fleet_core.engine.stream import clip

CODE_CHARS = 20_000
SKILL_HELPERS = '''
def run_skill_script(name, path, args=None, timeout=60):
    """Run a Skill's script: skills/<name>/<path> under scripts/ (.py with this Python, .sh with
    bash), cwd = the Skill folder, at most 20 string args; returns {exit_code, stdout, stderr}."""
    import os as _o, subprocess as _s, sys as _y
    if not isinstance(name, str) or not name or "/" in name or name.startswith("."):
        raise ValueError("name must be a Skill name from list_skills()")
    root = _o.path.realpath(_o.path.join("skills", name))
    if not _o.path.isdir(root):
        raise ValueError(f"No Skill folder skills/{name} in this workspace")
    full = _o.path.realpath(_o.path.join(root, str(path)))
    if not full.startswith(_o.path.join(root, "scripts") + _o.sep) or not _o.path.isfile(full):
        raise ValueError(f"{path!r} is not a script under skills/{name}/scripts/")
    args = [str(a) for a in (args or [])]
    if len(args) > 20 or any(len(a) > 4096 for a in args):
        raise ValueError("at most 20 args of at most 4096 characters each")
    if full.endswith(".py"):
        command = [_y.executable, full, *args]
    elif full.endswith(".sh"):
        command = ["bash", full, *args]
    else:
        raise ValueError("only .py and .sh scripts can run")
    timeout = max(1, min(int(timeout), 60))
    done = _s.run(command, cwd=root, capture_output=True, text=True, timeout=timeout)
    return {
        "exit_code": done.returncode,
        "stdout": done.stdout[-20000:],
        "stderr": done.stderr[-20000:],
    }
'''
SKILL_HELPERS_SHOWN = "(fleet skill helpers)"
_FLEX_DRIVER = "__dspy_flex_json.dumps("
OUTPUT_CHARS = 4_000


def _in_context(ctx: contextvars.Context, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        return ctx.copy().run(fn, *args, **kwargs)

    return call


class TurnInterpreter:
    """A ``CodeInterpreter`` proxy for one agent of one Turn."""

    def __init__(
        self,
        inner: Any,
        control: TurnControl,
        *,
        agent_id: str,
        parent_agent_id: str | None,
        interrupt: Callable[[], None] | None = None,
    ) -> None:
        self._inner = inner
        self._control = control
        self._lineage = {"agent_id": agent_id, "parent_agent_id": parent_agent_id}
        self._interrupt = interrupt or getattr(inner, "interrupt", None)
        self._cells = itertools.count(1)
        self._deferred: list[tuple[str, dict[str, Any] | None]] = []
        self._helpers = False
        self.tools: dict[str, Callable[..., Any]] = {}

    # attributes RLM/Flex set on the interpreter are forwarded to the real one
    @property
    def output_fields(self) -> Any:
        return getattr(self._inner, "output_fields", None)

    @output_fields.setter
    def output_fields(self, value: Any) -> None:
        self._inner.output_fields = value

    @property
    def _tools_registered(self) -> Any:
        return getattr(self._inner, "_tools_registered", False)

    @_tools_registered.setter
    def _tools_registered(self, value: Any) -> None:
        if hasattr(self._inner, "_tools_registered"):
            self._inner._tools_registered = value

    def start(self) -> None:
        """Checked only: the sandbox boots in the background and is awaited by the first cell."""
        self._control.check()

    def shutdown(self) -> None:
        self._inner.shutdown()

    def _stop_cell(self) -> None:
        if self._interrupt is not None:
            self._interrupt()

    def execute(self, code: str, variables: dict[str, Any] | None = None) -> Any:
        if code == SHIM_SETUP:
            # The dspy facade bootstrap is deferred to the first real cell, so the sandbox start
            # overlaps the agent's first model call instead of preceding it.
            self._deferred.append((code, variables))
            return None
        while self._deferred:
            self._run(*self._deferred.pop(0))
        if not self._helpers:  # the sandbox-side Skill helpers, once per namespace
            self._helpers = True
            self._run(SKILL_HELPERS, None, shown=SKILL_HELPERS_SHOWN)
        return self._run(_print_flex_result(code), variables)

    def _run(self, code: str, variables: dict[str, Any] | None, *, shown: str | None = None) -> Any:
        control = self._control
        control.check()
        cell = next(self._cells)
        bootstrap = (
            shown is not None
            or code == SHIM_SETUP
            or code.lstrip().startswith("import hashlib as _fleet")
        )
        phase = "bootstrap" if bootstrap else "task"
        if code == SHIM_SETUP:
            shown = "(dspy facade)"
        emit = control.emit
        emit(
            "code_cell",
            {"cell": cell, "phase": phase, "code": shown or clip(code, CODE_CHARS)},
            **self._lineage,
        )
        ctx = contextvars.copy_context()
        self._inner.tools.clear()
        self._inner.tools.update({k: _in_context(ctx, fn) for k, fn in self.tools.items()})
        started = time.perf_counter()
        payload: dict[str, Any] = {"cell": cell, "phase": phase}
        result: Any = None
        try:
            with control.on_stop(self._stop_cell):
                result = self._inner.execute(code, variables)
        except (CodeExecutionError, SyntaxError) as exc:
            if not bootstrap:
                control.note_sandbox_error()
            payload |= {
                "ok": False,
                "error_type": type(exc).__name__,
                "error": clip(str(exc), OUTPUT_CHARS),
            }
            if control.terminal is not None:
                payload["outcome"] = control.terminal
                raise control.error() from exc
            payload["outcome"] = "error"
            raise
        except Exception as exc:
            payload |= {
                "ok": False,
                "error_type": type(exc).__name__,
                "error": clip(str(exc), OUTPUT_CHARS),
            }
            payload["outcome"] = control.terminal or "sandbox_error"
            if control.terminal is not None:
                raise control.error() from exc
            raise
        finally:
            payload["duration_ms"] = round((time.perf_counter() - started) * 1000, 2)
            if "ok" not in payload:
                payload["ok"] = True
                payload["outcome"] = "submitted" if isinstance(result, FinalOutput) else "completed"
                shown = result.output if isinstance(result, FinalOutput) else result
                payload["output"] = clip(
                    shown if isinstance(shown, str) else repr(shown), OUTPUT_CHARS
                )
            emit("cell_output", payload, **self._lineage)
        control.check()
        return result


def _print_flex_result(code: str) -> str:
    """Flex's driver cell ends with an expression whose *string value* must come back verbatim;
    our sandbox returns the value's repr, so print it instead (stdout is returned as is)."""
    head, _, last = code.rstrip().rpartition("\n")
    if _FLEX_DRIVER not in last or not last.startswith(_FLEX_DRIVER):
        return code
    return f"{head}\nprint({last}, end='')"
