"""What every sandbox backend does the same way around one cell: the REPL session.

``CellSession`` holds the backend-neutral half of a sandbox: the common properties, the start
guard, ``execute`` (name checks, the exec frame, the one-cell lock), the cell's timeout and
interrupt handling (SIGINT first, the backend's hard stop after the grace period), frame
dispatch, tool calls and their replies' encoding, and the host-side file operations. A backend
(``LocalSandbox``, ``DaytonaSandbox``) supplies its transport: how it boots, submits a cell,
sends SIGINT, stops hard and delivers a tool reply.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
from collections.abc import Coroutine, Mapping
from typing import Any, Self

import anyio
import anyio.to_thread

from fleet_core.errors import InvalidInput
from fleet_core.sandbox.base import (
    ExecutionError,
    ExecutionResult,
    SandboxInfo,
    SandboxSpec,
    SandboxState,
    ToolBridge,
    ToolFunction,
    ToolPolicy,
)
from fleet_core.sandbox.errors import (
    ExecutionCancelledError,
    ExecutionTimeoutError,
    SandboxCrashedError,
    SandboxUnavailableError,
)
from fleet_core.sandbox.protocol import CellGate, encode_frame
from fleet_core.workspace import FileInfo, Workspace

STOP_WAIT_S = 2.0
_RESERVED_NAMES = frozenset({"SUBMIT", "print", "__builtins__", "__name__"})


class CellSession:
    """The backend-neutral half of a sandbox (see the module docstring)."""

    backend: str
    accepts_host_code = True
    """``execute`` takes ``host_code`` (see there)."""
    _GONE_TEXT: str
    """``_require_ready``'s message after a crash, after ``Sandbox <id>'s``."""
    _UNCONFIRMED_STOP_TEXT: str
    """The timeout error's message when the cell did not settle after the hard stop."""

    def __init__(self, spec: SandboxSpec, sandbox_id: str) -> None:
        self._spec = spec
        self._id = sandbox_id
        self._workspace = Workspace(
            spec.workspace,
            max_file_bytes=spec.limits.workspace_max_file_bytes,
            max_read_bytes=spec.limits.workspace_max_read_bytes,
        )
        self._state = SandboxState.NEW
        self._info: SandboxInfo | None = None
        self._cell: CellGate | None = None
        self._lock: asyncio.Lock | None = None
        self._limiter: anyio.CapacityLimiter | None = None
        self._host_code = False  # the running (or last) cell is the host's own code
        self._interrupt_pending = False  # an interrupt that found no cell: the next one's
        self.rejected_frames = 0

    # -- backend hooks --------------------------------------------------------------------------
    async def _launch(self) -> SandboxInfo:
        """Bring the backend up and boot a fresh REPL (``start()`` has checked the state)."""
        raise NotImplementedError

    def _has_repl(self) -> bool:
        """Whether the REPL a cell is sent to exists (with the state READY)."""
        raise NotImplementedError

    def _cpu_seconds(self) -> int | None:
        """The exec frame's per-cell CPU budget (None: the wall-clock timeout bounds a cell)."""
        raise NotImplementedError

    async def _submit(self, cell: CellGate, frame: bytes, limit: float) -> None:
        """Hand the encoded exec frame to the REPL; the cell resolves through ``_dispatch``."""
        raise NotImplementedError

    async def _soft_interrupt(self) -> None:
        """Send SIGINT to the REPL (state kept)."""
        raise NotImplementedError

    async def _hard_stop(self, cell: CellGate) -> None:
        """The cell ignored SIGINT for the grace period: end it for good (state lost)."""
        raise NotImplementedError

    async def _reply(
        self, cell: CellGate, call_id: int, *, ok: bool, value: Any = None, error: str = ""
    ) -> None:
        """Deliver a tool call's answer, unless its cell has ended (the fence)."""
        raise NotImplementedError

    def _refuse(self, cell: CellGate, call_id: int, error: str) -> None:
        """Answer a refused tool call (by default as a tool task of the cell)."""
        self._track_tool(cell, self._reply(cell, call_id, ok=False, error=error))

    async def _drain(self, cell: CellGate) -> None:
        """While the cell ends, before its tool tasks are cancelled."""

    async def _after_cell(self) -> None:
        """Once the cell has ended and the state is settled."""

    def _checked(self, result: ExecutionResult) -> ExecutionResult:
        """The result returned to the caller, after ``_after_cell`` (e.g. the quota check)."""
        return result

    # -- properties -----------------------------------------------------------------------------
    @property
    def id(self) -> str:
        return self._id

    @property
    def spec(self) -> SandboxSpec:
        return self._spec

    @property
    def state(self) -> SandboxState:
        return self._state

    @property
    def info(self) -> SandboxInfo | None:
        return self._info

    @property
    def workspace(self) -> Workspace:
        return self._workspace

    # -- lifecycle ------------------------------------------------------------------------------
    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.destroy()

    async def destroy(self) -> None:
        raise NotImplementedError

    async def start(self) -> SandboxInfo:
        """Start the sandbox and boot a fresh REPL (idempotent). After a crash or a stop this
        gives a fresh REPL on the same workspace."""
        if self._state in (SandboxState.READY, SandboxState.BUSY) and self._info is not None:
            return self._info
        if self._state is SandboxState.DESTROYED:
            raise SandboxUnavailableError(f"Sandbox {self._id} was destroyed")
        self._lock = self._lock or asyncio.Lock()
        self._limiter = self._limiter or anyio.CapacityLimiter(
            self._spec.limits.max_concurrent_tool_calls
        )
        return await self._launch()

    # -- execution ------------------------------------------------------------------------------
    async def execute(
        self,
        code: str,
        *,
        variables: Mapping[str, Any] | None = None,
        tools: ToolBridge | None = None,
        output_fields: list[dict[str, str]] | None = None,
        timeout: float | None = None,
        policy: ToolPolicy | None = None,
        host_code: bool = False,
    ) -> ExecutionResult:
        """Run one cell. User errors are in the result; sandbox failures raise. ``host_code``:
        the cell is the host's own code (a bootstrap cell, nothing the model wrote), so a
        backend may skip what only model code needs (LocalSandbox: the hygiene walk after it,
        while no model code has run in this REPL)."""
        tools = dict(tools or {})
        check_names(tools, variables or {})
        if self._lock is None:
            raise SandboxUnavailableError(f"Sandbox {self._id} is not started")
        async with self._lock:
            self._require_ready()
            self._refuse_if_interrupted()
            limit = timeout or self._spec.limits.cell_timeout_seconds
            cell = CellGate(tools, policy, self._spec.limits)
            frame = exec_frame(
                cell, code, variables, output_fields, self._spec, self._cpu_seconds()
            )
            self._cell, self._state = cell, SandboxState.BUSY
            self._host_code = host_code
            try:
                await self._submit(cell, frame, limit)
                result = await self._await_cell(cell, limit)
            finally:
                await self._end_cell(cell)
            return self._checked(result)

    def _require_ready(self) -> None:
        if self._state is SandboxState.READY and self._has_repl():
            return
        if self._state is SandboxState.FAILED:
            raise SandboxCrashedError(f"Sandbox {self._id}'s {self._GONE_TEXT}")
        raise SandboxUnavailableError(f"Sandbox {self._id} is {self._state.value}, not ready")

    def _refuse_if_interrupted(self) -> None:
        """An interrupt that came before this cell was registered (its caller's stop raced the
        cell's start) cancels it unstarted. No await between this check and ``self._cell = cell``:
        on the loop, an interrupt either lands here or finds the cell open."""
        if self._interrupt_pending:
            self._interrupt_pending = False
            raise ExecutionCancelledError(
                "The cell was cancelled before it started; REPL state kept",
                state_preserved=True,
            )

    async def _await_cell(self, cell: CellGate, timeout: float) -> ExecutionResult:
        try:
            result = await asyncio.wait_for(asyncio.shield(cell.done), timeout)
        except TimeoutError:
            cell_stop(cell, "timeout")
            await self._soft_then_hard(cell)
            result = await self._settled(cell)
        except asyncio.CancelledError:
            cell_stop(cell, "cancelled")
            await asyncio.shield(self._soft_then_hard(cell))
            raise
        return judge(cell, result, timeout)

    async def _settled(self, cell: CellGate) -> ExecutionResult:
        try:
            return await asyncio.wait_for(asyncio.shield(cell.done), STOP_WAIT_S)
        except TimeoutError:
            raise ExecutionTimeoutError(
                self._UNCONFIRMED_STOP_TEXT,
                state_preserved=False,
            ) from None

    async def interrupt(self) -> None:
        """Cancel the running cell: SIGINT (state kept), the backend's hard stop after the
        grace period (state lost). An interrupt is never lost: with no cell running, the next
        cell is cancelled before it starts (a stop that raced the cell's submission)."""
        cell = self._cell
        if cell is None or not cell.open:
            self._interrupt_pending = True
            return
        cell_stop(cell, "cancelled")
        await self._soft_then_hard(cell)

    async def _soft_then_hard(self, cell: CellGate) -> None:
        await self._soft_interrupt()
        grace = self._spec.limits.interrupt_grace_seconds
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.shield(cell.done), grace)
        if cell.open:
            await self._hard_stop(cell)

    async def _end_cell(self, cell: CellGate) -> None:
        if self._cell is cell:
            self._cell = None
        await self._drain(cell)
        for task in list(cell.tool_tasks):
            task.cancel()
        self.rejected_frames += cell.rejected_frames
        if not cell.done.done():
            cell.done.cancel()
        elif not cell.done.cancelled():
            cell.done.exception()  # mark retrieved
        if self._state is SandboxState.BUSY:
            self._state = SandboxState.READY
        await self._after_cell()

    # -- frames and tool calls ------------------------------------------------------------------
    def _dispatch(self, cell: CellGate, frame: dict[str, Any]) -> None:
        if not cell.owns(frame):
            return
        if frame["type"] == "result":
            cell.accept_result(frame)
        elif frame["type"] == "tool_call":
            self._start_tool_call(cell, frame)
        else:
            cell.rejected_frames += 1

    def _start_tool_call(self, cell: CellGate, frame: dict[str, Any]) -> None:
        refusal = cell.check_tool_call(frame)
        call_id = frame.get("call")
        if not isinstance(call_id, int):
            return
        if refusal is not None:
            self._refuse(cell, call_id, refusal)
            return
        function = cell.tools[str(frame["tool"])]
        args, kwargs = frame.get("args") or [], frame.get("kwargs") or {}
        self._track_tool(cell, self._run_tool(cell, call_id, function, args, kwargs))

    @staticmethod
    def _track_tool(cell: CellGate, job: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(job)
        cell.tool_tasks.add(task)
        task.add_done_callback(cell.tool_tasks.discard)

    async def _run_tool(
        self,
        cell: CellGate,
        call_id: int,
        function: ToolFunction,
        args: list[Any],
        kwargs: dict[str, Any],
    ) -> None:
        try:
            value = await self._invoke(function, args, kwargs)
        except Exception as exc:
            await self._reply(cell, call_id, ok=False, error=f"{type(exc).__name__}: {exc}")
            return
        await self._reply(cell, call_id, ok=True, value=value)

    async def _invoke(self, function: ToolFunction, args: list[Any], kwargs: dict[str, Any]) -> Any:
        if inspect.iscoroutinefunction(function):
            return await function(*args, **kwargs)
        bound = functools.partial(function, *args, **kwargs)
        value = await anyio.to_thread.run_sync(bound, abandon_on_cancel=True, limiter=self._limiter)
        if inspect.isawaitable(value):
            value = await value
        return value

    # -- files ----------------------------------------------------------------------------------
    async def read_file(self, path: str, *, max_bytes: int | None = None) -> bytes:
        return await anyio.to_thread.run_sync(
            functools.partial(self._workspace.read, path, max_bytes=max_bytes)
        )

    async def write_file(self, path: str, data: bytes) -> FileInfo:
        return await anyio.to_thread.run_sync(self._workspace.write, path, data)

    async def list_files(self, root: str | None = None) -> list[FileInfo]:
        return await anyio.to_thread.run_sync(self._workspace.tree, root)

    async def delete_file(self, path: str) -> None:
        await anyio.to_thread.run_sync(self._workspace.delete, path)


def cell_stop(cell: CellGate, reason: str) -> None:
    if cell.stop_reason is None:
        cell.stop_reason = reason


def judge(cell: CellGate, result: ExecutionResult, timeout: float) -> ExecutionResult:
    """A result interrupted by our own SIGINT becomes the timeout/cancel error (state kept); a
    cell stopped for the workspace quota fails with its ``WorkspaceQuotaExceeded`` error."""
    if cell.stop_reason == "quota":
        return quota_result(result, cell.stop_detail)
    if cell.stop_reason is None or not result.interrupted:
        return result
    if cell.stop_reason == "timeout":
        raise ExecutionTimeoutError(
            f"The cell exceeded its {timeout:g} s timeout and was interrupted; REPL state kept",
            state_preserved=True,
            partial=result,
        )
    raise ExecutionCancelledError(
        "The cell was cancelled and interrupted; REPL state kept",
        state_preserved=True,
        partial=result,
    )


QUOTA_ERROR = "WorkspaceQuotaExceeded"


def with_note(result: ExecutionResult, note: str) -> ExecutionResult:
    """The cell's result with a line of the host's appended to its stderr (what the model, the
    trace and the editor's cell view show)."""
    if not note:
        return result
    stderr = f"{result.stderr.rstrip()}\n{note}\n" if result.stderr.strip() else f"{note}\n"
    return result.model_copy(update={"stderr": stderr})


def quota_result(result: ExecutionResult, message: str) -> ExecutionResult:
    """The cell's result as a ``WorkspaceQuotaExceeded`` failure (output kept, state kept)."""
    if result.error is not None and result.error.type == QUOTA_ERROR:
        return result
    error = ExecutionError(type=QUOTA_ERROR, message=message)
    return result.model_copy(update={"error": error, "final": None})


def quota_text(used: int, quota: int, *, too_deep: bool = False) -> str:
    """What the model and the user are told when a cell outgrew the workspace quota."""
    mib = 1 << 20
    what = (
        "the workspace has directories nested too deeply to be measured"
        if too_deep
        else f"the workspace uses {used / mib:,.1f} MiB, over its {quota / mib:,.0f} MiB quota"
    )
    return (
        f"The cell was stopped: {what} (setting sandbox.workspace_quota_mb). Delete files you "
        "no longer need (e.g. under artifacts/ or memory/) or write less; REPL state is kept."
    )


COUNT_LEAD = "The cell created too many files"


def count_text(entries: int, limit: int, *, lead: str = COUNT_LEAD) -> str:
    """What the model and the user are told when a cell made the workspace hold more entries
    (files, directories, links) than ``sandbox.max_files`` allows."""
    return (
        f"{lead}: the workspace holds {entries:,} entries, the limit is {limit:,} (setting "
        "sandbox.max_files, the workspace's file-count quota). Delete files you no longer need "
        "(e.g. under artifacts/) or write fewer, larger files, or raise the limit; REPL state "
        "is kept."
    )


def check_names(tools: Mapping[str, Any], variables: Mapping[str, Any]) -> None:
    for name in (*tools, *variables):
        if not isinstance(name, str) or not name.isidentifier() or name in _RESERVED_NAMES:
            raise InvalidInput(f"{name!r} cannot be used as a sandbox tool or variable name")
    clash = set(tools) & set(variables)
    if clash:
        raise InvalidInput(f"Names used both as tools and variables: {sorted(clash)}")


def exec_frame(
    cell: CellGate,
    code: str,
    variables: Mapping[str, Any] | None,
    output_fields: list[dict[str, str]] | None,
    spec: SandboxSpec,
    cpu_seconds: int | None,
) -> bytes:
    frame = {
        "type": "exec",
        "id": cell.exec_id,
        "nonce": cell.nonce,
        "code": code,
        "variables": dict(variables or {}),
        "tools": sorted(cell.tools),
        "output_fields": output_fields,
        "max_output_chars": spec.limits.max_output_chars,
        "max_value_chars": spec.limits.max_value_chars,
        "cpu_seconds": cpu_seconds,
    }
    try:
        return encode_frame(frame)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"Sandbox variables must be JSON-serializable: {exc}") from None


def tool_result_frame(
    cell: CellGate, call_id: int, *, ok: bool, value: Any = None, error: str = ""
) -> bytes:
    """A tool call's answer, encoded; a result that is not JSON becomes the error answer."""
    frame: dict[str, Any] = {"type": "tool_result", "id": cell.exec_id, "call": call_id}
    try:
        return encode_frame(
            frame | ({"ok": True, "value": value} if ok else {"ok": False, "error": error})
        )
    except (TypeError, ValueError):
        return encode_frame(
            frame | {"ok": False, "error": "the tool's result is not JSON-serializable"}
        )
