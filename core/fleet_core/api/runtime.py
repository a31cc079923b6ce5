"""``FleetRuntime``: a process's Sessions, workspaces, datasets, artifacts, memory, history and
Turns, with its traces, evaluation and optimization as capability objects (``.traces``,
``.evaluation``, ``.optimization``). Every method is async; blocking work runs in a thread."""

from __future__ import annotations

import logging
import shutil
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import anyio.to_thread

from fleet_core import names, paging
from fleet_core.api.evaluation import Evaluation
from fleet_core.api.optimization import Optimization
from fleet_core.api.records import ArtifactInfo, StorageInfo
from fleet_core.api.threads import in_thread
from fleet_core.api.traces import Traces
from fleet_core.config import EffectiveConfig, owner_identity
from fleet_core.errors import (
    ConfigError,
    DatasetChanged,
    FileTooLarge,
    FleetError,
    InvalidInput,
    SessionLimit,
    SessionOwned,
)
from fleet_core.models import (
    DatasetContext,
    Memory,
    ModelList,
    SessionInfo,
    SessionModels,
    SessionPage,
    TurnError,
    TurnSummary,
    WorkspaceFile,
    WorkspacePage,
)
from fleet_core.modes import EXECUTION_MODES, ExecutionMode
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
    from fleet_core.blobs.sync import PublishPlan, SessionContent
    from fleet_core.engine.discovery import ModelDiscovery
    from fleet_core.engine.lm import LmProvider
    from fleet_core.events import TurnEvent
    from fleet_core.localmodel.supervisor import LocalModel
    from fleet_core.models import TurnRequest, TurnResult
    from fleet_core.observability.export import TraceExporter
    from fleet_core.observability.tracing import TurnTracer
    from fleet_core.store import Store
    from fleet_core.turns import TurnService

T = TypeVar("T")
log = logging.getLogger(__name__)
MAX_DESCRIPTION_CHARS = 2_000
# a file's mtime comes from the kernel's coarse clock, up to a tick behind the one a Turn's
# start was read from
_MTIME_SLACK_NS = 20_000_000
TraceExportMode = Literal["background", "deferred", "inline"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Collaborators:
    """What ``FleetRuntime.open`` is given beside the configuration (each None: the configured
    one, made when first needed). ``program`` and ``restore_inputs``: an optimization rollout's
    disposable runtime serves that program and restores the inputs its replay snapshot recorded
    (None: the Session's active program, inputs as prepared)."""

    lm_provider: LmProvider | None = None
    tracer: TurnTracer | None = None
    trace_export: TraceExportMode = "background"
    local_model: LocalModel | None = None
    program: Any = None
    restore_inputs: Any = None


class FleetRuntime:
    """Sessions, workspace files, datasets, artifacts, memory and history for one process."""

    def __init__(
        self, config: EffectiveConfig, store: Store, given: Collaborators = Collaborators()
    ) -> None:
        """Over an open ``store``; use ``FleetRuntime.open``."""
        self.config = config
        self.store = store
        self._given = given
        self._workspaces: dict[str, Workspace] = {}
        self._tracer = given.tracer
        self._owns_tracer = given.tracer is None
        self._turns: TurnService | None = None
        self._exporter: TraceExporter | None = None
        self._slots = threading.Lock()  # a limit check and the take it allows are one step
        self._local_model = given.local_model  # the embedded model (made when a Turn needs it)
        self.traces = Traces(self)
        self.evaluation = Evaluation(self)
        self.optimization = Optimization(self, FleetRuntime.open)
        self._discovery: ModelDiscovery | None = None  # the endpoint's model list, cached
        self._content: SessionContent | None = None  # shared workspace content (open sets it)
        if store.blobs is not None:
            from fleet_core.blobs.sync import SessionContent

            state_dir = config.state_dir
            self._content = SessionContent(
                store,
                state_dir / "workspaces",
                max_bytes=config.settings.storage.blob_max_bytes,
                # approved programs and candidates follow the Session too
                extras=lambda session_id: state_dir / "optimization" / session_id,
            )
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
        program: Any = None,
        restore_inputs: Any = None,
    ) -> FleetRuntime:
        """Open the store (migrating it) and fail any Turn a dead process left running.

        ``tracer`` defaults to the one ``[mlflow]`` configures (``local``: an SQLite store under
        ``<state_dir>/mlflow/``), created when first used; mlflow itself is imported only when a
        trace is exported or read, never here and never on a Turn's path. ``trace_export``:
        ``background`` exports queued traces from a thread (traces a previous process left
        queued included); ``deferred`` (short-lived CLI commands) leaves them queued for the
        next process or ``traces.flush``; ``inline`` (evaluation runs, which read each trace
        right after its Turn) exports a Turn's trace before ``run_turn`` returns."""
        from fleet_core.store import Store  # SQLAlchemy: loaded when a runtime opens
        from fleet_core.store.content import backend_factory
        from fleet_core.store.database import database_url

        url = database_url(
            config.secrets.database_url.get_secret_value() if config.secrets.database_url else None,
            config.state_dir,
        )
        storage = config.settings.storage
        blobs = backend_factory(storage, config.state_dir)
        store = await anyio.to_thread.run_sync(
            partial(
                Store.open,
                url,
                config.state_dir,
                lease_check_seconds=storage.lease_check_seconds,
                blobs=blobs,
                pool_size=storage.pool_size,
                max_overflow=storage.max_overflow,
            )
        )
        given = Collaborators(
            lm_provider=lm_provider,
            tracer=tracer,
            trace_export=trace_export,
            local_model=local_model,
            program=program,
            restore_inputs=restore_inputs,
        )
        runtime = cls(config, store, given)
        await runtime._run(prepare_workspaces, config.state_dir / "workspaces")  # + stale temps
        await runtime._recover_interrupted()
        await runtime.collect_blobs()
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
        self._forget_workspaces()
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
        return await in_thread(func, *args, **kwargs)

    # Trace export ---------------------------------------------------------------------------

    @property
    def exporter(self) -> TraceExporter:
        """Exports the traces Turns queue in their commits (``observability.export``)."""
        if self._exporter is None:
            from fleet_core.observability.export import Backoff, TraceExporter
            from fleet_core.observability.redaction import Redactor

            self._exporter = TraceExporter(
                self.store,
                self.tracer,
                redactor=Redactor.from_config(self.config),
                backoff=Backoff(maximum=self.config.settings.mlflow.export_max_backoff_seconds),
            )
        return self._exporter

    def _start_exporter(self) -> None:
        if self.tracer.enabled:
            self.exporter.start()

    async def _trace_queued(self, trace_id: str) -> None:
        if not self.tracer.enabled or self._given.trace_export == "deferred":
            return
        if self._given.trace_export == "inline":
            try:
                await self.traces.export(trace_id)
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

    async def _recover_interrupted(self) -> None:
        for session_id in await self._run(self.store.running_sessions):
            if self.store.locks.owned(session_id):
                continue
            running = await self._run(self.store.running_turns, session_id)
            try:
                await self._run(self.store.locks.acquire, session_id)
            except SessionOwned:
                continue  # a live process owns it: its Turns are still running
            try:
                await self._run(self._fail_interrupted, session_id, running)
            finally:
                await self._run(self.store.locks.release, session_id)

    def _fail_interrupted(self, session_id: str, running: dict[str, datetime]) -> None:
        """Blocking, as the Session's new owner: fail the Turns a dead owner left ``running``
        as interrupted, and remove its child-agent workspaces (a Turn removes its own as it
        ends)."""
        self.store.mark_interrupted(session_id, self._interrupted_errors(session_id, running))
        shutil.rmtree(self.config.state_dir / "agents" / session_id, ignore_errors=True)

    def _interrupted_errors(
        self, session_id: str, running: dict[str, datetime]
    ) -> dict[str, TurnError]:
        """Blocking: each interrupted Turn's error, naming the files this host's workspace
        changed since it began. A Turn's code writes in place, so what it was writing when its
        process stopped may be incomplete: with a shared blob store the committed bytes are put
        back; with the local one (the workspace is the store) the user is told."""
        from fleet_core.store.ownership import interrupted_error

        errors: dict[str, TurnError] = {}
        workspace = self.workspace(session_id)
        for turn_id, began in running.items():
            changed = workspace.modified_since(int(began.timestamp() * 1e9) - _MTIME_SLACK_NS)
            restored = (
                self._content.restore(session_id, workspace, changed) if self._content else []
            )
            left = sorted(set(changed) - set(restored))
            errors[turn_id] = interrupted_error(left, restored)
        return errors

    # Sessions -------------------------------------------------------------------------------

    def _take_over(self, session_id: str, reload: bool = False) -> None:
        """``_take`` a stored Session; when this process did not own it, the Turns a dead owner
        left running are failed as interrupted here (``_fail_interrupted``): a process that
        started before that owner died never saw them."""
        running = {} if self.store.locks.owned(session_id) else self.store.running_turns(session_id)
        self._take(session_id, reload)
        if running:
            self._fail_interrupted(session_id, running)

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
            info = await self._run(
                partial(self.store.create_session, session_id, mode, owner=self.owner)
            )
        except Exception:
            await self._run(self.store.locks.release, session_id)
            raise
        await self._run(self.workspace(session_id).ensure_layout)
        return info

    async def load_session(self, session_id: str) -> SessionInfo:
        """Take ownership of a stored Session for this process (again, after it was lost)."""
        info = await self.describe_session(session_id)
        await self._run(self._take_over, session_id, reload=True)
        await self._run(self.store.record_owner, session_id, self.owner)
        info = info.model_copy(update={"owner_host": self.owner[0], "owner_user": self.owner[1]})
        await self._run(self.workspace(session_id).ensure_layout)
        await self._sync(session_id, owned=True)
        return info

    async def describe_session(self, session_id: str) -> SessionInfo:
        return await self._run(self.store.get_session, validate_session_id(session_id))

    async def list_sessions(self) -> list[SessionInfo]:
        return await self._run(self.store.list_sessions)

    @property
    def owner(self) -> tuple[str, str]:
        """The (host name, OS user) this process records on the Sessions it creates or takes."""
        return owner_identity(self.config)

    async def sessions_page(
        self,
        cursor: str | None = None,
        limit: int | None = None,
        *,
        owner_host: str | None = None,
        owner_user: str | None = None,
        updated_since: str | datetime | None = None,
    ) -> SessionPage:
        """One page of Sessions, newest first (``limit``: 1-500, default 100); pass the page's
        ``next_cursor`` for the next one, with the same filters. The filters (owner host, owner
        user, updated at or after an ISO-8601 instant) combine with AND. A bad cursor or
        instant is an ``InvalidInput``."""
        since = _instant(updated_since, "updatedSince")
        size = paging.check_limit(limit, paging.SESSIONS_DEFAULT_LIMIT, paging.SESSIONS_MAX_LIMIT)
        after = None
        if cursor is not None:
            stamp, session_id = paging.decode(cursor, "sessions", 2)
            try:
                after = (datetime.fromisoformat(stamp), session_id)
            except ValueError:
                raise paging.invalid(cursor, "sessions") from None
        sessions, more = await self._run(
            partial(
                self.store.session_page,
                limit=size,
                after=after,
                owner_host=owner_host,
                owner_user=owner_user,
                updated_since=since,
            )
        )
        next_cursor = None
        if more and sessions:
            last = sessions[-1]
            next_cursor = paging.encode("sessions", last.updated_at.isoformat(), last.session_id)
        return SessionPage(sessions=sessions, next_cursor=next_cursor)

    async def close_session(self, session_id: str) -> None:
        """Give up ownership; the Session's history and files stay stored."""
        await self.describe_session(session_id)
        await self._run(self.store.locks.release, session_id)
        self._forget_workspace(session_id)

    async def delete_session(self, session_id: str) -> None:
        # never refused by the Session limit: the take is released as the Session goes
        await self.describe_session(session_id)
        await self._run(self.store.locks.acquire, session_id)
        await self._run(self.store.delete_session, session_id)
        await self._run(shutil.rmtree, self._workspace_dir(session_id), ignore_errors=True)
        await self._run(self.store.locks.release, session_id)
        self._forget_workspace(session_id)
        if self._content is not None:
            await self._run(self._content.forget, session_id)
            await self.collect_blobs()

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
        await self._run(self._take_over, session_id)
        await self._sync(session_id, owned=True)

    # Workspace content shared through the blob store (fleet_core.blobs; docs/storage.md) -----

    async def _sync(self, session_id: str, *, owned: bool = False) -> None:
        """Bring this host's copy of the Session's workspace to the store's version (one read
        when it is current); an owner publishes what it has when the store has nothing yet."""
        if self._content is None:
            return
        unpublished = await self._run(self._content.refresh, session_id, self.workspace(session_id))
        if unpublished and owned:
            await self._publish(session_id)

    async def sync_session(self, session_id: str, *, publish: bool = False) -> None:
        """Bring this host's copy of the Session's content (workspace, approved program,
        candidates) to the store's version; ``publish``: then publish what this owner changed
        (an approval, an optimization run). Nothing to do when content is not shared."""
        await self._sync(session_id, owned=publish)
        if publish:
            await self._publish(session_id)

    async def _publish(self, session_id: str) -> None:
        """Publish this host's changes to the Session's workspace (an attach, write, delete)."""
        plan = self.content_plan(session_id)
        if plan is None:
            return
        if plan.delta.empty:
            self.content_published(plan, None)
            return
        version = await self._run(self.store.publish_content, session_id, plan.delta)
        self.content_published(plan, version)

    def content_plan(self, session_id: str) -> PublishPlan | None:
        """Blocking: what this host changed in the Session's workspace since it last published
        (None: content is not shared). The Turn service commits it with the outcome."""
        if self._content is None:
            return None
        return self._content.plan(session_id, self.workspace(session_id))

    def content_published(self, plan: PublishPlan, version: int | None) -> None:
        """``plan`` was committed as ``version`` (None: nothing was)."""
        if self._content is not None:
            self._content.published(plan, version)

    async def collect_blobs(self, grace_seconds: float | None = None) -> int:
        """Delete blobs no Session refers to (``storage.blob_gc_grace_seconds`` unless given);
        returns how many. A failure is logged, never raised: it is retried at the next call."""
        if self.store.blobs is None:
            return 0
        grace = self.config.settings.storage.blob_gc_grace_seconds
        try:
            return await self._run(
                self.store.collect_blobs, grace if grace_seconds is None else grace_seconds
            )
        except FleetError as exc:
            log.warning("Blob garbage collection failed: %s", exc.message)
            return 0

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

    def _forget_workspace(self, session_id: str) -> None:
        """Drop the Session's workspace object and release its change tracking (an inotify
        instance: a user has 128); the files stay."""
        workspace = self._workspaces.pop(session_id, None)
        if workspace is not None:
            workspace.close()

    def _forget_workspaces(self) -> None:
        for session_id in list(self._workspaces):
            self._forget_workspace(session_id)

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
        await self._publish(session_id)
        return _wire_file(info)

    async def write_file(
        self, session_id: str, path: str, data: bytes, *, room: bool = False
    ) -> WorkspaceFile:
        """Write one workspace file; ``room``: refuse a new one past ``sandbox.max_files``."""
        await self.own_session(session_id)
        if room:
            await self.check_room(session_id, [path], label=f"'{names.shown(path)}'")
        info = await self._run(self.workspace(session_id).write, path, data)
        await self._publish(session_id)
        return _wire_file(info)

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
        await self._sync(session_id)
        return _wire_file(await self._run(self.workspace(session_id).stat, path))

    async def read_file(
        self, session_id: str, path: str, *, max_bytes: int | None = None, offset: int = 0
    ) -> bytes:
        await self.describe_session(session_id)
        await self._sync(session_id)
        return await self._run(
            self.workspace(session_id).read, path, max_bytes=max_bytes, offset=offset
        )

    async def delete_file(self, session_id: str, path: str) -> None:
        await self.own_session(session_id)
        await self._run(self.workspace(session_id).delete, path)
        await self._publish(session_id)

    async def list_workspace(self, session_id: str) -> dict[str, list[WorkspaceFile]]:
        """Every regular file, split into ``files`` (everything else) and ``artifacts``."""
        await self.describe_session(session_id)
        await self._sync(session_id)
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
        await self._sync(session_id)
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
        plan = await self._run(self.content_plan, session_id)
        if plan is None:
            await self._run(self.store.set_dataset, session_id, dataset)
            return dataset
        # the dataset's bytes are published in the same transaction that selects it
        delta = None if plan.delta.empty else plan.delta
        _info, version = await self._run(self.store.select_dataset, session_id, dataset, delta)
        self.content_published(plan, version)
        return dataset

    async def clear_dataset(self, session_id: str) -> None:
        await self.own_session(session_id)
        await self._run(self.store.set_dataset, session_id, None)

    async def check_dataset(self, session_id: str) -> DatasetContext | None:
        """Re-check the selected dataset's digest (done at every Turn start)."""
        info = await self.describe_session(session_id)
        if info.dataset is None:
            return None
        await self._sync(session_id)
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
        await self._sync(session_id)
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
                programs=(lambda _sid: self._given.program) if self._given.program else None,
                restore_inputs=self._given.restore_inputs,
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

    # Optimization (fleet_core.optimization; docs/optimization.md) ---------------------------

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
            # new file limits for the next operation; a running Turn keeps its workspace (and
            # its change tracking, released when that object goes)
            self._workspaces.clear()
        self.config = config
        if self._turns is not None:  # a running Turn keeps the config and models it started with
            # new configured models; not when open was given the models
            models = self._models() if self._given.lm_provider is None else None
            self._turns.reconfigure(config, models)
        return notes

    def describe_storage(self) -> StorageInfo:
        """The store's backend and the state directory (doctor, ``fleet/debug/info``)."""
        return StorageInfo(backend=self.store.backend, state_dir=self.config.state_dir)

    def models(self) -> LmProvider:
        """The models this runtime's Turns use (those given to ``open``, else the configured)."""
        return self._models()

    def _models(self) -> LmProvider:
        if self._given.lm_provider is not None:
            return self._given.lm_provider
        from fleet_core.engine.lm import ConfiguredLmProvider

        return ConfiguredLmProvider.from_config(self.config, embedded=self._embedded())

    def _embedded(self) -> LocalModel:
        """The embedded model of this runtime's configuration (nothing starts until a Turn of a
        role without an endpoint needs it; ``close`` releases it)."""
        if self._local_model is None:
            from fleet_core.localmodel.supervisor import LocalModel

            self._local_model = LocalModel.from_config(self.config)
        return self._local_model


def _session_models(info: SessionInfo) -> SessionModels:
    selections = info.selections
    root, sub = selections.get("llm.root.model"), selections.get("llm.sub.model")
    return SessionModels(
        session_id=info.session_id,
        root=root if isinstance(root, str) else None,
        sub=sub if isinstance(sub, str) else None,
    )


def _instant(value: str | datetime | None, name: str) -> datetime | None:
    """An ISO-8601 instant (UTC when it has no offset); ``InvalidInput`` naming ``name``."""
    if value is None or isinstance(value, datetime):
        stamp = value
    else:
        try:
            stamp = datetime.fromisoformat(value.strip())
        except ValueError:
            raise InvalidInput(
                f"'{name}' must be an ISO-8601 instant such as 2026-12-01T00:00:00Z, "
                f"got {value[:64]!r}"
            ) from None
    if stamp is not None and stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=UTC)
    return stamp


def _mode(mode: str) -> ExecutionMode:
    if mode not in EXECUTION_MODES:
        raise InvalidInput(f"Unknown mode '{mode}'; use one of: {', '.join(EXECUTION_MODES)}")
    return mode


def _wire_file(info: FileInfo) -> WorkspaceFile:
    return WorkspaceFile(path=info.path, size_bytes=info.size_bytes, sha256=info.sha256)
