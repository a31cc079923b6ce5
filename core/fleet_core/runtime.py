"""``FleetRuntime``: the one async facade the language server, the CLI and the tests use."""

from __future__ import annotations

import shutil
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar, get_args

import anyio.to_thread

from fleet_core import names, paging
from fleet_core.config import EffectiveConfig, ExecutionMode
from fleet_core.errors import (
    ConfigError,
    DatasetChanged,
    FileTooLarge,
    FleetError,
    InvalidInput,
    ModelUnavailable,
    SessionLimit,
    SessionOwned,
    TurnNotFound,
)
from fleet_core.models import (
    DatasetContext,
    Memory,
    ModelList,
    ProvenanceRecord,
    SessionInfo,
    SessionModels,
    SessionPage,
    TurnSummary,
    WorkspaceFile,
    WorkspacePage,
)
from fleet_core.net import http_probe
from fleet_core.observability.errors import TraceNotFound, TracingUnavailable
from fleet_core.store import Store
from fleet_core.store.database import database_url
from fleet_core.workspace import (
    FileInfo,
    Workspace,
    count_new_entries,
    prepare_workspaces,
    render_manifest,
    validate_relative_path,
    validate_session_id,
)

if TYPE_CHECKING:
    from fleet_core.engine.discovery import ModelDiscovery
    from fleet_core.engine.lm import LmProvider, Role
    from fleet_core.evaluation.datasets import EvalCase
    from fleet_core.evaluation.labels import LabelResult, LabelUpdate
    from fleet_core.evaluation.runner import CaseOutcome, EvalReport
    from fleet_core.events import TurnEvent
    from fleet_core.localmodel.supervisor import LocalEndpoint, LocalModel, LocalModelStatus
    from fleet_core.models import TurnRequest, TurnResult
    from fleet_core.observability.export import ExportStats, TraceExporter
    from fleet_core.observability.records import TraceRecord
    from fleet_core.observability.traceview import TraceView
    from fleet_core.observability.tracing import TurnTracer
    from fleet_core.turns import RunningTurn, TurnService

T = TypeVar("T")
MAX_DESCRIPTION_CHARS = 2_000
TraceExportMode = Literal["background", "deferred", "inline"]


@dataclass(frozen=True, slots=True)
class ArtifactInfo:
    """An artifact in a Session workspace with its provenance chain (newest record last)."""

    path: str
    size_bytes: int
    sha256: str
    provenance: list[ProvenanceRecord]


class FleetRuntime:
    """Sessions, workspace files, datasets, artifacts, memory and history for one process."""

    def __init__(
        self,
        config: EffectiveConfig,
        store: Store,
        *,
        lm_provider: LmProvider | None = None,
        tracer: TurnTracer | None = None,
        trace_export: TraceExportMode = "background",
        local_model: LocalModel | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self._workspaces: dict[str, Workspace] = {}
        self._lm_provider = lm_provider
        self._tracer = tracer
        self._owns_tracer = tracer is None
        self._turns: TurnService | None = None
        self._trace_export = trace_export
        self._exporter: TraceExporter | None = None
        self._slots = threading.Lock()  # a limit check and the take it allows are one step
        self._local_model = local_model  # the embedded model (made when a Turn needs it)
        # an optimization rollout's disposable runtime: the program it serves and the inputs
        # its replay snapshot restores (None: the Session's active program, inputs as prepared)
        self._rollout_program: Any = None
        self._rollout_inputs: Any = None
        self._discovery: ModelDiscovery | None = None  # the endpoint's model list, cached
        store.locks.on_lost(self._ownership_lost)  # the lease monitor stops the Session's Turn

    @classmethod
    async def open(
        cls,
        config: EffectiveConfig,
        *,
        lm_provider: LmProvider | None = None,
        tracer: TurnTracer | None = None,
        trace_export: TraceExportMode = "background",
        local_model: LocalModel | None = None,
    ) -> FleetRuntime:
        """Open the store (migrating it) and fail any Turn a dead process left running.

        ``tracer`` defaults to the one ``[mlflow]`` configures (``local``: an SQLite store under
        ``<state_dir>/mlflow/``), created when first used; mlflow itself is imported only when a
        trace is exported or read, never here and never on a Turn's path. ``trace_export``:
        ``background`` exports queued traces from a thread (traces a previous process left
        queued included); ``deferred`` (short-lived CLI commands) leaves them queued for the
        next process or ``flush_traces``; ``inline`` (evaluation runs, which read each trace
        right after its Turn) exports a Turn's trace before ``run_turn`` returns."""
        url = database_url(
            config.secrets.database_url.get_secret_value() if config.secrets.database_url else None,
            config.state_dir,
        )
        check = config.settings.storage.lease_check_seconds
        store = await anyio.to_thread.run_sync(
            partial(Store.open, url, config.state_dir, lease_check_seconds=check)
        )
        runtime = cls(
            config,
            store,
            lm_provider=lm_provider,
            tracer=tracer,
            trace_export=trace_export,
            local_model=local_model,
        )
        await runtime._run(prepare_workspaces, config.state_dir / "workspaces")  # + stale temps
        await runtime._recover_interrupted()
        pending = await runtime._run(store.count_pending_traces)
        if trace_export == "background" and pending:
            runtime._start_exporter()
        return runtime

    async def close(self, *, export_grace_seconds: float = 5.0) -> None:
        """Stop the trace exporter (what it has not exported stays queued) and the store."""
        if self._exporter is not None:
            await self._run(self._exporter.stop, export_grace_seconds)
        if self._owns_tracer and self._tracer is not None:
            self._tracer.close()
        if self._local_model is not None:  # stops the embedded server if no one else uses it
            await self._run(self._local_model.release)
        await self._run(self.store.close)

    @property
    def tracer(self) -> TurnTracer:
        """The Turn tracer (``FleetRuntime.open(tracer=...)`` or the configured one, created on
        first use). Front ends use it to read traces (``tracer.load_trace``) and, when enabled,
        ``tracer.backend`` for labels and evaluation runs."""
        if self._tracer is None:
            from fleet_core.observability.tracing import configured_tracer

            self._tracer = configured_tracer(self.config)
        return self._tracer

    async def _run(self, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await anyio.to_thread.run_sync(partial(func, *args, **kwargs))

    # Trace export ---------------------------------------------------------------------------

    @property
    def exporter(self) -> TraceExporter:
        """Exports the traces Turns queue in their commits (``observability.export``)."""
        if self._exporter is None:
            from fleet_core.observability.export import TraceExporter
            from fleet_core.observability.redaction import Redactor

            self._exporter = TraceExporter(
                self.store, self.tracer, redactor=Redactor.from_config(self.config)
            )
        return self._exporter

    def _start_exporter(self) -> None:
        if self.tracer.enabled:
            self.exporter.start()

    async def _trace_queued(self, trace_id: str) -> None:
        if not self.tracer.enabled or self._trace_export == "deferred":
            return
        if self._trace_export == "inline":
            try:
                await self.export_trace(trace_id)
            except Exception:  # logged by the exporter; the trace stays queued
                return
        else:
            self.exporter.start()
            self.exporter.notify()

    async def stop_exporting(self, grace_seconds: float = 3.0) -> None:
        """Stop the background exporter (server shutdown); an export in progress may finish
        within ``grace_seconds``, and what is left stays queued for the next process."""
        if self._exporter is not None:
            await self._run(self._exporter.stop, grace_seconds)

    async def flush_traces(self) -> ExportStats:
        """Export every queued trace now (``fleet-lsp trace``, evaluation); failures stay
        queued. With tracing off, queued traces wait for a configuration that has it on."""
        from fleet_core.observability.export import ExportStats

        if not self.tracer.enabled:
            return ExportStats()
        return await self._run(self.exporter.export_pending)

    async def pending_trace(self, trace_id: str) -> TraceRecord | None:
        """A trace a Turn queued that is not exported yet (``None`` when not queued)."""
        return await self._run(self.exporter.queued_record, trace_id)

    async def export_trace(self, trace_id: str) -> bool:
        """Export one queued trace now (False when it is not queued: already exported)."""
        if not self.tracer.enabled:
            return False
        return await self._run(self.exporter.export_one, trace_id)

    async def _recover_interrupted(self) -> None:
        for session_id in await self._run(self.store.running_sessions):
            if self.store.locks.owned(session_id):
                continue
            try:
                await self._run(self.store.locks.acquire, session_id)
            except SessionOwned:
                continue  # a live process owns it: its Turns are still running
            try:
                await self._run(self.store.mark_interrupted, session_id)
                # the dead process's child-agent workspaces (a Turn removes its own as it ends)
                agents = self.config.state_dir / "agents" / session_id
                await self._run(shutil.rmtree, agents, ignore_errors=True)
            finally:
                await self._run(self.store.locks.release, session_id)

    # Sessions -------------------------------------------------------------------------------

    def _take(self, session_id: str, reload: bool = False) -> None:
        """Own the Session, within ``runtime.max_active_sessions`` (a Session this process
        already owns never counts twice; closing or deleting one frees its slot)."""
        limit = self.config.settings.runtime.max_active_sessions
        locks = self.store.locks
        with self._slots:
            if not locks.owned(session_id) and locks.held() >= limit:
                raise SessionLimit(
                    f"This fleet-lsp process already holds {limit} Sessions, the limit "
                    f"(runtime.max_active_sessions = {limit}); close a Session "
                    f"(fleet/session/close) or raise max_active_sessions to open '{session_id}'",
                    session_id=session_id,
                    setting="runtime.max_active_sessions",
                    limit=limit,
                )
            locks.acquire(session_id, reload=reload)

    async def new_session(
        self, session_id: str | None = None, mode: str | None = None
    ) -> SessionInfo:
        session_id = validate_session_id(session_id or f"sess_{uuid.uuid4().hex[:8]}")
        mode = _mode(mode or self.config.settings.runtime.execution_mode)
        await self._run(self._take, session_id)
        try:
            info = await self._run(self.store.create_session, session_id, mode)
        except Exception:
            await self._run(self.store.locks.release, session_id)
            raise
        await self._run(self.workspace(session_id).ensure_layout)
        return info

    async def load_session(self, session_id: str) -> SessionInfo:
        """Take ownership of a stored Session for this process (again, after it was lost)."""
        info = await self.describe_session(session_id)
        await self._run(self._take, session_id, reload=True)
        await self._run(self.workspace(session_id).ensure_layout)
        return info

    async def describe_session(self, session_id: str) -> SessionInfo:
        return await self._run(self.store.get_session, validate_session_id(session_id))

    async def list_sessions(self) -> list[SessionInfo]:
        return await self._run(self.store.list_sessions)

    async def sessions_page(
        self, cursor: str | None = None, limit: int | None = None
    ) -> SessionPage:
        """One page of Sessions, newest first (``limit``: 1-500, default 100); pass the page's
        ``next_cursor`` for the next one. A bad cursor is an ``InvalidInput``."""
        size = paging.check_limit(limit, paging.SESSIONS_DEFAULT_LIMIT, paging.SESSIONS_MAX_LIMIT)
        after = None
        if cursor is not None:
            stamp, session_id = paging.decode(cursor, "sessions", 2)
            try:
                after = (datetime.fromisoformat(stamp), session_id)
            except ValueError:
                raise paging.invalid(cursor, "sessions") from None
        sessions, more = await self._run(self.store.session_page, limit=size, after=after)
        next_cursor = None
        if more and sessions:
            last = sessions[-1]
            next_cursor = paging.encode("sessions", last.updated_at.isoformat(), last.session_id)
        return SessionPage(sessions=sessions, next_cursor=next_cursor)

    async def close_session(self, session_id: str) -> None:
        """Give up ownership; the Session's history and files stay stored."""
        await self.describe_session(session_id)
        await self._run(self.store.locks.release, session_id)
        self._workspaces.pop(session_id, None)

    async def delete_session(self, session_id: str) -> None:
        # never refused by the Session limit: the take is released as the Session goes
        await self.describe_session(session_id)
        await self._run(self.store.locks.acquire, session_id)
        await self._run(self.store.delete_session, session_id)
        await self._run(shutil.rmtree, self._workspace_dir(session_id), ignore_errors=True)
        await self._run(self.store.locks.release, session_id)
        self._workspaces.pop(session_id, None)

    async def set_mode(self, session_id: str, mode: str) -> SessionInfo:
        await self.own_session(session_id)
        return await self._run(self.store.update_session, session_id, mode=_mode(mode))

    async def effective_config(self, session_id: str) -> EffectiveConfig:
        """The configuration with this Session's persisted selections applied."""
        info = await self.describe_session(session_id)
        selections = dict(info.selections) | {"runtime.execution_mode": info.mode}
        return self.config.with_session(selections)

    async def set_models(
        self, session_id: str, root: str | None = None, sub: str | None = None
    ) -> SessionModels:
        """Select the Session's root and sub model ids (``None`` clears a selection, so the
        configuration's applies again). Stored as the Session selections ``llm.root.model`` and
        ``llm.sub.model`` (source ``session``); only model ids, never an endpoint or a key. The
        next Turn uses them; a running Turn keeps the models it started with."""
        from fleet_core.engine.lm import SELECTABLE_ROLES, check_model_id, selection_key

        secrets = self.config.secrets
        checked = {
            role: None if value is None else check_model_id(value, role=role, secrets=secrets)
            for role, value in (("root", root), ("sub", sub))
        }
        await self.own_session(session_id)
        info = await self.describe_session(session_id)
        selections = dict(info.selections)
        for role in SELECTABLE_ROLES:
            model = checked[role]
            if model is None:
                selections.pop(selection_key(role), None)
            else:
                selections[selection_key(role)] = model
        updated = await self._run(self.store.update_session, session_id, selections=selections)
        return _session_models(updated)

    async def session_models(self, session_id: str) -> SessionModels:
        """The Session's model selection (``None`` per role: the configuration's model)."""
        return _session_models(await self.describe_session(session_id))

    async def list_models(self, refresh: bool = False) -> ModelList:
        """The configured endpoint's models (``GET /models``), cached for a minute per endpoint
        (``refresh`` asks again); ``ModelUnavailable`` naming the endpoint's host and what to set
        when it is unconfigured or does not answer."""
        if self._discovery is None:
            from fleet_core.engine.discovery import ModelDiscovery

            self._discovery = ModelDiscovery()
        return await self._run(self._discovery.list, self.config, refresh=refresh)

    async def own_session(self, session_id: str) -> None:
        """Take ownership of a stored Session for this process (no layout work)."""
        await self.describe_session(session_id)
        await self._run(self._take, session_id)

    def _ownership_lost(self, session_id: str, message: str) -> None:
        """The lease monitor's thread: stop the Session's running Turn (``SessionOwned``)."""
        if self._turns is not None:
            self._turns.ownership_lost(session_id, message)

    # Workspace ------------------------------------------------------------------------------

    def workspace(self, session_id: str) -> Workspace:
        workspace = self._workspaces.get(session_id)
        if workspace is None:
            storage = self.config.settings.storage
            workspace = Workspace(
                self._workspace_dir(session_id),
                max_file_bytes=storage.max_file_bytes,
                max_read_bytes=storage.max_read_bytes,
            )
            self._workspaces[session_id] = workspace
        return workspace

    def _workspace_dir(self, session_id: str) -> Path:
        return self.config.state_dir / "workspaces" / validate_session_id(session_id)

    async def attach(
        self, session_id: str, source: Path, target: str | None = None, *, room: bool = True
    ) -> WorkspaceFile:
        """Stream a local file into the workspace (``files/<basename>`` unless ``target``),
        refused with ``FileTooLarge`` past ``sandbox.max_files`` (``room=False``: the caller
        checked with ``check_room``)."""
        await self.own_session(session_id)
        if target is not None:
            validate_relative_path(target)
        if room:
            name = target or f"files/{names.escaped_name(source.name or '_')}"
            await self.check_room(session_id, [name], label=f"'{names.shown(str(source))}'")
        info = await self._run(self.workspace(session_id).attach, source, target)
        return _wire_file(info)

    async def write_file(
        self, session_id: str, path: str, data: bytes, *, room: bool = False
    ) -> WorkspaceFile:
        """Write one workspace file; ``room``: refuse a new one past ``sandbox.max_files``."""
        await self.own_session(session_id)
        if room:
            await self.check_room(session_id, [path], label=f"'{names.shown(path)}'")
        return _wire_file(await self._run(self.workspace(session_id).write, path, data))

    async def check_room(self, session_id: str, paths: Sequence[str], *, label: str) -> None:
        """Refuse (``FileTooLarge``) adding ``paths`` when the entries they would create (files
        and missing folders) take the workspace past ``sandbox.max_files``, the same count its
        sandboxes enforce; nothing is written either way."""
        limit = self.config.settings.sandbox.max_files
        workspace = self.workspace(session_id)

        def count() -> tuple[int, int]:
            new = count_new_entries(workspace.root, paths)
            return new, (workspace.entry_count(stop_after=limit) if new else 0)

        new, held = await self._run(count)
        if new and held + new > limit:
            raise FileTooLarge(
                f"Attaching {label} would make the workspace hold {held + new:,} entries "
                f"({new:,} new); the limit is {limit:,} (setting sandbox.max_files, the "
                "workspace's file-count quota). Delete files (fleet/workspace/delete) or raise "
                "the limit; nothing was attached",
                session_id=session_id,
                limit=limit,
                setting="sandbox.max_files",
            )

    async def stat_file(self, session_id: str, path: str) -> WorkspaceFile:
        await self.describe_session(session_id)
        return _wire_file(await self._run(self.workspace(session_id).stat, path))

    async def read_file(
        self, session_id: str, path: str, *, max_bytes: int | None = None, offset: int = 0
    ) -> bytes:
        await self.describe_session(session_id)
        return await self._run(
            self.workspace(session_id).read, path, max_bytes=max_bytes, offset=offset
        )

    async def delete_file(self, session_id: str, path: str) -> None:
        await self.own_session(session_id)
        await self._run(self.workspace(session_id).delete, path)

    async def list_workspace(self, session_id: str) -> dict[str, list[WorkspaceFile]]:
        """Every regular file, split into ``files`` (everything else) and ``artifacts``."""
        await self.describe_session(session_id)
        tree = await self._run(self.workspace(session_id).tree)
        files = [_wire_file(i) for i in tree if not i.path.startswith("artifacts/")]
        artifacts = [_wire_file(i) for i in tree if i.path.startswith("artifacts/")]
        return {"files": files, "artifacts": artifacts}

    async def workspace_page(
        self, session_id: str, cursor: str | None = None, limit: int | None = None
    ) -> WorkspacePage:
        """One page of the workspace's regular files in path order (``limit``: 1-1000, default
        500), split into ``files`` and ``artifacts``; only the page's files are stat'ed and
        hashed. Pass ``next_cursor`` for the next page; a bad cursor is an ``InvalidInput``."""
        size = paging.check_limit(limit, paging.FILES_DEFAULT_LIMIT, paging.FILES_MAX_LIMIT)
        after = paging.decode(cursor, "files", 1)[0] if cursor is not None else None
        await self.describe_session(session_id)
        infos, last = await self._run(self.workspace(session_id).page, after=after, limit=size)
        files = [_wire_file(i) for i in infos if not i.path.startswith("artifacts/")]
        artifacts = [_wire_file(i) for i in infos if i.path.startswith("artifacts/")]
        next_cursor = paging.encode("files", last) if last is not None else None
        return WorkspacePage(files=files, artifacts=artifacts, next_cursor=next_cursor)

    async def manifest(self, session_id: str) -> str:
        storage = self.config.settings.storage
        return await self._run(
            render_manifest,
            self.workspace(session_id),
            max_files=storage.manifest_max_files,
            preview_chars=storage.manifest_preview_chars,
            max_chars=storage.manifest_max_chars,
        )

    # Dataset context ------------------------------------------------------------------------

    async def set_dataset(
        self, session_id: str, path: str, description: str | None = None
    ) -> DatasetContext:
        await self.own_session(session_id)
        if description is not None and len(description) > MAX_DESCRIPTION_CHARS:
            raise InvalidInput(
                f"Dataset description is {len(description)} characters; "
                f"the limit is {MAX_DESCRIPTION_CHARS}"
            )
        info = await self._run(self.workspace(session_id).stat, path)
        if info.size_bytes > self.config.settings.storage.max_file_bytes:
            raise FileTooLarge(f"'{path}' is larger than the file limit")
        dataset = DatasetContext(
            path=info.path, size_bytes=info.size_bytes, sha256=info.sha256, description=description
        )
        await self._run(self.store.set_dataset, session_id, dataset)
        return dataset

    async def clear_dataset(self, session_id: str) -> None:
        await self.own_session(session_id)
        await self._run(self.store.set_dataset, session_id, None)

    async def check_dataset(self, session_id: str) -> DatasetContext | None:
        """Re-check the selected dataset's digest (done at every Turn start)."""
        info = await self.describe_session(session_id)
        if info.dataset is None:
            return None
        try:
            current = await self._run(self.workspace(session_id).stat, info.dataset.path)
        except Exception:
            raise DatasetChanged(
                f"Dataset source '{info.dataset.path}' is gone; select the new revision"
            ) from None
        if current.sha256 != info.dataset.sha256:
            raise DatasetChanged("Dataset source changed; select the new revision")
        return info.dataset

    # Artifacts, memory, history -------------------------------------------------------------

    async def list_artifacts(self, session_id: str) -> list[ArtifactInfo]:
        await self.describe_session(session_id)
        tree = await self._run(self.workspace(session_id).tree, "artifacts")
        provenance = await self._run(self.store.artifact_provenance, session_id)
        return [
            ArtifactInfo(
                path=i.path,
                size_bytes=i.size_bytes,
                sha256=i.sha256,
                provenance=provenance.get(i.path, []),
            )
            for i in tree
        ]

    async def history(self, session_id: str, limit: int = 50) -> list[TurnSummary]:
        await self.describe_session(session_id)
        return await self._run(self.store.history, session_id, limit)

    async def memory_summary(self, session_id: str) -> str:
        return await self._run(self.store.memory_summary, validate_session_id(session_id))

    async def memories(self, session_id: str, reviewed: bool | None = None) -> list[Memory]:
        await self.describe_session(session_id)
        return await self._run(self.store.memories, session_id, reviewed=reviewed)

    async def review_memory(self, session_id: str, memory_id: str, reviewed: bool = True) -> None:
        await self.own_session(session_id)
        await self._run(self.store.review_memory, session_id, memory_id, reviewed)

    async def add_memory(self, session_id: str, content: str, kind: str = "user") -> Memory:
        """A memory the user adds: unreviewed until reviewed (bounded size and count)."""
        await self.own_session(session_id)
        return await self._run(
            self.store.add_memory, session_id, kind, content, {"addedBy": "user"}
        )

    async def reject_memory(self, session_id: str, memory_id: str) -> None:
        """Reject a memory: it is deleted and never reaches the model."""
        await self.own_session(session_id)
        await self._run(self.store.delete_memory, session_id, memory_id)

    # Turns (delegates to fleet_core.turns) ----------------------------------------------------

    @property
    def turns(self) -> TurnService:
        """The Turn service, created on first use (it imports no dspy until a Turn runs)."""
        if self._turns is None:
            from fleet_core.turns import TurnService

            self._turns = TurnService(
                store=self.store,
                sessions=self,
                config=self.config,
                tracer=lambda: self.tracer,
                lm_provider=self._models(),
                on_trace_queued=self._trace_queued,
                programs=(lambda _sid: self._rollout_program) if self._rollout_program else None,
                restore_inputs=self._rollout_inputs,
            )
        return self._turns

    async def run_turn(
        self, request: TurnRequest, *, on_event: Callable[[TurnEvent], None] | None = None
    ) -> TurnResult:
        """Run one Turn end to end; ``on_event`` is called on the event loop thread."""
        return await self.turns.run_turn(request, on_event=on_event)

    async def cancel_turn(self, turn_id: str) -> bool:
        """Cancel a running Turn by id; False when no such Turn is running in this process."""
        return await self.turns.cancel_turn(turn_id)

    def running_turns(self, session_id: str | None = None) -> list[RunningTurn]:
        """The Turns running in this process (of one Session, or all)."""
        return self.turns.running(session_id) if self._turns is not None else []

    def check_not_busy(self, session_id: str) -> None:
        """Raise the one ``TurnBusy`` error when the Session has a running Turn here."""
        busy = self._turns.busy(session_id) if self._turns is not None else None
        if busy is not None:
            raise busy

    # Traces, labels, evaluation, settings (faces) --------------------------------------------
    # Everything the faces (fleet_lsp: server, CLI, doctor, evaluation commands) need beyond
    # Sessions and Turns. They never reach the store, the engine, observability or evaluation
    # internals themselves (tests/unit/test_invariants.py); mlflow and dspy load lazily here.

    async def get_turn(self, turn_id: str) -> TurnSummary:
        return await self._run(self.store.get_turn, turn_id)

    async def turn_result(self, turn_id: str) -> dict[str, Any]:
        """A finished Turn's stored ``TurnResult`` (wire form); ``TurnNotFound`` until then."""
        return await self._run(self.store.turn_result, turn_id)

    async def turn_session(self, turn_id: str) -> str:
        """The id of the Session a Turn belongs to (``TurnNotFound`` for an unknown Turn)."""
        return await self._run(self.store.turn_session, turn_id)

    async def find_turn_by_trace(self, trace_id: str) -> TurnSummary | None:
        """The Turn behind a trace id: the Turn whose trace it is, else the Turn with that id
        (a Turn without a recorded trace is addressed by its Turn id); ``None`` when neither."""
        found = await self._run(self.store.find_turn_by_trace, trace_id)
        if found is not None:
            return found
        try:
            return await self.get_turn(trace_id)
        except TurnNotFound:
            return None

    def tracing_status(self) -> TracingStatus:
        """Whether Turns are traced to MLflow, where, and if not, why."""
        tracer: Any = self.tracer
        destination = getattr(tracer, "destination", None)
        if getattr(tracer, "enabled", False) and destination is not None:
            scope = getattr(tracer, "scope", "runtime")
            return TracingStatus(True, destination.kind, destination.experiment(scope))
        reason = getattr(tracer, "reason", None) or TRACING_OFF
        if reason.startswith("Tracing is off"):
            reason += "; set FLEET_MLFLOW_DESTINATION=local to record traces"
        return TracingStatus(False, self.config.settings.mlflow.destination, None, reason)

    async def load_trace(self, trace_id: str) -> TraceView:
        """A stored MLflow trace (``TraceNotFound``; ``TracingUnavailable`` when tracing is off
        or the destination is invalid: the message says which). A trace still queued for export
        is exported first; if its destination cannot take it now, it is read from the queue
        (``view.pending``)."""
        tracer = self._mlflow_tracer()
        try:
            await self.export_trace(trace_id)
        except Exception:
            from fleet_core.observability.export import pending_view

            pending = await self.pending_trace(trace_id)
            if pending is not None:
                return await self._run(pending_view, pending)
        return await self._run(tracer.load_trace, trace_id)

    async def trace_markdown(self, trace: str | TraceView) -> str:
        """A stored trace (by id, or as loaded) rendered as a markdown document."""
        from fleet_core.observability.traceview import render_trace_markdown

        view = await self.load_trace(trace) if isinstance(trace, str) else trace
        return await self._run(render_trace_markdown, view)

    async def label_trace(self, trace_id: str, update: LabelUpdate) -> LabelResult:
        """Apply a partial label update to a trace (or the trace of a Turn id): MLflow
        expectations on the trace and the store's row, with optimization eligibility."""
        from fleet_core.evaluation.labels import LabelService

        resolved = await self._labelled_trace_id(trace_id)
        backend = self._mlflow_tracer().backend
        await self.export_trace(resolved)  # labels are MLflow expectations on the trace
        return await LabelService(self.store, backend).label(resolved, update)

    async def trace_labels(self, trace_id: str) -> dict[str, Any] | None:
        """The store's label row of a trace (or of a Turn id's trace), ``None`` if unlabelled."""
        resolved = await self._labelled_trace_id(trace_id)
        return await self._run(self.store.get_trace_labels, resolved)

    async def labelled_cases(self) -> tuple[list[EvalCase], list[str]]:
        """Evaluation cases from labelled (not rejected), replay-captured Turns, and a reason for
        every labelled trace that cannot be one."""
        from fleet_core.evaluation.datasets import labelled_cases

        return await self._run(labelled_cases, self.store)

    @classmethod
    async def open_evaluation(
        cls, config: EffectiveConfig, *, lm_provider: LmProvider | None = None
    ) -> FleetRuntime:
        """``open`` with Turns traced into the *evaluation* experiment (``eval run``); an
        invalid ``[mlflow]`` destination is a ``ConfigError`` here, not a warning."""
        from fleet_core.observability.tracing import create_tracer

        tracer = create_tracer(config, scope="evaluation")
        try:
            runtime = await cls.open(
                config, lm_provider=lm_provider, tracer=tracer, trace_export="inline"
            )
        except BaseException:
            tracer.close()
            raise
        runtime._owns_tracer = True
        return runtime

    async def run_evaluation(
        self,
        cases: Sequence[EvalCase],
        *,
        run_name: str | None = None,
        on_case: Callable[[CaseOutcome], None] | None = None,
    ) -> EvalReport:
        """Run every case as a fresh Session and Turn, score it (``fleet_metric``, the suite,
        the judge role) and, when tracing is on, record one MLflow run; ``ModelUnavailable``
        first when the root, sub or judge role has no model."""
        from fleet_core.evaluation.judge import DspyJudge
        from fleet_core.evaluation.runner import run_eval

        lms = self._models()
        lms.check("root", "sub", "judge")
        tracer: Any = self.tracer
        backend = tracer.backend if getattr(tracer, "enabled", False) else None
        return await run_eval(
            self,
            cases,
            judge=DspyJudge(lms.lm("judge")),
            backend=backend,
            run_name=run_name,
            on_case=on_case,
            store=self.store,
        )

    # Optimization (fleet_core.optimization; docs/optimization.md) ---------------------------

    async def optimize(
        self,
        session_id: str,
        *,
        budget: str | None = "light",
        max_metric_calls: int | None = None,
        seed: int = 0,
        validation_ratio: float = 0.35,
        on_progress: Callable[[OptimizationProgress], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> OptimizationRun:
        """A GEPA run for the Session's program: dataset, search, three validation passes, the
        gate, and a saved (inactive) candidate with its report. ``on_progress`` is called on the
        event loop; setting ``cancel`` stops the run, which then raises ``FleetError``
        (TurnCancelled) and leaves no candidate and no change to the active program."""
        import asyncio

        from fleet_core.optimization.service import OptimizationService, RunOptions

        if budget is not None and budget not in ("light", "medium", "heavy"):
            raise InvalidInput(f"the GEPA budget must be light, medium or heavy; got {budget!r}")
        if max_metric_calls is not None:
            if not 1 <= max_metric_calls <= 100_000:
                raise InvalidInput("max_metric_calls must be between 1 and 100000")
            budget = None
        await self.describe_session(session_id)
        config = await self.effective_config(session_id)
        lms = self._models()
        lms.check("root", "sub", "judge", "reflection")
        loop = asyncio.get_running_loop()

        def progress(item: Any) -> None:
            if on_progress is not None:
                record = OptimizationProgress(
                    item.phase, item.done, item.total, item.best_score, item.message
                )
                loop.call_soon_threadsafe(on_progress, record)

        service = OptimizationService(
            store=self.store,
            config=config,
            lms=lms,
            validation_lms=_CacheFreeModels(lms),
            open_rollout=lambda models: partial(self._open_rollout, models),
            state_dir=self.config.state_dir,
            recorder=self._optimization_recorder(),
        )
        options = RunOptions(
            budget=budget,  # type: ignore[arg-type]
            max_metric_calls=max_metric_calls,
            seed=seed,
            validation_ratio=validation_ratio,
        )
        cancel = cancel or threading.Event()
        # The worker thread is not interruptible: a cancelled caller sets ``cancel`` (checked
        # between rollouts and inside each), waits for the thread to stop, then re-raises.
        worker = asyncio.ensure_future(
            anyio.to_thread.run_sync(
                partial(service.run, session_id, options, on_progress=progress, cancel=cancel)
            )
        )
        try:
            result = await asyncio.shield(worker)
        except asyncio.CancelledError:
            cancel.set()
            await asyncio.wait({worker})
            if not worker.cancelled():
                worker.exception()  # retrieved: the run stopped with OptimizationCancelled
            raise
        m = result.manifest
        return OptimizationRun(
            version=m.version,
            gate_passed=m.gate.passed,
            gate=[(c.name, c.passed, c.detail) for c in m.gate.checks],
            changed_components=list(m.changed_components),
            candidate_digest=m.candidate_digest,
            report_path=result.report_path,
            mlflow_run_id=result.mlflow_run_id,
            rollouts=result.rollouts,
            host_seconds=result.host_seconds,
            dataset_sizes=dict(m.dataset.get("sizes", {})),
            notes=list(result.notes),
        )

    async def optimization_status(self, session_id: str) -> OptimizationStatus:
        """The Session's candidates (newest last) with their gate verdicts, and the active
        program's digest (the built-in default's when nothing was approved)."""
        from fleet_core.optimization import candidates as cands

        await self.describe_session(session_id)
        state_dir = self.config.state_dir
        manifests = await self._run(cands.list_candidates, state_dir, session_id)
        active = await self._run(cands.active_digest, state_dir, session_id)
        return OptimizationStatus(
            session_id=session_id,
            active_digest=active,
            active_version=next(
                (m.version for m in manifests if m.candidate_digest == active), None
            ),
            candidates=[
                CandidateInfo.of(m, active=m.candidate_digest == active) for m in manifests
            ],
        )

    async def approve_candidate(self, session_id: str, version: str) -> CandidateInfo:
        """Re-check the gate, the candidate's bytes and the recorded incumbent, configuration,
        code and dependency identities, then write the active program atomically; the next Turn
        serves it. Stale evidence is refused with "reevaluate" (``InvalidInput``)."""
        from fleet_core.optimization import candidates as cands
        from fleet_core.optimization.service import identity

        await self.own_session(session_id)
        config = await self.effective_config(session_id)
        state_dir = self.config.state_dir
        current = await self._run(identity, state_dir, session_id, config)
        m = await self._run(cands.approve, state_dir, session_id, version, current)
        return CandidateInfo.of(m, active=True)

    async def optimization_report(self, session_id: str, version: str) -> str:
        """A candidate's markdown report."""
        from fleet_core.optimization import candidates as cands

        await self.describe_session(session_id)
        return await self._run(cands.read_report, self.config.state_dir, session_id, version)

    async def _open_rollout(
        self, models: LmProvider, config: EffectiveConfig, program: Any, restore: Any
    ) -> FleetRuntime:
        """A disposable runtime for one rollout (see fleet_core.optimization.rollout)."""
        from fleet_core.observability.tracing import NoopTracer

        runtime = await FleetRuntime.open(
            config,
            lm_provider=models,
            tracer=NoopTracer("optimization rollouts are not traced"),
            trace_export="deferred",
        )
        runtime._rollout_program = program
        runtime._rollout_inputs = restore
        runtime._turns = None  # built on first use, with the two above (no Turn ran yet)
        return runtime

    def _optimization_recorder(self) -> Any:
        """The MLflow run writer when tracing records to MLflow, else None."""
        if not self.tracing_status().enabled:
            return None
        from fleet_core.observability.optimization import record_optimization_run

        tracer: Any = self.tracer
        return partial(record_optimization_run, tracer.backend)

    async def reconfigure(self, config: EffectiveConfig) -> list[str]:
        """Apply new settings to what starts next: Turns not yet running get the new models,
        redaction and limits; running Turns keep what they started with. The state directory
        and database cannot change in place (``ConfigError``: restart). Returns notes on what
        applies only after a restart."""
        if not isinstance(config, EffectiveConfig):
            raise TypeError(f"reconfigure needs an EffectiveConfig, got {type(config).__name__}")
        current = self.config
        if config.state_dir != current.state_dir:
            raise ConfigError(
                f"The state directory changed ({current.state_dir} -> {config.state_dir}); "
                "restart the server to use it"
            )
        if config.secrets.database_url != current.secrets.database_url:
            raise ConfigError("The database URL changed; restart the server to use it")
        notes = []
        if self._tracer is not None and config.settings.mlflow != current.settings.mlflow:
            notes.append("[mlflow] changes apply after a restart")
        if config.settings.storage != current.settings.storage:
            self._workspaces.clear()  # new file limits for the next operation
        self.config = config
        if self._turns is not None:  # a running Turn keeps the config and models it started with
            models = self._models() if self._lm_provider is None else None  # not ones given to open
            self._turns.reconfigure(config, models)
        return notes

    def describe_storage(self) -> StorageInfo:
        """The store's backend and the state directory (doctor, ``fleet/debug/info``)."""
        return StorageInfo(backend=self.store.backend, state_dir=self.config.state_dir)

    @staticmethod
    def check_models(
        config: EffectiveConfig, roles: Sequence[Role] | None = None, *, probe: bool = True
    ) -> list[ModelCheck]:
        """Per role (default: all): is a model configured, and (``probe``) does its endpoint
        answer ``GET /models`` within 5 s? One probe per endpoint; keys are never shown. A role
        without an endpoint reports the embedded model when it is installed (``embedded``; it
        is never started here: its ``api_base`` is the running server's, if any)."""
        from fleet_core.engine.lm import ROLES, resolve_spec
        from fleet_core.localmodel.selection import models_in_use

        checks = []
        probed: dict[tuple[str, str], str] = {}
        for role in roles or ROLES:
            if role not in ROLES:
                raise InvalidInput(f"Unknown model role '{role}'; use one of: {', '.join(ROLES)}")
            try:
                spec, key = resolve_spec(config.settings.llm, config.secrets, role)
            except ModelUnavailable:
                (use,) = models_in_use(config, (role,))  # the embedded model, or what to set
                found = (use.model, use.api_base, use.problem, use.fix, use.embedded)
                checks.append(ModelCheck(role, use.configured, *found))
                continue
            problem = ""
            if probe:
                endpoint = (spec.api_base, key)
                if endpoint not in probed:
                    probed[endpoint] = http_probe(spec.api_base.rstrip("/") + "/models", key)
                problem = probed[endpoint]
            fix = (
                "check FLEET_LM_API_BASE, FLEET_LM_API_KEY and that the endpoint is up"
                if problem
                else ""
            )
            checks.append(ModelCheck(role, True, spec.model, spec.api_base, problem, fix))
        return checks

    @staticmethod
    def check_jev(config: EffectiveConfig, *, probe: bool = True) -> JevCheck:
        """Is Jev on (a key is set), and (``probe``) does ``GET /v1/models`` answer with it?"""
        from fleet_core.engine.jev import JevError, jev_client

        settings = config.settings.jev
        try:
            client = jev_client(config)
        except JevError as exc:
            return JevCheck(True, settings.base_url, settings.model, exc.message)
        if client is None:
            return JevCheck(False)
        if not probe:
            return JevCheck(True, client.base_url, client.model)
        try:
            models = client.models(remaining_seconds=5.0)
        except JevError as exc:
            return JevCheck(True, client.base_url, client.model, exc.message)
        return JevCheck(True, client.base_url, client.model, "", tuple(models))

    @staticmethod
    def check_tracing_store(config: EffectiveConfig) -> str:
        """Open the configured MLflow store and its experiments: '' when that works, else why
        (doctor; for a local store this creates it)."""
        from fleet_core.observability.tracing import create_tracer

        try:
            tracer: Any = create_tracer(config)
            backend = getattr(tracer, "backend", None) if tracer.enabled else None
            if backend is None:
                return "tracing is off"
            try:
                for scope in ("runtime", "evaluation"):
                    backend.experiment_id(scope)
            finally:
                tracer.close()
        except FleetError as exc:
            return exc.message
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"
        return ""

    @staticmethod
    def local_tracing_store(config: EffectiveConfig) -> tuple[str, str]:
        """The local MLflow store's tracking URI and artifact root (``mlflow ui``)."""
        from fleet_core.observability.destination import local_paths

        return local_paths(config.state_dir)

    @staticmethod
    def describe_sandbox(config: EffectiveConfig) -> dict[str, Any]:
        """The local sandbox's isolation layers (bwrap, cgroups, rlimits, or ``refused``)."""
        from fleet_core.sandbox.isolation import describe_local_isolation

        found: dict[str, Any] = describe_local_isolation(
            allow_unisolated=config.settings.sandbox.allow_unisolated
        )
        return found

    @staticmethod
    async def probe_sandbox(config: EffectiveConfig) -> str:
        """Run ``print(6*7)`` in a throwaway sandbox: '' when it printed 42, else why."""
        import tempfile

        from fleet_core.sandbox import create_sandbox
        from fleet_core.sandbox.base import SandboxSpec

        try:
            with tempfile.TemporaryDirectory(prefix="fleet-doctor-") as tmp:
                root = Path(tmp)
                for name in ("files", "artifacts", "memory", "skills"):
                    (root / name).mkdir()
                spec = SandboxSpec(session_id="doctor", agent_id="root", workspace=root)
                sandbox = create_sandbox(spec, config.settings.sandbox)
                try:
                    await sandbox.start()
                    result = await sandbox.execute("print(6*7)", timeout=30)
                finally:
                    await sandbox.destroy()
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"
        return "" if "42" in result.stdout else f"unexpected output {result.stdout[:200]!r}"

    def _models(self) -> LmProvider:
        if self._lm_provider is not None:
            return self._lm_provider
        from fleet_core.engine.lm import ConfiguredLmProvider

        return ConfiguredLmProvider.from_config(self.config, embedded=self._embedded())

    def _embedded(self) -> LocalModel:
        """The embedded model of this runtime's configuration (nothing starts until a Turn of a
        role without an endpoint needs it; ``close`` releases it)."""
        if self._local_model is None:
            from fleet_core.localmodel.supervisor import LocalModel

            self._local_model = LocalModel.from_config(self.config)
        return self._local_model

    # The embedded model for the faces (``fleet-lsp model``, doctor, demo): no store needed --

    @staticmethod
    def local_model_status(config: EffectiveConfig) -> LocalModelStatus:
        """The embedded model: installed, assembled, running (where, RSS, users); starts
        nothing."""
        from fleet_core.localmodel.supervisor import LocalModel

        return LocalModel.from_config(config).status()

    @staticmethod
    def serve_local_model(
        config: EffectiveConfig,
        *,
        progress: Callable[[int, int], None] | None = None,
        on_start: Callable[[str], None] | None = None,
    ) -> LocalEndpoint:
        """Start the embedded server (or find it running) and pin it: it keeps running after
        this process exits, until :meth:`stop_local_model`. Blocking (seconds to minutes: the
        weights are assembled first, with ``progress``)."""
        from fleet_core.localmodel.supervisor import LocalModel

        model = LocalModel.from_config(config)
        endpoint = model.ensure(pin=True, progress=progress, on_start=on_start)
        model.release()
        return endpoint

    @staticmethod
    def prepare_local_model(
        config: EffectiveConfig, *, progress: Callable[[int, int], None] | None = None
    ) -> bool:
        """Assemble the embedded model's weights when a Turn would use it (no endpoint for the
        root role) and they are not yet; ``True`` when the embedded model will be used. For a
        face that shows the progress itself (``fleet-lsp demo``)."""
        from fleet_core.localmodel.weights import assemble

        model = _root_embedded_model(config)
        if model is None:
            return False
        assemble(model.weights, model.home, progress=progress)
        return True

    @staticmethod
    @contextmanager
    def hold_local_model(
        config: EffectiveConfig,
        *,
        progress: Callable[[int, int], None] | None = None,
        on_start: Callable[[str], None] | None = None,
    ) -> Iterator[LocalEndpoint | None]:
        """For a face that runs Turns in another process (``fleet-lsp demo``): when the root role
        uses the embedded model, start it (or reuse a running one) and keep it running while the
        block runs; on leaving, this process lets go and the server stops unless another process
        uses it or it is pinned (a kill -9 of this process is reaped by the guard). Yields
        ``None`` and starts nothing when an endpoint is configured. Blocking on entry."""
        model = _root_embedded_model(config)
        if model is None:
            yield None
            return
        try:
            yield model.ensure(progress=progress, on_start=on_start)
        finally:
            model.release()

    @staticmethod
    def stop_local_model(config: EffectiveConfig) -> bool:
        """Stop the embedded server whoever started it; ``False`` when none was running."""
        from fleet_core.localmodel.supervisor import LocalModel

        return LocalModel.from_config(config).stop()

    def _mlflow_tracer(self) -> Any:
        """The tracer when it records to MLflow, else ``TracingUnavailable`` saying why."""
        status = self.tracing_status()
        if not status.enabled:
            raise TracingUnavailable(status.reason or TRACING_OFF)
        return self.tracer

    async def _labelled_trace_id(self, trace_id: str) -> str:
        """The MLflow trace id for a trace id or a Turn id (clear error when it has none)."""
        turn = await self.find_turn_by_trace(trace_id)
        if turn is None or turn.trace_id == trace_id:
            return trace_id
        if turn.trace_id is None:
            raise TraceNotFound(
                f"Turn '{turn.turn_id}' has no MLflow trace (tracing was off when it ran), "
                "so it cannot be labelled; labels are stored on traces",
                turn_id=turn.turn_id,
            )
        return turn.trace_id


def _session_models(info: SessionInfo) -> SessionModels:
    selections = info.selections
    root, sub = selections.get("llm.root.model"), selections.get("llm.sub.model")
    return SessionModels(
        session_id=info.session_id,
        root=root if isinstance(root, str) else None,
        sub=sub if isinstance(sub, str) else None,
    )


def _mode(mode: str) -> ExecutionMode:
    allowed = get_args(ExecutionMode)
    if mode not in allowed:
        raise InvalidInput(f"Unknown mode '{mode}'; use one of: {', '.join(allowed)}")
    return mode  # type: ignore[return-value]


def _wire_file(info: FileInfo) -> WorkspaceFile:
    return WorkspaceFile(path=info.path, size_bytes=info.size_bytes, sha256=info.sha256)


# Records of the faces' section -----------------------------------------------------------------

TRACING_OFF = 'Tracing is off ([mlflow] destination = "off")'


class _CacheFreeModels:
    """An ``LmProvider`` whose caching models are copies with the response cache off."""

    def __init__(self, inner: LmProvider) -> None:
        self.inner = inner
        self._copies: dict[str, Any] = {}
        self._lock = threading.Lock()

    def check(self, *roles: Role) -> None:
        self.inner.check(*roles)

    def uses_embedded(self, role: Role) -> bool:
        return self.inner.uses_embedded(role)

    def lm(self, role: Role) -> Any:
        with self._lock:
            if role not in self._copies:
                lm = self.inner.lm(role)
                self._copies[role] = lm.copy(cache=False) if getattr(lm, "cache", False) else lm
            return self._copies[role]


@dataclass(frozen=True, slots=True)
class OptimizationProgress:
    """One progress report of an optimization run (see fleet_core.optimization.service)."""

    phase: str  # dataset | search | validation | saving | done
    done: int = 0
    total: int = 0
    best_score: float | None = None
    message: str = ""


@dataclass(frozen=True, slots=True)
class CandidateInfo:
    version: str
    created_at: str
    gate_passed: bool
    gate: list[tuple[str, bool, str]]
    candidate_digest: str
    changed_components: list[str]
    active: bool

    @classmethod
    def of(cls, manifest: Any, *, active: bool) -> CandidateInfo:
        """A stored candidate (``optimization.candidates.Manifest``) as the faces show it."""
        return cls(
            version=manifest.version,
            created_at=manifest.created_at,
            gate_passed=manifest.gate.passed,
            gate=[(c.name, c.passed, c.detail) for c in manifest.gate.checks],
            candidate_digest=manifest.candidate_digest,
            changed_components=list(manifest.changed_components),
            active=active,
        )


@dataclass(frozen=True, slots=True)
class OptimizationRun:
    version: str
    gate_passed: bool
    gate: list[tuple[str, bool, str]]
    changed_components: list[str]
    candidate_digest: str
    report_path: Path
    mlflow_run_id: str | None
    rollouts: int
    host_seconds: float
    dataset_sizes: dict[str, int]
    notes: list[str]


@dataclass(frozen=True, slots=True)
class OptimizationStatus:
    session_id: str
    active_digest: str
    active_version: str | None
    candidates: list[CandidateInfo]


@dataclass(frozen=True, slots=True)
class TracingStatus:
    """Whether Turns are traced: the destination kind, the experiment, or why not."""

    enabled: bool
    destination: str
    experiment: str | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class StorageInfo:
    backend: str  # "sqlite" | "postgresql"
    state_dir: Path


@dataclass(frozen=True, slots=True)
class JevCheck:
    """The optional Jev decision API: off (no ``FLEET_JEV_API_KEY``), or on at ``base_url``
    with the probe's ``problem`` ('' when ``/v1/models`` answered) and the models the key may
    use. Never the key."""

    on: bool
    base_url: str | None = None
    model: str | None = None
    problem: str = ""
    models: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ModelCheck:
    """One model role: configured (model and endpoint) or not, and the endpoint probe's
    problem ('' when it answered or was not probed); ``fix`` says what to do."""

    role: str
    configured: bool
    model: str | None = None
    api_base: str | None = None
    problem: str = ""
    fix: str = ""
    embedded: bool = False  # the embedded offline model (no endpoint is configured)

    @property
    def ok(self) -> bool:
        return self.configured and not self.problem


def _root_embedded_model(config: EffectiveConfig) -> LocalModel | None:
    """The embedded model when the root role would use it (no endpoint configured), else None."""
    from fleet_core.engine.lm import ConfiguredLmProvider
    from fleet_core.localmodel.supervisor import LocalModel

    model = LocalModel.from_config(config)
    if not ConfiguredLmProvider.from_config(config, embedded=model).uses_embedded("root"):
        return None
    return model
