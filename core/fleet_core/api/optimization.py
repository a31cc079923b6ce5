"""``FleetRuntime.optimization``: GEPA over a Session's Turn program, its candidates and their
approval (docs/optimization.md)."""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio.to_thread

from fleet_core.api.host import RuntimeHost
from fleet_core.api.records import (
    CandidateInfo,
    OptimizationProgress,
    OptimizationRun,
    OptimizationStatus,
)
from fleet_core.api.threads import in_thread
from fleet_core.config import EffectiveConfig
from fleet_core.errors import InvalidInput, SessionOwned

if TYPE_CHECKING:
    from fleet_core.endpoints import Role
    from fleet_core.engine.lm import LmProvider


class Optimization:
    """Optimization of the Sessions of one runtime."""

    def __init__(self, runtime: RuntimeHost, open_runtime: Callable[..., Awaitable[Any]]) -> None:
        """``open_runtime``: ``FleetRuntime.open``, for each rollout's disposable runtime."""
        self._runtime = runtime
        self._open_runtime = open_runtime

    async def run(
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
        await self._runtime.describe_session(session_id)
        config = await self._runtime.effective_config(session_id)
        lms = self._runtime.models()
        lms.check("root", "sub", "judge", "reflection")
        loop = asyncio.get_running_loop()

        def progress(item: Any) -> None:
            if on_progress is not None:
                record = OptimizationProgress(
                    item.phase, item.done, item.total, item.best_score, item.message
                )
                loop.call_soon_threadsafe(on_progress, record)

        service = OptimizationService(
            store=self._runtime.store,
            config=config,
            lms=lms,
            validation_lms=CacheFreeModels(lms),
            open_rollout=lambda models: partial(self._open_rollout, models),
            state_dir=self._runtime.config.state_dir,
            recorder=self._recorder(),
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
        published = await self._publish_run(session_id)
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
            notes=list(result.notes) + published,
        )

    async def _publish_run(self, session_id: str) -> list[str]:
        """Publish the run's candidate to the shared store at once, as the Session's owner, so
        every host lists it (``status``) without waiting for the owner's next commit; a note
        when another process owns the Session (it stays on this host until then)."""
        if self._runtime.store.blobs is None:
            return []  # content is not shared: the candidate is where every reader looks
        try:
            await self._runtime.own_session(session_id)
            await self._runtime.sync_session(session_id, publish=True)
        except SessionOwned as exc:
            return [
                f"The candidate was saved on this host but not published: {exc.message}. "
                "It is published with this host's next commit into the Session."
            ]
        return []

    async def status(self, session_id: str) -> OptimizationStatus:
        """The Session's candidates (newest last) with their gate verdicts, and the active
        program's digest (the built-in default's when nothing was approved)."""
        from fleet_core.optimization import candidates as cands

        await self._runtime.describe_session(session_id)
        await self._runtime.sync_session(session_id)  # candidates made on another host
        state_dir = self._runtime.config.state_dir
        manifests = await in_thread(cands.list_candidates, state_dir, session_id)
        active = await in_thread(cands.active_digest, state_dir, session_id)
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

    async def approve(self, session_id: str, version: str) -> CandidateInfo:
        """Re-check the gate, the candidate's bytes and the recorded incumbent, configuration,
        code and dependency identities, then write the active program atomically; the next Turn
        serves it. Stale evidence is refused with "reevaluate" (``InvalidInput``)."""
        from fleet_core.optimization import candidates as cands
        from fleet_core.optimization.service import identity

        await self._runtime.own_session(session_id)
        config = await self._runtime.effective_config(session_id)
        state_dir = self._runtime.config.state_dir
        current = await in_thread(identity, state_dir, session_id, config)
        m = await in_thread(cands.approve, state_dir, session_id, version, current)
        await self._runtime.sync_session(session_id, publish=True)  # served on every host
        return CandidateInfo.of(m, active=True)

    async def report(self, session_id: str, version: str) -> str:
        """A candidate's markdown report."""
        from fleet_core.optimization import candidates as cands

        await self._runtime.describe_session(session_id)
        return await in_thread(
            cands.read_report, self._runtime.config.state_dir, session_id, version
        )

    async def _open_rollout(
        self, models: LmProvider, config: EffectiveConfig, program: Any, restore: Any
    ) -> Any:
        """A disposable runtime for one rollout (see fleet_core.optimization.rollout)."""
        from fleet_core.observability.tracing import NoopTracer

        return await self._open_runtime(
            config,
            lm_provider=models,
            tracer=NoopTracer("optimization rollouts are not traced"),
            trace_export="deferred",
            program=program,
            restore_inputs=restore,
        )

    def _recorder(self) -> Any:
        """The MLflow run writer when tracing records to MLflow, else None."""
        if not self._runtime.traces.status().enabled:
            return None
        from fleet_core.observability.optimization import record_optimization_run

        tracer: Any = self._runtime.tracer
        return partial(record_optimization_run, tracer.backend)


class CacheFreeModels:
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
