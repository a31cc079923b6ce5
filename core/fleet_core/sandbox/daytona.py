"""DaytonaSandbox: the same ``Sandbox`` interface on a Daytona sandbox, through the official SDK.

How it maps (see docs/sandbox.md, "Daytona"):

- **Lifecycle.** ``start()`` checks the snapshot once per process (preflight), journals the
  allocation (``<state_dir>/allocations``) *before* ``create`` and marks it ``ready`` after, with
  labels ``fleet_app``/``fleet_session``/``fleet_agent``/``fleet_parent``/``fleet_alloc``. A create
  that ended without an answer is never repeated blindly: the next ``start()`` adopts the single
  sandbox carrying that allocation's labels, or refuses. Children (``parent_agent_id`` set) are
  ephemeral and linked to their session's root sandbox. ``get``/``start``/``stop``/``delete`` and
  file transfers are retried on transient errors; ``create`` and ``run_code`` never are.
- **Execution.** The stdlib worker module (``worker.py``) is loaded into a code-interpreter context
  once (``MarkerRuntime``); each cell is one ``run_code("_fleet_rt.run(<frame>)")``. Frames come
  back as ``\\x1eFLEET {json}`` marker lines on the streamed stdout and are validated exactly as
  the local backend's frames (cell id + nonce, one result, registered tools, budget). Tool calls
  are answered by uploading ``<reply_dir>/<exec_id>-<call>.json``.
- **Interrupts.** Daytona's interpreter runs cells in its worker's main thread and turns SIGINT
  into ``KeyboardInterrupt``; the host sends it with ``process.exec("kill -INT <pid>")`` (state
  kept). If the cell ignores it, the context is deleted after the grace period (state lost,
  workspace kept). A transport failure after submission is ``ExecutionOutcomeUnknownError`` when
  the worker is still alive, ``SandboxCrashedError`` when it died; neither is replayed.
- **Workspace.** The host directory ``spec.workspace`` mirrors the remote ``/workspace``: it is
  pushed in batches when the sandbox is created, and writable roots are pulled back (changed files
  only, sha256-checked, symlinks and non-regular files skipped) after every cell, so readers,
  manifests and child promotion keep working on the host copy.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import json
import logging
import math
import shlex
import time
import uuid
from collections.abc import Mapping
from importlib import resources
from typing import Any

import anyio
import anyio.to_thread
from daytona import (
    AsyncDaytona,
    AsyncSandbox,
    CreateSandboxFromSnapshotParams,
    FileDownloadRequest,
    FileUpload,
    ListSandboxesQuery,
)
from daytona.common.errors import DaytonaError, DaytonaNotFoundError, DaytonaTimeoutError

from fleet_core import names
from fleet_core.config import SandboxSettings
from fleet_core.errors import WorkspacePathError
from fleet_core.sandbox.base import ExecutionResult, SandboxInfo, SandboxSpec, SandboxState
from fleet_core.sandbox.daytona_support import (
    APP_LABEL,
    Allocation,
    AllocationJournal,
    DaytonaOptions,
    acquire_client,
    preflight_snapshot,
    release_client,
    with_retries,
)
from fleet_core.sandbox.errors import (
    ExecutionCancelledError,
    ExecutionOutcomeUnknownError,
    ExecutionTimeoutError,
    SandboxCrashedError,
    SandboxUnavailableError,
)
from fleet_core.sandbox.protocol import CellGate, LineSplitter, decode_frame
from fleet_core.sandbox.session import (
    CellSession,
    count_text,
    quota_result,
    tool_result_frame,
    with_note,
)
from fleet_core.workspace import ROOTS, FileInfo

__all__ = ["DaytonaOptions", "DaytonaSandbox", "reconcile_orphans"]

log = logging.getLogger(__name__)

MARKER = b"\x1eFLEET "  # worker.MARKER
RUN_TASK_WAIT_S = 5.0
_SETTLING = {"starting", "stopping", "creating", "restoring", "pulling_snapshot", "pending_build"}
_RESUMABLE = {"stopped", "archived", "paused"}
_ROOTS_BY_SESSION: dict[str, str] = {}  # session id -> remote id of its root sandbox

# Runs inside the sandbox (process.exec): regular files under the given roots, never following
# links, with size and sha256 (None when over the limit). Arguments: roots JSON, size limit.
_LIST_MAIN = r"""
import hashlib, json, os, stat, sys
roots, limit, out, renamed = json.loads(sys.argv[1]), int(sys.argv[2]), [], []
listed = int(sys.argv[3]) if len(sys.argv) > 3 else 1 << 62  # files hashed and listed at most
count = 0
for root in roots:
    try:
        top = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        continue
    try:
        paths, moved = walk_regular(top, root, max_depth=256)
    finally:
        os.close(top)
    renamed += [[item.old, item.new] for item in moved]
    count += len(paths)
    for path in paths:
        if len(out) >= listed:
            break
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                continue
            if st.st_size > limit:
                out.append([path, st.st_size, None])
                continue
            digest = hashlib.sha256()
            while True:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    break
                digest.update(chunk)
            out.append([path, st.st_size, digest.hexdigest()])
        finally:
            os.close(fd)
print(json.dumps({"files": out, "renamed": renamed, "count": count}))
"""


def _list_program() -> str:
    """The remote listing: ``fleet_core.names`` (stdlib only) quarantines names a workspace
    cannot hold in the remote sandbox itself, so both sides keep the same escaped name."""
    source = (resources.files("fleet_core") / "names.py").read_text(encoding="utf-8")
    return source + _LIST_MAIN


@functools.cache
def _worker_source() -> str:
    return (resources.files("fleet_core.sandbox") / "worker.py").read_text(encoding="utf-8")


def _preamble() -> str:
    roots = json.dumps(list(ROOTS))
    return (
        "import os as _o, sys as _s, types as _t\n"
        f"for _d in {roots}:\n"
        "    _o.makedirs(_d, exist_ok=True)\n"
        "_m = _t.ModuleType('fleet_worker')\n"
        "_m.__file__ = 'fleet_worker.py'\n"
        f"exec(compile({_worker_source()!r}, 'fleet_worker.py', 'exec'), _m.__dict__)\n"
        "_s.modules['fleet_worker'] = _m\n"
        "_fleet_rt = _m.MarkerRuntime()\n"
        "_fleet_rt.boot()\n"
        "del _o, _s, _t, _m, _d\n"
    )


class DaytonaSandbox(CellSession):
    """A Daytona sandbox behind the ``Sandbox`` protocol. Construct, ``await start()``, ..."""

    backend = "daytona"
    _GONE_TEXT = "REPL is gone; call start() for a fresh one (state lost, workspace intact)"
    _UNCONFIRMED_STOP_TEXT = "The cell timed out and its REPL could not be confirmed stopped"

    def __init__(
        self,
        spec: SandboxSpec,
        *,
        settings: SandboxSettings | None = None,
        options: DaytonaOptions | None = None,
    ) -> None:
        if options is None:
            options = DaytonaOptions.from_settings(settings or SandboxSettings())
        super().__init__(spec, f"daytona-{uuid.uuid4().hex[:12]}")
        self._options = options
        self._journal = AllocationJournal(options.state_dir)
        self._client: AsyncDaytona | None = None
        self._remote: AsyncSandbox | None = None
        self._allocation: Allocation | None = None
        self._context: Any = None
        self._ready: dict[str, Any] = {}
        self._run_task: asyncio.Task[None] | None = None
        self._synced: dict[str, str] = {}  # workspace path -> sha256 last seen on both sides
        self._dirty: set[str] = set()
        self._renamed: list[names.Renamed] = []  # pulled under a safe name since the last cell
        self._file_count = 0  # regular files in the workspace at the last pull (both sides)
        self._count_allowed = spec.limits.workspace_max_entries
        self._count_over: int | None = None  # the count the last cell reached past its allowance
        self._snapshot: dict[str, Any] = {}

    # -- properties -----------------------------------------------------------------------------
    @property
    def remote_id(self) -> str | None:
        """The Daytona sandbox id, once allocated."""
        return self._remote.id if self._remote is not None else None

    @property
    def labels(self) -> dict[str, str]:
        spec = self._spec
        labels = {str(k): str(v) for k, v in spec.labels.items()}
        labels |= {
            "fleet_app": APP_LABEL,
            "fleet_session": spec.session_id,
            "fleet_agent": spec.agent_id,
            "fleet_parent": spec.parent_agent_id or "",
        }
        return labels

    # -- lifecycle ------------------------------------------------------------------------------
    async def _launch(self) -> SandboxInfo:
        """Allocate (or resume) the sandbox and boot a fresh REPL context."""
        self._state = SandboxState.STARTING
        try:
            return await self._start()
        except SandboxUnavailableError:
            self._state = SandboxState.FAILED
            raise
        except DaytonaError as exc:
            self._state = SandboxState.FAILED
            raise SandboxUnavailableError(
                f"Daytona sandbox {self._id} could not start: {self._scrub(exc)}"
            ) from None

    async def _start(self) -> SandboxInfo:
        if self._client is None:
            self._client = acquire_client(self._options)
        await anyio.to_thread.run_sync(self._workspace.ensure_layout)
        fresh = False
        if self._remote is None:
            self._snapshot = await preflight_snapshot(self._client, self._options)
            if self._spec.parent_agent_id is None:
                await self._reconcile_session()
            fresh = await self._allocate()
        else:
            await self._resume()
        await self._drop_context()
        await self._boot()
        if fresh:
            await self._push(self._workspace.paths())
        else:
            await self._pull()
            await self._push(sorted(self._dirty))
        self._dirty.clear()
        ready = self._ready
        self._info = SandboxInfo(
            sandbox_id=self._id,
            backend=self.backend,
            isolation={
                "backend": "daytona",
                "remote_id": self.remote_id,
                "snapshot": self._snapshot,
                "network": bool(self._spec.network),
                "ephemeral": self._spec.parent_agent_id is not None,
                "soft_interrupt": "SIGINT via process.exec (state kept)",
            },
            python=str(ready.get("python", "")),
            packages={str(k): bool(v) for k, v in dict(ready.get("packages") or {}).items()},
            workdir=str(ready.get("cwd", "")),
        )
        self._state = SandboxState.READY
        return self._info

    async def _allocate(self) -> bool:
        """Create (or adopt) the remote sandbox; True when it was newly created."""
        client = self._require_client()
        spec, options = self._spec, self._options
        entry = self._journal.get(spec.session_id, spec.agent_id)
        if entry is not None and (adopted := await self._adopt(entry)) is not None:
            self._remote, self._allocation = adopted, entry
            if entry.status != "ready" or entry.sandbox_id != adopted.id:
                entry.status, entry.sandbox_id = "ready", adopted.id
                self._journal.put(entry)
            self._remember_root()
            await self._resume()
            return False
        child = spec.parent_agent_id is not None
        alloc_id = uuid.uuid4().hex
        labels = self.labels | {"fleet_alloc": alloc_id}
        entry = Allocation(
            session_id=spec.session_id,
            agent_id=spec.agent_id,
            parent_agent_id=spec.parent_agent_id,
            alloc_id=alloc_id,
            labels=labels,
        )
        entry.expires_at = entry.requested_at + options.journal_ttl_s
        params = CreateSandboxFromSnapshotParams(
            snapshot=options.snapshot,
            language="python",
            labels=dict(labels),
            network_block_all=not spec.network,
            auto_stop_interval=0 if child else options.root_auto_stop_minutes,
            ephemeral=child,
            ttl_minutes=options.child_ttl_minutes if child else None,
            linked_sandbox=_ROOTS_BY_SESSION.get(spec.session_id) if child else None,
        )
        self._journal.put(entry)
        try:
            remote = await client.create(params, timeout=options.create_timeout_s)  # never retried
        except DaytonaError as exc:
            status = exc.status_code
            if status is not None and status < 500 and status not in (408, 429):
                self._journal.remove(entry)  # refused: nothing was created
                raise SandboxUnavailableError(
                    f"Daytona refused to create the sandbox: {self._scrub(exc)}"
                ) from None
            raise SandboxUnavailableError(
                "Creating the Daytona sandbox ended without a clear answer "
                f"({self._scrub(exc)}); it is not retried. The next start() adopts it if it "
                "exists (journal entry kept)"
            ) from None
        entry.status, entry.sandbox_id = "ready", remote.id
        self._journal.put(entry)
        self._remote, self._allocation = remote, entry
        self._remember_root()
        return True

    async def _adopt(self, entry: Allocation) -> AsyncSandbox | None:
        """The remote sandbox a journal entry points at, if it exists (by id, else by labels)."""
        client = self._require_client()
        if entry.status == "ready" and entry.sandbox_id:
            try:
                remote = await with_retries(
                    self._options, lambda: client.get(str(entry.sandbox_id)), what="get"
                )
            except DaytonaNotFoundError:
                self._journal.remove(entry)
                return None
            if _state_of(remote) in ("destroyed", "destroying", "error", "build_failed"):
                self._journal.remove(entry)
                return None
            return remote
        matches = await self._find(entry.labels)
        if len(matches) > 1:
            raise SandboxUnavailableError(
                f"{len(matches)} Daytona sandboxes carry allocation {entry.alloc_id}'s labels; "
                "refusing to create another (delete the extras, then retry)"
            )
        if not matches:
            self._journal.remove(entry)
            return None
        return matches[0]

    async def _find(self, labels: Mapping[str, str]) -> list[AsyncSandbox]:
        client = self._require_client()

        async def listing() -> list[AsyncSandbox]:
            query = ListSandboxesQuery(labels=dict(labels))
            return [s async for s in client.list(query)]

        found = await with_retries(self._options, listing, what="list")
        return [s for s in found if _state_of(s) not in ("destroyed", "destroying")]

    def _remember_root(self) -> None:
        if self._spec.parent_agent_id is None and self._remote is not None:
            _ROOTS_BY_SESSION[self._spec.session_id] = self._remote.id

    async def _reconcile_session(self) -> None:
        try:
            await _reconcile(self._require_client(), self._options, self._spec.session_id)
        except Exception as exc:  # best effort: never blocks a start
            log.warning("Daytona orphan reconciliation failed: %s", self._scrub(exc))

    async def _resume(self) -> None:
        """Refresh the remote state; start it when stopped; wait while it settles."""
        client, remote = self._require_client(), self._require_remote()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 90
        while True:
            await with_retries(self._options, remote.refresh_data, what="refresh")
            state = _state_of(remote)
            if state == "started":
                return
            if state in _RESUMABLE:
                await with_retries(
                    self._options,
                    lambda: client.start(remote, timeout=self._options.lifecycle_timeout_s),
                    what="start",
                )
                continue
            if state not in _SETTLING or loop.time() > deadline:
                raise SandboxUnavailableError(
                    f"Daytona sandbox {remote.id} is {state!r}; cannot resume it"
                )
            await asyncio.sleep(1.0)

    async def _boot(self) -> None:
        """A fresh interpreter context with the worker loaded; reads its ``ready`` frame."""
        remote = self._require_remote()
        options = self._options
        await with_retries(
            options, lambda: remote.fs.create_folder(options.workdir, "755"), what="mkdir"
        )
        self._context = await remote.code_interpreter.create_context(cwd=options.workdir)
        splitter = LineSplitter(self._spec.limits.max_frame_bytes)
        frames: list[dict[str, Any]] = []

        def on_stdout(message: Any) -> None:
            for line in splitter.feed(str(message.output).encode("utf-8", "replace")):
                frame = _marker_frame(line)
                if frame is not None:
                    frames.append(frame)

        result = await remote.code_interpreter.run_code(
            _preamble(),
            context=self._context,
            on_stdout=on_stdout,
            timeout=options.boot_timeout_s,
        )
        ready = next((f for f in frames if f.get("type") == "ready"), None)
        if ready is None or not isinstance(ready.get("reply_dir"), str):
            detail = f": {result.error.name}: {result.error.value}" if result.error else ""
            raise SandboxUnavailableError(
                f"The sandbox runtime did not start in Daytona sandbox {remote.id}{detail}"
            )
        if not isinstance(ready.get("pid"), int):
            raise SandboxUnavailableError("The sandbox runtime reported no pid")
        self._ready = ready

    async def _drop_context(self) -> None:
        context, self._context = self._context, None
        if context is None or self._remote is None:
            return
        with contextlib.suppress(Exception):
            await self._remote.code_interpreter.delete_context(context)

    async def stop(self) -> None:
        """Stop the remote sandbox (REPL state is lost; files stay); ``start()`` resumes."""
        if self._state is SandboxState.DESTROYED:
            return
        self._state = SandboxState.STOPPED
        remote, client = self._remote, self._client
        if remote is None or client is None:
            return
        with contextlib.suppress(Exception):
            await self._pull()
        await self._drop_context()
        try:
            await with_retries(
                self._options,
                lambda: client.stop(remote, timeout=self._options.lifecycle_timeout_s),
                what="stop",
            )
        except DaytonaError as exc:
            log.warning("Stopping Daytona sandbox %s failed: %s", remote.id, self._scrub(exc))

    async def destroy(self) -> None:
        """Delete the remote sandbox (retried; idempotent) and forget its journal entry."""
        if self._state is SandboxState.DESTROYED:
            return
        self._state = SandboxState.DESTROYED
        cell = self._cell
        if cell is not None and cell.open:
            cell.done.set_exception(
                ExecutionCancelledError("The sandbox was destroyed", state_preserved=False)
            )
        if self._run_task is not None:
            self._run_task.cancel()
        remote, client = self._remote, self._client
        try:
            if remote is not None and client is not None:
                await self._delete_remote(client, remote)
        finally:
            if client is not None:
                self._client = None
                await release_client(self._options, client)

    async def _delete_remote(self, client: AsyncDaytona, remote: AsyncSandbox) -> None:
        try:
            await with_retries(
                self._options,
                lambda: client.delete(remote, timeout=self._options.lifecycle_timeout_s),
                what="delete",
            )
        except DaytonaNotFoundError:
            pass
        except DaytonaError as exc:
            log.warning(
                "Deleting Daytona sandbox %s failed (journal kept for reconciliation): %s",
                remote.id,
                self._scrub(exc),
            )
            return
        if self._allocation is not None:
            self._journal.remove(self._allocation)
        if _ROOTS_BY_SESSION.get(self._spec.session_id) == remote.id:
            del _ROOTS_BY_SESSION[self._spec.session_id]

    # -- execution ------------------------------------------------------------------------------
    def _has_repl(self) -> bool:
        return self._context is not None

    def _cpu_seconds(self) -> int | None:
        return None  # no rlimits on Daytona: the wall-clock timeout bounds a cell

    async def _submit(self, cell: CellGate, frame: bytes, limit: float) -> None:
        payload = frame.decode("ascii").rstrip("\n")
        self._run_task = asyncio.create_task(self._run(cell, payload, limit))

    async def _run(self, cell: CellGate, payload: str, limit: float) -> None:
        """One ``run_code`` call; resolves the cell from its frames or from how it ended."""
        remote = self._require_remote()
        splitter = LineSplitter(self._spec.limits.max_frame_bytes)

        def on_stdout(message: Any) -> None:
            for line in splitter.feed(str(message.output).encode("utf-8", "replace")):
                frame = _marker_frame(line)
                if frame is not None:
                    self._dispatch(cell, frame)

        # The daemon's own timeout is a backstop behind ours (SIGINT, grace, then kill).
        backstop = math.ceil(limit + 2 * self._spec.limits.interrupt_grace_seconds) + 2
        failure: BaseException | None = None
        try:
            await remote.code_interpreter.run_code(
                f"_fleet_rt.run({payload!r})",
                context=self._context,
                on_stdout=on_stdout,
                timeout=backstop,
            )  # never retried: the cell may have run
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            failure = exc
        if not cell.open:
            return
        cell.done.set_exception(await self._lost_cell(cell, failure))
        self._state = SandboxState.FAILED

    async def _lost_cell(self, cell: CellGate, failure: BaseException | None) -> Exception:
        """The error for a cell whose ``run_code`` ended without a valid result frame."""
        if cell.stop_reason == "cancelled":
            return ExecutionCancelledError(
                "The cell was cancelled and its REPL was stopped (state lost)",
                state_preserved=False,
            )
        if cell.stop_reason == "timeout" or isinstance(failure, DaytonaTimeoutError):
            return ExecutionTimeoutError(
                "The cell timed out and did not stop on interrupt; its REPL was stopped "
                "(state lost, workspace intact)",
                state_preserved=False,
            )
        alive = await self._worker_alive()
        detail = f" ({self._scrub(failure)})" if failure is not None else ""
        if alive is False:
            return SandboxCrashedError(
                f"The sandbox worker died during the cell{detail}; REPL state is lost, the "
                "workspace is intact"
            )
        return ExecutionOutcomeUnknownError(
            f"The connection to Daytona broke after the cell was submitted{detail}; it may or "
            "may not have completed and will not be replayed"
        )

    async def _worker_alive(self) -> bool | None:
        """Probe the worker pid through ``process.exec``; None when the probe itself fails."""
        remote = self._require_remote()
        pid = int(self._ready["pid"])
        try:
            response = await remote.process.exec(f"kill -0 {pid}", timeout=10)
        except Exception:
            return None
        return response.exit_code == 0

    async def _reply(
        self, cell: CellGate, call_id: int, *, ok: bool, value: Any = None, error: str = ""
    ) -> None:
        """Upload the reply file, unless the cell has ended (the fence); retried (idempotent)."""
        remote = self._remote
        if remote is None or not cell.open:
            return
        data = tool_result_frame(cell, call_id, ok=ok, value=value, error=error)
        path = f"{self._ready['reply_dir']}/{cell.exec_id}-{call_id}.json"
        try:
            await with_retries(
                self._options,
                lambda: remote.fs.upload_file(data, path, self._options.transfer_timeout_s),
                what="reply",
            )
        except DaytonaError as exc:
            log.warning("Uploading a tool reply failed: %s", self._scrub(exc))

    async def _soft_interrupt(self) -> None:
        remote = self._remote
        if remote is not None and self._ready.get("pid"):
            with contextlib.suppress(Exception):
                await remote.process.exec(f"kill -INT {int(self._ready['pid'])}", timeout=10)

    async def _hard_stop(self, cell: CellGate) -> None:
        if self._run_task is not None:
            self._run_task.cancel()
        await self._drop_context()  # ends the worker process and everything it started
        if cell.open:
            cell.done.set_exception(await self._lost_cell(cell, None))
        self._state = SandboxState.FAILED

    async def _end_cell(self, cell: CellGate) -> None:
        # Shielded: a cancelled execute() still ends the cell, drops a dead context and pulls.
        await asyncio.shield(super()._end_cell(cell))

    async def _drain(self, cell: CellGate) -> None:
        task = self._run_task
        if task is not None and not task.done():
            with contextlib.suppress(TimeoutError, asyncio.CancelledError, Exception):
                await asyncio.wait_for(asyncio.shield(task), RUN_TASK_WAIT_S)
            task.cancel()

    async def _after_cell(self) -> None:
        if self._state is SandboxState.FAILED:
            await self._drop_context()
        self._count_allowed = max(self._spec.limits.workspace_max_entries, self._file_count)
        self._count_over = None
        if self._state is not SandboxState.DESTROYED:
            try:
                await self._pull()
            except Exception as exc:  # the next cell or start() pulls again
                log.warning("Pulling the Daytona workspace failed: %s", self._scrub(exc))

    def _checked(self, result: ExecutionResult) -> ExecutionResult:
        """A cell whose files were pulled under safe names says so (``fleet_core.names``); one
        that made the workspace hold more files than ``sandbox.max_files`` fails with the
        quota's error (what did not fit was not pulled)."""
        renamed, self._renamed = self._renamed, []
        result = with_note(result, names.renamed_note(renamed))
        over, self._count_over = self._count_over, None
        if over is None:
            return result
        return quota_result(result, count_text(over, self._spec.limits.workspace_max_entries))

    # -- files ----------------------------------------------------------------------------------
    async def write_file(self, path: str, data: bytes) -> FileInfo:
        info = await super().write_file(path, data)
        if self._remote is not None and self._state in (SandboxState.READY, SandboxState.BUSY):
            await self._upload([(path, data)])
        else:
            self._dirty.add(path)
        return info

    async def delete_file(self, path: str) -> None:
        await super().delete_file(path)
        self._synced.pop(path, None)
        self._dirty.discard(path)
        remote = self._remote
        if remote is not None and self._state in (SandboxState.READY, SandboxState.BUSY):
            with contextlib.suppress(DaytonaNotFoundError):
                await with_retries(
                    self._options,
                    lambda: remote.fs.delete_file(self._remote_path(path)),
                    what="delete file",
                )

    def _remote_path(self, path: str) -> str:
        return f"{self._ready.get('cwd') or self._options.workdir}/{path}"

    async def _push(self, paths: list[str]) -> None:
        """Upload host workspace files, in batches bounded by count and bytes."""
        batch: list[tuple[str, bytes]] = []
        size = 0
        for path in paths:
            try:
                data = await anyio.to_thread.run_sync(self._workspace.read, path)
            except Exception as exc:  # vanished or not a regular file: skip it
                log.warning("Not uploading %s: %s", path, exc)
                continue
            if batch and (
                len(batch) >= self._options.transfer_batch_files
                or size + len(data) > self._options.transfer_batch_bytes
            ):
                await self._upload(batch)
                batch, size = [], 0
            batch.append((path, data))
            size += len(data)
        if batch:
            await self._upload(batch)

    async def _upload(self, batch: list[tuple[str, bytes]]) -> None:
        remote = self._require_remote()
        uploads = [FileUpload(data, self._remote_path(path)) for path, data in batch]
        await with_retries(
            self._options,
            lambda: remote.fs.upload_files(uploads, self._options.transfer_timeout_s),
            what="upload",
        )
        for path, data in batch:
            self._synced[path] = hashlib.sha256(data).hexdigest()

    async def _pull(self) -> None:
        """Bring remote changes under the writable roots into the host workspace."""
        remote = self._remote
        if remote is None or not self._ready:
            return
        roots = [r for r in ROOTS if r not in self._spec.readonly_roots]
        base = str(self._ready.get("cwd") or self._options.workdir)
        limit = self._workspace.max_file_bytes
        listed = self._count_allowed + 1  # a listing past the file-count quota is cut there
        command = (
            "python3 -c "
            + shlex.quote(_list_program())
            + " "
            + shlex.quote(json.dumps(roots))
            + f" {limit} {listed}"
        )
        response = await with_retries(
            self._options,
            lambda: remote.process.exec(command, cwd=base, timeout=self._options.exec_timeout_s),
            what="list",
        )
        if response.exit_code != 0:
            raise RuntimeError(f"listing the remote workspace failed: {response.result[-500:]}")
        listing: dict[str, tuple[int, str | None]] = {}
        report = json.loads(response.result.strip().splitlines()[-1])
        for raw_path, size, digest in report["files"]:
            listing[str(raw_path).removeprefix("./")] = (int(size), digest)
        self._renamed += [names.Renamed(old=str(a), new=str(b)) for a, b in report["renamed"]]
        remote_count = int(report.get("count", len(listing)))
        cut = remote_count > len(listing)  # the listing stopped at the file-count quota
        wanted = self._within_count(
            self._within_quota(
                listing,
                [
                    path
                    for path, (_size, digest) in listing.items()
                    if digest is not None and self._synced.get(path) != digest
                ],
            ),
            roots,
            remote_count,
        )
        skipped = [path for path, (_size, digest) in listing.items() if digest is None]
        if skipped:
            log.warning("Not pulling files over %d bytes: %s", limit, ", ".join(skipped[:10]))
        for start in range(0, len(wanted), self._options.transfer_batch_files):
            await self._download(
                wanted[start : start + self._options.transfer_batch_files], listing
            )
        for path in [p for p in self._synced if p.split("/", 1)[0] in roots and not cut]:
            if path not in listing and path not in self._dirty:
                self._synced.pop(path, None)
                with contextlib.suppress(FileNotFoundError, OSError, WorkspacePathError):
                    await anyio.to_thread.run_sync(self._workspace.delete, names.safe_path(path))

    def _within_count(self, wanted: list[str], roots: list[str], remote_count: int) -> list[str]:
        """The changed files that keep the host mirror within the file-count allowance
        (``sandbox.max_files``, or the count before the cell if that was larger); a remote
        workspace past it makes the cell fail (``_checked``) and pulls no new file past it."""
        readonly = sum(1 for p in self._synced if p.split("/", 1)[0] not in roots)
        total = remote_count + readonly
        self._file_count = total
        if total <= self._count_allowed:
            return wanted
        self._count_over = total
        held = sum(1 for p in self._synced if p.split("/", 1)[0] in roots)
        room = max(self._count_allowed - readonly - held, 0)
        kept = [p for p in wanted if p in self._synced]
        new = [p for p in wanted if p not in self._synced]
        log.warning(
            "The remote workspace holds %d files, over the file-count quota of %d "
            "(sandbox.max_files); pulling %d of its %d new file(s)",
            total,
            self._spec.limits.workspace_max_entries,
            min(room, len(new)),
            len(new),
        )
        return kept + new[:room]

    def _within_quota(
        self, listing: Mapping[str, tuple[int, str | None]], wanted: list[str]
    ) -> list[str]:
        """The changed files that fit in ``workspace_quota_bytes`` next to the unchanged ones:
        the host mirror never grows past the quota, whatever the remote disk holds."""
        pending = set(wanted)
        budget = self._spec.limits.workspace_quota_bytes
        budget -= sum(size for path, (size, _d) in listing.items() if path not in pending)
        kept: list[str] = []
        for path in wanted:
            size = listing[path][0]
            if size <= budget:
                kept.append(path)
                budget -= size
        if len(kept) < len(wanted):
            skipped = [p for p in wanted if p not in set(kept)]
            log.warning(
                "Not pulling %d file(s) past the %d-byte workspace quota: %s",
                len(skipped),
                self._spec.limits.workspace_quota_bytes,
                ", ".join(skipped[:10]),
            )
        return kept

    async def _download(
        self, paths: list[str], listing: Mapping[str, tuple[int, str | None]]
    ) -> None:
        remote = self._require_remote()
        requests = [FileDownloadRequest(self._remote_path(p)) for p in paths]
        responses = await with_retries(
            self._options,
            lambda: remote.fs.download_files(requests, self._options.transfer_timeout_s),
            what="download",
        )
        for path, response in zip(paths, responses, strict=True):
            data = response.result
            if response.error or not isinstance(data, bytes):
                continue  # deleted meanwhile: the next pull sees it
            digest = hashlib.sha256(data).hexdigest()
            if digest != listing[path][1]:
                continue  # changed while read: the next pull takes the new version
            target = names.safe_path(path)  # the one rule for names (fleet_core.names)
            try:
                await anyio.to_thread.run_sync(self._workspace.write, target, data)
            except Exception as exc:  # a host-side quota, or a name no rule could mend
                log.warning("Not pulling %s: %s", names.shown(path), self._scrub(exc))
                continue
            if target != path:
                self._renamed.append(names.Renamed(old=path, new=target))
            self._synced[path] = digest

    # -- helpers --------------------------------------------------------------------------------
    def _require_client(self) -> AsyncDaytona:
        if self._client is None:
            raise SandboxUnavailableError(f"Sandbox {self._id} has no Daytona client")
        return self._client

    def _require_remote(self) -> AsyncSandbox:
        if self._remote is None:
            raise SandboxUnavailableError(f"Sandbox {self._id} has no Daytona sandbox")
        return self._remote

    def _scrub(self, exc: BaseException | None) -> str:
        return self._options.scrub(f"{type(exc).__name__}: {exc}") if exc is not None else ""


async def reconcile_orphans(
    options: DaytonaOptions, *, session_id: str | None = None, now: float | None = None
) -> list[str]:
    """Delete remote sandboxes this machine's journal says were left behind; their ids.

    An entry is an orphan when it expired or its owner process (on this host) is gone. It is
    looked up by id (``ready``) or by its allocation labels (``requested``), deleted (retried),
    and removed from the journal once the delete is confirmed.
    """
    client = acquire_client(options)
    try:
        return await _reconcile(client, options, session_id, now=now)
    finally:
        await release_client(options, client)


async def _reconcile(
    client: AsyncDaytona,
    options: DaytonaOptions,
    session_id: str | None,
    *,
    now: float | None = None,
) -> list[str]:
    journal = AllocationJournal(options.state_dir)
    moment = time.time() if now is None else now
    deleted: list[str] = []
    for entry in list(journal.entries(session_id)):
        if not entry.orphaned(moment):
            continue
        candidates: list[AsyncSandbox] = []
        if entry.sandbox_id:
            with contextlib.suppress(DaytonaNotFoundError):
                candidates.append(await _get(client, options, entry.sandbox_id))
        else:

            async def listing(labels: dict[str, str] = entry.labels) -> list[AsyncSandbox]:
                return [s async for s in client.list(ListSandboxesQuery(labels=labels))]

            candidates = await with_retries(options, listing, what="list")
        for sandbox in candidates:
            if _state_of(sandbox) in ("destroyed", "destroying"):
                continue
            with contextlib.suppress(DaytonaNotFoundError):
                await _delete(client, options, sandbox)
            deleted.append(sandbox.id)
        journal.remove(entry)
    return deleted


async def _get(client: AsyncDaytona, options: DaytonaOptions, sandbox_id: str) -> AsyncSandbox:
    return await with_retries(options, lambda: client.get(sandbox_id), what="get")


async def _delete(client: AsyncDaytona, options: DaytonaOptions, sandbox: AsyncSandbox) -> None:
    await with_retries(
        options, lambda: client.delete(sandbox, timeout=options.lifecycle_timeout_s), what="delete"
    )


def _state_of(sandbox: AsyncSandbox) -> str:
    state = sandbox.state
    return str(getattr(state, "value", state) or "")


def _marker_frame(line: bytes) -> dict[str, Any] | None:
    at = line.find(MARKER)
    if at < 0:
        return None
    return decode_frame(line[at + len(MARKER) :])
