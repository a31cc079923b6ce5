"""The Turn's one wrapper around a sandbox cell: gated by the TurnControl, evented, interruptible.

Layers, from the model's code down (each does one thing):

- ``TurnInterpreter`` (here): the DSPy ``CodeInterpreter`` an RLM/Flex of a Turn gets. Per cell it
  applies the Turn's control (check before and after, the cell timeout bounded by the deadline, a
  tool-call policy that stops on cancel/deadline/budget, interrupt when the Turn stops), emits
  ``code_cell``/``cell_output`` with the cell's ``phase`` and counts sandbox errors. It runs the
  host's own setup cells (``bootstrap``) and knows them by how they were submitted, never by their
  code text.
- ``SandboxInterpreter`` (``fleet_core.sandbox.interpreter``): adapts a ``Sandbox`` to DSPy
  (portal, tool bridging, result/error translation, dspy callbacks).
- ``CellSession.execute`` (``fleet_core.sandbox.session``): runs the cell in the sandbox.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Collection, Mapping
from typing import Any, Literal

from dspy.primitives.code_interpreter import CodeExecutionError, FinalOutput
from dspy.primitives.facade import HOST_TOKEN_VAR

from fleet_core.engine.control import Lineage, TurnControl
from fleet_core.engine.grounding import Grounding, Verdict
from fleet_core.engine.learning import INSTRUCTIONS as LEARNING_INSTRUCTIONS
from fleet_core.engine.learning import WORKSPACE_HELPER
from fleet_core.engine.stream import clip
from fleet_core.event_payloads import CellOutputPayload, CodeCellPayload, UngroundedSubmitPayload
from fleet_core.sandbox.interpreter import EXECUTION_INSTRUCTIONS, SandboxInterpreter

CODE_CHARS = 20_000
OUTPUT_CHARS = 4_000
Phase = Literal["bootstrap", "task"]

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
FACADE_SHOWN = "(dspy facade)"

TURN_EXECUTION_INSTRUCTIONS = (
    EXECUTION_INSTRUCTIONS
    + " Skills are under skills/: list_skills(), use_skill(name) for a Skill's instructions and "
    "resources, read_skill_reference(name, path) for its references/ and assets/ files, and "
    "run_skill_script(name, path, args) to run one of its scripts/ (returns exit_code, stdout, "
    "stderr). The sandbox's Python version and installed packages are listed in memory_summary."
    + LEARNING_INSTRUCTIONS
)
"""What a Turn's agents are told about their sandbox: the sandbox's one description plus the
helpers the Turn adds (``FleetTask``/``ChildTask`` do not repeat any of it)."""


class TurnInterpreter:
    """The ``CodeInterpreter`` of one agent of one Turn (see the module docstring).

    ``host_inputs`` are the serialized inputs the host hands DSPy (e.g. the selected dataset's
    payload): DSPy submits each one's setup cell with that payload as a variable, which is how
    such a cell is known to be the host's. The dspy facade is known by the host token DSPy
    submits it with; it is deferred to the first real cell, so the sandbox start overlaps the
    agent's first model call. The Skill helpers are this class's own bootstrap cell.
    """

    def __init__(
        self,
        inner: SandboxInterpreter,
        control: TurnControl,
        *,
        agent_id: str,
        parent_agent_id: str | None,
        interrupt: Callable[[], None],
        host_inputs: Collection[str] = (),
    ) -> None:
        self._inner = inner
        self._control = control
        self._lineage = Lineage(agent_id=agent_id, parent_agent_id=parent_agent_id)
        self._interrupt = interrupt
        self._host_inputs = frozenset(host_inputs)
        self._cells = itertools.count(1)
        self._deferred: list[tuple[str, dict[str, Any] | None]] = []
        self._helpers = False
        self._grounding = Grounding()  # one per namespace: what it observed, its rejections
        inner.policy = self._tool_policy

    # the attributes RLM/Flex use are the adapter's own
    @property
    def tools(self) -> dict[str, Callable[..., Any]]:
        return self._inner.tools

    @property
    def output_fields(self) -> list[dict[str, Any]] | None:
        return self._inner.output_fields

    @output_fields.setter
    def output_fields(self, value: list[dict[str, Any]] | None) -> None:
        self._inner.output_fields = value

    def start(self) -> None:
        """Checked only: the sandbox boots in the background and is awaited by the first cell."""
        self._control.check()

    def shutdown(self) -> None:
        self._inner.shutdown()

    def execute(self, code: str, variables: dict[str, Any] | None = None) -> Any:
        if _is_facade_install(variables):
            self._deferred.append((code, variables))
            return None
        self.run_bootstrap_cells()
        host_setup = self._is_host_input_setup(variables)
        return self.run_cell(code, variables, bootstrap=host_setup)

    def run_bootstrap_cells(self) -> None:
        """The deferred dspy facade, then the Skill helpers (once per namespace)."""
        while self._deferred:
            code, variables = self._deferred.pop(0)
            self.run_cell(code, variables, bootstrap=True, shown=FACADE_SHOWN)
        if not self._helpers:
            self._helpers = True
            helpers = SKILL_HELPERS + WORKSPACE_HELPER
            self.run_cell(helpers, None, bootstrap=True, shown=SKILL_HELPERS_SHOWN)

    def _is_host_input_setup(self, variables: Mapping[str, Any] | None) -> bool:
        values = (variables or {}).values()
        return any(isinstance(v, str) and v in self._host_inputs for v in values)

    def _tool_policy(self, _tool: str) -> None:
        self._control.check()

    def _cell_timeout(self) -> float:
        timeout = self._inner.sandbox.spec.limits.cell_timeout_seconds
        remaining = self._control.remaining_seconds()
        if remaining is not None:
            timeout = min(timeout, max(remaining, 0.5))
        return timeout

    def run_cell(
        self,
        code: str,
        variables: dict[str, Any] | None,
        *,
        bootstrap: bool = False,
        shown: str | None = None,
    ) -> Any:
        """Run one cell under the Turn's control. ``bootstrap`` marks a cell the host submitted
        itself (``phase: "bootstrap"`` in its events; its errors are not the model's)."""
        control = self._control
        control.check()
        cell = next(self._cells)
        phase: Phase = "bootstrap" if bootstrap else "task"
        shown = shown or clip(code, CODE_CHARS)
        control.emit(
            "code_cell", CodeCellPayload(cell=cell, phase=phase, code=shown), **self._lineage
        )
        payload: dict[str, Any] = {"cell": cell, "phase": phase}  # CellOutputPayload's fields
        if not bootstrap:
            self._grounding.observe_inputs(variables)
        rejection: CodeExecutionError | None = None
        started = time.perf_counter()
        try:
            self._inner.cell_timeout = self._cell_timeout()
            self._inner.host_code = bootstrap  # the host's own cell: no model code in it
            with control.on_stop(self._interrupt):
                result = self._inner.execute(code, variables)
        except Exception as exc:
            self._grounding.observe(str(exc))  # the model is shown the error and its output
            payload |= self._failure(exc, counted=not bootstrap)
            if control.terminal is not None:
                raise control.error() from exc
            raise
        else:
            verdict = None if bootstrap else self._ground(code, result, cell)
            if verdict is not None and verdict.rejected:
                rejection = CodeExecutionError(verdict.explanation())
                payload |= {
                    "ok": False,
                    "outcome": "submit_rejected",
                    "error_type": "UngroundedSubmit",
                    "error": clip(verdict.explanation(), OUTPUT_CHARS),
                }
            else:
                payload |= _success(result)
        finally:
            if "ok" not in payload:  # not an Exception: still a complete event
                payload |= {"ok": False, "outcome": control.terminal or "sandbox_error"}
            payload["duration_ms"] = round((time.perf_counter() - started) * 1000, 2)
            control.add_sandbox_time(payload["duration_ms"])
            control.emit("cell_output", CellOutputPayload(**payload), **self._lineage)
        control.check()
        if rejection is not None:
            raise rejection  # RLM shows it to the model and the loop goes on
        return result

    def _ground(self, code: str, result: Any, cell: int) -> Verdict | None:
        """Observe a model cell's result; for a SUBMIT, check its figures (engine/grounding.py).
        Returns the verdict of an ungrounded submission (emitted and counted here), else None."""
        grounding = self._grounding
        if not isinstance(result, FinalOutput):
            grounding.observe(result)
            return None
        last = self._inner.last_result
        if last is not None:  # what the submitting cell printed before SUBMIT
            grounding.observe(last.stdout)
            grounding.observe(last.stderr)
        submitted = result.output if isinstance(result.output, dict) else {"value": result.output}
        verdict = grounding.check(code, submitted)
        if verdict.grounded:
            return None
        if verdict.rejected:
            self._control.note_submit_rejection()
        self._control.emit(
            "ungrounded_submit",
            UngroundedSubmitPayload(cell=cell, figures=verdict.figures, rejected=verdict.rejected),
            **self._lineage,
        )
        return verdict

    def _failure(self, exc: Exception, *, counted: bool) -> dict[str, Any]:
        """The failed cell's event fields; a model cell's code error counts as a sandbox error."""
        control = self._control
        code_error = isinstance(exc, CodeExecutionError | SyntaxError)
        if code_error and counted:
            control.note_sandbox_error()
        fallback = "error" if code_error else "sandbox_error"
        return {
            "ok": False,
            "error_type": type(exc).__name__,
            "error": clip(str(exc), OUTPUT_CHARS),
            "outcome": control.terminal or fallback,
        }


def _success(result: Any) -> dict[str, Any]:
    submitted = isinstance(result, FinalOutput)
    shown = result.output if submitted else result
    return {
        "ok": True,
        "outcome": "submitted" if submitted else "completed",
        "output": clip(shown if isinstance(shown, str) else repr(shown), OUTPUT_CHARS),
    }


def _is_facade_install(variables: Mapping[str, Any] | None) -> bool:
    """DSPy installs its sandbox facade with the host-process token as a variable; a model's code
    is submitted with the signature's inputs only."""
    return HOST_TOKEN_VAR in (variables or {})
