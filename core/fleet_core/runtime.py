"""``FleetRuntime``: the one async facade the language server, the CLI and the tests use."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, get_args

import anyio.to_thread

from fleet_core.config import EffectiveConfig, ExecutionMode
from fleet_core.errors import DatasetChanged, FileTooLarge, InvalidInput, SessionOwned
from fleet_core.models import (
    DatasetContext,
    Memory,
    ProvenanceRecord,
    SessionInfo,
    TurnSummary,
    WorkspaceFile,
)
from fleet_core.store import Store
from fleet_core.store.database import database_url
from fleet_core.workspace import (
    FileInfo,
    Workspace,
    render_manifest,
    validate_relative_path,
    validate_session_id,
)

if TYPE_CHECKING:
    from fleet_core.engine.lm import LmProvider
    from fleet_core.events import TurnEvent
    from fleet_core.models import TurnRequest, TurnResult
    from fleet_core.observability.tracing import TurnTracer
    from fleet_core.turns import TurnService

T = TypeVar("T")
MAX_DESCRIPTION_CHARS = 2_000


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
    ) -> None:
        self.config = config
        self.store = store
        self._workspaces: dict[str, Workspace] = {}
        self._lm_provider = lm_provider
        self._tracer = tracer
        self._owns_tracer = tracer is None
        self._turns: TurnService | None = None

    @classmethod
    async def open(
        cls,
        config: EffectiveConfig,
        *,
        lm_provider: LmProvider | None = None,
        tracer: TurnTracer | None = None,
    ) -> FleetRuntime:
        """Open the store (migrating it) and fail any Turn a dead process left running.

        ``tracer`` defaults to the one ``[mlflow]`` configures (``local``: an SQLite store under
        ``<state_dir>/mlflow/``), created when first used; mlflow itself is imported only when a
        Turn's trace is written or a trace is read, never here."""
        url = database_url(
            config.secrets.database_url.get_secret_value() if config.secrets.database_url else None,
            config.state_dir,
        )
        store = await anyio.to_thread.run_sync(Store.open, url, config.state_dir)
        runtime = cls(config, store, lm_provider=lm_provider, tracer=tracer)
        await runtime._recover_interrupted()
        return runtime

    async def close(self) -> None:
        if self._owns_tracer and self._tracer is not None:
            self._tracer.close()
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
            finally:
                await self._run(self.store.locks.release, session_id)

    # Sessions -------------------------------------------------------------------------------

    async def new_session(
        self, session_id: str | None = None, mode: str | None = None
    ) -> SessionInfo:
        session_id = validate_session_id(session_id or f"sess_{uuid.uuid4().hex[:8]}")
        mode = _mode(mode or self.config.settings.runtime.execution_mode)
        await self._run(self.store.locks.acquire, session_id)
        try:
            info = await self._run(self.store.create_session, session_id, mode)
        except Exception:
            await self._run(self.store.locks.release, session_id)
            raise
        await self._run(self.workspace(session_id).ensure_layout)
        return info

    async def load_session(self, session_id: str) -> SessionInfo:
        """Take ownership of a stored Session for this process."""
        info = await self.describe_session(session_id)
        await self._own(session_id)
        await self._run(self.workspace(session_id).ensure_layout)
        return info

    async def describe_session(self, session_id: str) -> SessionInfo:
        return await self._run(self.store.get_session, validate_session_id(session_id))

    async def list_sessions(self) -> list[SessionInfo]:
        return await self._run(self.store.list_sessions)

    async def close_session(self, session_id: str) -> None:
        """Give up ownership; the Session's history and files stay stored."""
        await self.describe_session(session_id)
        await self._run(self.store.locks.release, session_id)
        self._workspaces.pop(session_id, None)

    async def delete_session(self, session_id: str) -> None:
        await self._own(session_id)
        await self._run(self.store.delete_session, session_id)
        await self._run(shutil.rmtree, self._workspace_dir(session_id), ignore_errors=True)
        await self._run(self.store.locks.release, session_id)
        self._workspaces.pop(session_id, None)

    async def set_mode(self, session_id: str, mode: str) -> SessionInfo:
        await self._own(session_id)
        return await self._run(self.store.update_session, session_id, mode=_mode(mode))

    async def effective_config(self, session_id: str) -> EffectiveConfig:
        """The configuration with this Session's persisted selections applied."""
        info = await self.describe_session(session_id)
        selections = dict(info.selections) | {"runtime.execution_mode": info.mode}
        return self.config.with_session(selections)

    async def _own(self, session_id: str) -> None:
        await self.describe_session(session_id)
        await self._run(self.store.locks.acquire, session_id)

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
        self, session_id: str, source: Path, target: str | None = None
    ) -> WorkspaceFile:
        """Stream a local file into the workspace (``files/<basename>`` unless ``target``)."""
        await self._own(session_id)
        if target is not None:
            validate_relative_path(target)
        info = await self._run(self.workspace(session_id).attach, source, target)
        return _wire_file(info)

    async def write_file(self, session_id: str, path: str, data: bytes) -> WorkspaceFile:
        await self._own(session_id)
        return _wire_file(await self._run(self.workspace(session_id).write, path, data))

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
        await self._own(session_id)
        await self._run(self.workspace(session_id).delete, path)

    async def list_workspace(self, session_id: str) -> dict[str, list[WorkspaceFile]]:
        """Every regular file, split into ``files`` (everything else) and ``artifacts``."""
        await self.describe_session(session_id)
        tree = await self._run(self.workspace(session_id).tree)
        files = [_wire_file(i) for i in tree if not i.path.startswith("artifacts/")]
        artifacts = [_wire_file(i) for i in tree if i.path.startswith("artifacts/")]
        return {"files": files, "artifacts": artifacts}

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
        await self._own(session_id)
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
        await self._own(session_id)
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
        await self._own(session_id)
        await self._run(self.store.review_memory, session_id, memory_id, reviewed)

    # Turns (delegates to fleet_core.turns) ----------------------------------------------------

    @property
    def turns(self) -> TurnService:
        """The Turn service, created on first use (it imports no dspy until a Turn runs)."""
        if self._turns is None:
            from fleet_core.turns import TurnService

            self._turns = TurnService(self, lm_provider=self._lm_provider, tracer=self._tracer)
        return self._turns

    async def run_turn(
        self, request: TurnRequest, *, on_event: Callable[[TurnEvent], None] | None = None
    ) -> TurnResult:
        """Run one Turn end to end; ``on_event`` is called on the event loop thread."""
        return await self.turns.run_turn(request, on_event=on_event)

    async def cancel_turn(self, turn_id: str) -> bool:
        """Cancel a running Turn by id; False when no such Turn is running in this process."""
        return await self.turns.cancel_turn(turn_id)


def _mode(mode: str) -> ExecutionMode:
    allowed = get_args(ExecutionMode)
    if mode not in allowed:
        raise InvalidInput(f"Unknown mode '{mode}'; use one of: {', '.join(allowed)}")
    return mode  # type: ignore[return-value]


def _wire_file(info: FileInfo) -> WorkspaceFile:
    return WorkspaceFile(path=info.path, size_bytes=info.size_bytes, sha256=info.sha256)
