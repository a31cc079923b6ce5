"""One rollout: a replay snapshot run as a Turn in a fresh, disposable runtime.

The runtime is opened by the facade's factory (``OpenRollout``) on a temporary state directory
(its own SQLite store and workspaces) with the current settings and the Session's overrides, the
candidate program to serve, untraced, and the snapshot's prepared inputs (memory summary,
history) restored over what the empty store would give. The snapshot's ``files/`` and
``artifacts/`` are written into a fresh Session, its dataset selection restored, one Turn runs,
and the runtime and its directory are always removed. Blocking from the caller's view: ``run``
drives a private event loop, so it is called from a worker thread (GEPA's).

A rollout that cannot run at all (the replay no longer fits the current settings, e.g. a file
over today's limit; the runtime does not open) is a failed ``RolloutResult`` with the reason as
its error, like a Turn that failed: one bad replay never ends a run in its validation passes.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from fleet_core.errors import FleetError
from fleet_core.models import TurnRequest, TurnResult
from fleet_core.optimization.dataset import OptExample
from fleet_core.optimization.program import ProgramState

if TYPE_CHECKING:
    from fleet_core.config import EffectiveConfig
    from fleet_core.engine.context import TurnInputs
    from fleet_core.events import TurnEvent

MAX_CELLS = 20
MAX_CELL_CHARS = 2_000


class OptimizationCancelled(FleetError):
    kind = "TurnCancelled"


class RolloutRuntime(Protocol):
    async def new_session(self, session_id: str | None = None, mode: str | None = None) -> Any: ...

    async def write_file(self, session_id: str, path: str, data: bytes) -> Any: ...

    async def set_dataset(
        self, session_id: str, path: str, description: str | None = None
    ) -> Any: ...

    async def run_turn(
        self, request: TurnRequest, *, on_event: Callable[[TurnEvent], None] | None = None
    ) -> TurnResult: ...

    async def cancel_turn(self, turn_id: str) -> bool: ...

    async def close(self, *, export_grace_seconds: float = 5.0) -> None: ...


OpenRollout = Callable[
    ["EffectiveConfig", ProgramState, Callable[["TurnInputs"], "TurnInputs"]],
    Awaitable[RolloutRuntime],
]


@dataclass(slots=True)
class RolloutResult:
    answer: str
    route: str | None
    status: str
    error: str | None
    model_calls: int | None
    sandbox_errors: int | None
    seconds: float
    cells: list[str] = field(default_factory=list)  # "code -> output" of the root's cells
    outcome: str | None = None  # how the answer was reached (models.AnswerKind)

    @property
    def failed(self) -> bool:
        return self.status != "completed"


def _history_text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value)


class Rollouts:
    """Runs rollouts; counts them and stops when ``cancel`` is set (thread-safe)."""

    def __init__(
        self,
        open_runtime: OpenRollout,
        config: EffectiveConfig,
        *,
        cancel: threading.Event,
        on_rollout: Callable[[], None] | None = None,
    ) -> None:
        self.open_runtime = open_runtime
        self.config = config
        self.cancel = cancel
        self.on_rollout = on_rollout
        self.count = 0
        self.host_seconds = 0.0
        self._lock = threading.Lock()

    def run(self, example: OptExample, program: ProgramState) -> RolloutResult:
        if self.cancel.is_set():
            raise OptimizationCancelled("The optimization was cancelled")
        started = time.perf_counter()
        try:
            return asyncio.run(self._run(example, program))
        except OptimizationCancelled:
            raise
        except Exception as exc:
            if self.cancel.is_set():
                raise OptimizationCancelled("The optimization was cancelled") from None
            reason = exc.message if isinstance(exc, FleetError) else str(exc)
            return RolloutResult(
                answer="",
                route=None,
                status="failed",
                error=f"the replay could not run: {type(exc).__name__}: {reason}"[:1_000],
                model_calls=None,
                sandbox_errors=None,
                seconds=time.perf_counter() - started,
            )
        finally:
            with self._lock:
                self.count += 1
                self.host_seconds += time.perf_counter() - started
            if self.on_rollout is not None:
                self.on_rollout()

    async def _run(self, example: OptExample, program: ProgramState) -> RolloutResult:
        snapshot = example.snapshot
        tmp = Path(tempfile.mkdtemp(prefix="fleet-opt-"))
        secrets = self.config.secrets.model_copy(update={"database_url": None})
        config = self.config.model_copy(update={"state_dir": tmp / "state", "secrets": secrets})

        def restore(inputs: TurnInputs) -> TurnInputs:
            return dataclasses.replace(
                inputs,
                memory_summary=snapshot.memory_summary,
                session_history=_history_text(snapshot.session_history),
            )

        cells: list[str] = []

        codes: dict[int, str] = {}

        def on_event(event: TurnEvent) -> None:
            payload = event.payload or {}
            if event.agent_id != "root" or payload.get("phase") != "task":
                return
            if event.kind == "code_cell":
                codes[int(payload.get("cell", 0))] = str(payload.get("code", ""))[:MAX_CELL_CHARS]
            elif event.kind == "cell_output" and len(cells) < MAX_CELLS:
                code = codes.pop(int(payload.get("cell", 0)), "")
                output = payload.get("output") if payload.get("ok") else payload.get("error")
                cells.append(f"{code}\n-> {str(output or '')[:MAX_CELL_CHARS]}")

        started = time.perf_counter()
        try:
            runtime = await self.open_runtime(config, program, restore)
            try:
                session_id = f"opt-{uuid.uuid4().hex[:12]}"
                await runtime.new_session(session_id, mode=snapshot.mode)
                for path in sorted(snapshot.files):
                    if path.startswith(("files/", "artifacts/")):
                        await runtime.write_file(session_id, path, snapshot.file(path))
                context = snapshot.dataset_context
                if context and context.get("path"):
                    await runtime.set_dataset(
                        session_id, str(context["path"]), context.get("description")
                    )
                result = await self._turn(runtime, session_id, snapshot.task, on_event)
            finally:
                await runtime.close(export_grace_seconds=0)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        usage = result.usage
        return RolloutResult(
            answer=result.answer,
            route=result.route,
            status=result.status,
            error=result.error.message if result.error else None,
            model_calls=usage.model_calls,
            sandbox_errors=usage.sandbox_errors,
            seconds=time.perf_counter() - started,
            cells=cells,
            outcome=result.outcome.kind if result.outcome is not None else None,
        )

    async def _turn(
        self,
        runtime: RolloutRuntime,
        session_id: str,
        task: str,
        on_event: Callable[[TurnEvent], None],
    ) -> TurnResult:
        turn = asyncio.ensure_future(
            runtime.run_turn(TurnRequest(session_id=session_id, task=task), on_event=on_event)
        )
        while not turn.done():
            await asyncio.wait({turn}, timeout=0.05)
            if self.cancel.is_set() and not turn.done():
                turn.cancel()
                with contextlib.suppress(BaseException):
                    await turn
                raise OptimizationCancelled("The optimization was cancelled")
        return turn.result()
