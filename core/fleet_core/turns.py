"""The Turn service: claim, prepare inputs, run the engine in a worker thread, commit, events.

``TurnService.run_turn`` is what ``FleetRuntime.run_turn`` delegates to. One running Turn per
Session (a second gets ``TurnBusy``); Turns of different Sessions run in parallel. The DSPy program
runs in a worker thread; events cross to the loop through a thread-safe channel. Cancelling the
awaiting task, ``cancel_turn`` and the deadline all end in the same place: the Turn's
``TurnControl`` interrupts every sandbox cell, the worker unwinds, and the outcome is committed.

Observability: every Turn has one trace (``fleet_core.observability``): started when the Turn is
claimed (so its id is committed with the Turn), fed every event before the lossy channel
(``tee_emit``), with ``prepare_inputs`` / ``capture_replay`` / ``commit`` phases. Its record is
queued inside the Turn's own commit, for completed, failed and cancelled Turns alike, and exported
to MLflow later by ``observability.export.TraceExporter``: tracing never delays a Turn. Events,
error messages, answers and log records are redacted (``Redactor.from_config``) before they
leave. With ``record_replay`` the workspace files are checked against the replay bounds before
the Turn is claimed and the snapshot is stored inside the Turn's commit.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import traceback
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import anyio
import anyio.to_thread
from anyio.from_thread import BlockingPortal

from fleet_core import skills as skill_lib
from fleet_core.config import owner_identity, turn_timeout_problem
from fleet_core.engine.context import (
    SHARED_NOTES_SCAN,
    TurnInputs,
    render_history,
    render_memory_summary,
)
from fleet_core.engine.control import AgentLimits, TurnControl, TurnStopped
from fleet_core.engine.environment import SandboxEnvironment, host_environment
from fleet_core.engine.learning import TurnLearning
from fleet_core.engine.lm import (
    ConfiguredLmProvider,
    LmProvider,
    Role,
    select_models,
    session_models,
)
from fleet_core.engine.repairs import unfilled_tags
from fleet_core.engine.stream import EventChannel
from fleet_core.errors import REPORTED, FleetError, InvalidInput, SessionOwned, TurnBusy
from fleet_core.event_payloads import SandboxEnvironmentIncompletePayload, TurnStartedPayload
from fleet_core.events import TurnEvent
from fleet_core.models import (
    TURN_CANCELLED,
    ArtifactRef,
    DatasetContext,
    Memory,
    ProvenanceRecord,
    TurnError,
    TurnRequest,
    TurnResult,
)
from fleet_core.observability.records import TurnTraceStart, encode_record
from fleet_core.observability.redaction import (
    EVENT_LIMITS,
    Redactor,
    install_log_redaction,
)
from fleet_core.observability.tracing import NoopTurnTrace, TurnTrace, TurnTracer, tee_emit
from fleet_core.optimization.program import DEFAULT_PROGRAM, ActivePrograms, ProgramState
from fleet_core.outcomes import TurnFacts, completed_outcome, failed_outcome
from fleet_core.store import (
    MEMORIES_PER_SESSION,
    MEMORY_CONTENT_CHARS,
    Store,
    TraceExport,
    TurnOutcome,
)
from fleet_core.workspace import Baseline, artifact_uri

if TYPE_CHECKING:
    from fleet_core.blobs.sync import PublishPlan
    from fleet_core.config import EffectiveConfig
    from fleet_core.engine.program import EngineResult
    from fleet_core.workspace import Workspace

TRACEBACK_CHARS = 20_000  # of a failed Turn's traceback, kept for its trace
log = logging.getLogger(__name__)
OnEvent = Callable[[TurnEvent], None]
T = TypeVar("T")
ENV_TOLD_MAX = 4_096  # Sessions remembered as told their environment is incomplete
SELECTED_MODELS_MAX = 16  # providers kept for Sessions' model selections


@dataclass(slots=True)
class _Running:
    turn_id: str
    control: TurnControl
    lms: LmProvider
    trace: TurnTrace | NoopTurnTrace = field(default_factory=NoopTurnTrace)
    replay: tuple[str, bytes] | None = None
    lost: str | None = None  # why this process lost the Session's ownership mid-Turn
    learning: TurnLearning | None = None  # workspace.remember and save_skill of this Turn
    program: ProgramState = DEFAULT_PROGRAM  # the served program, fixed when the Turn starts


def host_environment_line() -> str:
    """The local sandbox runs the project's interpreter; describe it for the model."""
    return host_environment().line()


class SessionGate(Protocol):
    """What the Turn service needs of Sessions (``FleetRuntime`` provides it)."""

    async def effective_config(self, session_id: str) -> EffectiveConfig: ...

    async def own_session(self, session_id: str) -> None: ...

    async def check_dataset(self, session_id: str) -> DatasetContext | None: ...

    async def manifest(self, session_id: str) -> str: ...

    def workspace(self, session_id: str) -> Workspace: ...

    def content_plan(self, session_id: str) -> PublishPlan | None: ...

    def content_published(self, plan: PublishPlan, version: int | None) -> None: ...


async def in_thread(func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """The default thread runner: blocking work off the event loop."""
    return await anyio.to_thread.run_sync(partial(func, *args, **kwargs))


ThreadRunner = Callable[..., Coroutine[Any, Any, Any]]


@dataclass(frozen=True, slots=True)
class RunningTurn:
    """A Turn running in this process (``TurnService.running``)."""

    session_id: str
    turn_id: str | None


class TurnService:
    """Runs Turns; built by ``FleetRuntime`` from explicit collaborators."""

    def __init__(
        self,
        *,
        store: Store,
        sessions: SessionGate,
        config: EffectiveConfig,
        tracer: Callable[[], TurnTracer],
        lm_provider: LmProvider | None = None,
        run: ThreadRunner = in_thread,
        on_trace_queued: Callable[[str], Awaitable[None]] | None = None,
        programs: Callable[[str], ProgramState] | None = None,
        restore_inputs: Callable[[TurnInputs], TurnInputs] | None = None,
    ) -> None:
        self.store = store
        self.sessions = sessions
        self.config = config
        self.lms: LmProvider = lm_provider or ConfiguredLmProvider.from_config(config)
        self._tracer_factory = tracer
        self._run = run
        self._on_trace_queued = on_trace_queued
        # the Session's served program (reloaded when its active file changes) and, for an
        # optimization rollout's disposable runtime, the inputs restored from a replay snapshot
        self._programs = programs or ActivePrograms(config.state_dir).get
        self._restore_inputs = restore_inputs
        self.redactor = Redactor.from_config(config)
        self._running: dict[str, _Running] = {}
        self._by_turn: dict[str, _Running] = {}
        self._env: SandboxEnvironment | None = None
        self._env_told: OrderedDict[str, None] = OrderedDict()  # bounded: ENV_TOLD_MAX
        # providers with a Session's model selection applied, by selection (bounded)
        self._selected: OrderedDict[tuple[tuple[Role, str], ...], LmProvider] = OrderedDict()

    def reconfigure(self, config: EffectiveConfig, lms: LmProvider | None = None) -> None:
        """New settings (and models) for the Turns that start from now on; a running Turn keeps
        the configuration and models it started with."""
        self.config = config
        self.redactor = Redactor.from_config(config)
        if lms is not None:
            self.lms = lms
        self._selected.clear()

    def _models_for(self, config: EffectiveConfig) -> LmProvider:
        """The Turn's models: the service's, with the Session's model selection (the
        ``llm.<role>.model`` values whose source is ``session``) applied."""
        selected = tuple(sorted(session_models(config).items()))
        if not selected:
            return self.lms
        found = self._selected.get(selected)
        if found is None:
            found = self._selected[selected] = select_models(self.lms, dict(selected))
            while len(self._selected) > SELECTED_MODELS_MAX:
                self._selected.popitem(last=False)
        self._selected.move_to_end(selected)
        return found

    @property
    def tracer(self) -> TurnTracer:
        """The runtime's tracer (created on first use; it never imports mlflow)."""
        return self._tracer_factory()

    def running(self, session_id: str | None = None) -> list[RunningTurn]:
        """The Turns running in this process (of one Session, or all)."""
        return [
            RunningTurn(session_id=sid, turn_id=r.turn_id or None)
            for sid, r in self._running.items()
            if session_id is None or sid == session_id
        ]

    def busy(self, session_id: str) -> TurnBusy | None:
        """The one TurnBusy error for a Session with a running Turn (``None`` when idle)."""
        running = self._running.get(session_id)
        if running is None:
            return None
        return TurnBusy.running(session_id, running.turn_id or None)

    def _redact_payload(self, payload: dict[str, Any]) -> dict[str, Any]:
        redacted: dict[str, Any] = self.redactor.value(payload, EVENT_LIMITS)
        return redacted

    # --- public ------------------------------------------------------------------------------

    async def cancel_turn(self, turn_id: str) -> bool:
        running = self._by_turn.get(turn_id)
        if running is None:
            return False
        running.control.cancel("The Turn was cancelled on request")
        return True

    def ownership_lost(self, session_id: str, message: str) -> bool:
        """Any thread (the store's lease monitor): this process lost the Session, so its
        running Turn stops and ends failed with ``SessionOwned`` (its commit is refused)."""
        running = self._running.get(session_id)
        if running is None:
            return False
        running.lost = message
        running.control.cancel(message)
        return True

    async def run_turn(
        self, request: TurnRequest, *, on_event: OnEvent | None = None
    ) -> TurnResult:
        session_id = request.session_id
        config = await self.sessions.effective_config(session_id)
        settings = config.settings.runtime
        timeout = settings.turn_timeout_seconds
        if request.timeout_seconds is not None:
            timeout = request.timeout_seconds
            if (problem := turn_timeout_problem(timeout)) is not None:  # the one rule (config)
                raise InvalidInput(f"timeoutSeconds must be {problem}; got {timeout}")
        mode = request.mode or settings.execution_mode
        busy = self.busy(session_id)
        if busy is not None:
            raise busy
        control = TurnControl(
            max_units=settings.max_llm_calls_per_turn,
            timeout_seconds=float(timeout) if timeout else None,
            limits=AgentLimits(
                max_depth=settings.max_agent_depth,
                max_children=settings.max_child_sandboxes,
                max_live_children=settings.max_active_children,
            ),
        )
        lms = self._models_for(config)  # the Session's selection applied
        reservation = _Running(turn_id="", control=control, lms=lms)  # models fixed here
        self._running[session_id] = reservation  # reserve before the first await below
        try:
            install_log_redaction(self.redactor)
            reservation.lms.check("root", "sub")
            await self.sessions.own_session(session_id)
            reservation.program = await self._run(self._programs, session_id)
            if request.record_replay:  # bounds and secrets: refused before anything is claimed
                await self._run(self._check_replay, session_id)
            claim = await self._run(
                # stored (history, replays of the key) with configured secrets redacted
                self.store.claim_turn,
                session_id,
                self.redactor.text(request.task, None),
                request.idempotency_key,
            )
            if claim.replayed is not None:
                return self._replayed(claim.replayed, session_id, claim.turn_id, on_event)
            reservation.turn_id = claim.turn_id
            self._by_turn[claim.turn_id] = reservation
            channel = EventChannel(claim.turn_id, session_id, redact=self._redact_payload)
            channel.bind(asyncio.get_running_loop())
            reservation.trace = self._start_trace(
                request, claim.turn_id, mode, config, timeout, reservation.program.digest()
            )
            control.emit = tee_emit(channel.emit, reservation.trace)
            return await self._run_claimed(
                request, mode, claim.turn_id, reservation, channel, on_event, config, timeout
            )
        finally:
            self._running.pop(session_id, None)
            self._by_turn.pop(reservation.turn_id, None)

    def _start_trace(
        self,
        request: TurnRequest,
        turn_id: str,
        mode: str,
        config: EffectiveConfig,
        timeout: int,
        program_digest: str,
    ) -> TurnTrace | NoopTurnTrace:
        try:
            return self.tracer.start(
                TurnTraceStart(
                    turn_id=turn_id,
                    session_id=request.session_id,
                    task=request.task,
                    mode=mode,
                    configuration_digest=config.digest(),
                    compiled_program_digest=program_digest,
                    idempotency_key=request.idempotency_key,
                    record_replay=request.record_replay,
                    model_settings=config.settings.llm.model_dump(mode="json"),
                    turn_timeout_seconds=timeout,
                )
            )
        except Exception as exc:  # tracing never stops a Turn
            log.warning(
                "the trace of Turn %s was not started: %s", turn_id, self.redactor.error(exc)
            )
            return NoopTurnTrace()

    # --- replays -----------------------------------------------------------------------------

    def _check_replay(self, session_id: str) -> None:
        """Worker thread: the replay bounds and secret checks over the workspace as it is now."""
        from fleet_core.observability.replay import check_replay_files, collect_workspace_files

        files = collect_workspace_files(self.sessions.workspace(session_id))
        check_replay_files(files, redactor=self.redactor)

    def _capture_replay(
        self,
        request: TurnRequest,
        turn_id: str,
        inputs: TurnInputs,
        config: EffectiveConfig,
        timeout: int,
    ) -> tuple[str, bytes]:
        """Worker thread: the immutable snapshot of the prepared inputs (before the program)."""
        from fleet_core.observability.replay import (
            capture_replay,
            collect_workspace_files,
            encode_replay,
        )

        files = collect_workspace_files(self.sessions.workspace(request.session_id))
        snapshot = capture_replay(
            turn_id=turn_id,
            session_id=request.session_id,
            task=request.task,
            mode=inputs.mode,
            workspace_manifest=inputs.workspace_manifest,
            files=files,
            configuration=config,
            memory_summary=inputs.memory_summary,
            session_history=inputs.session_history,
            skills_catalog=inputs.skills_catalog,
            dataset_context=inputs.dataset.wire() if inputs.dataset else None,
            turn_timeout_seconds=timeout,
            redactor=self.redactor,
        )
        return encode_replay(snapshot)

    # --- one claimed Turn --------------------------------------------------------------------

    async def _run_claimed(
        self,
        request: TurnRequest,
        mode: str,
        turn_id: str,
        running: _Running,
        channel: EventChannel,
        on_event: OnEvent | None,
        config: EffectiveConfig,
        timeout: int,
    ) -> TurnResult:
        session_id = request.session_id
        control, trace = running.control, running.trace
        control.emit("turn_started", TurnStartedPayload(task=request.task[:2000], mode=mode))
        box: dict[str, Any] = {}
        finished = anyio.Event()
        cancelled = anyio.get_cancelled_exc_class()
        before = Baseline("artifacts")  # filled before the program runs
        loop = asyncio.get_running_loop()
        try:
            async with BlockingPortal() as portal, anyio.create_task_group() as tg:
                tg.start_soon(channel.pump, on_event)

                async def work() -> None:
                    with anyio.CancelScope(shield=True):
                        try:
                            with trace.phase("prepare_inputs"):
                                dataset = await self.sessions.check_dataset(session_id)
                                await self._mark_artifacts(session_id, before)
                                inputs = await self._prepare(request, mode, dataset, config)
                                self._report_environment(session_id, control)
                            trace.annotate(
                                dataset=dataset.path if dataset else None,
                                skills=[s.name for s in inputs.skills],
                            )
                            if request.record_replay:
                                with trace.phase("capture_replay"):
                                    running.replay = await self._run(
                                        self._capture_replay,
                                        request,
                                        turn_id,
                                        inputs,
                                        config,
                                        timeout,
                                    )
                                trace.annotate(replay_sha256=running.replay[0])
                            box["result"] = await anyio.to_thread.run_sync(
                                partial(
                                    self._run_engine,
                                    request,
                                    turn_id,
                                    running,
                                    inputs,
                                    portal,
                                    loop,
                                    config,
                                )
                            )
                        except BaseException as exc:
                            box["error"] = exc
                        finally:
                            finished.set()

                tg.start_soon(work)
                try:
                    remaining = control.remaining_seconds()
                    with anyio.move_on_after(remaining if remaining is not None else float("inf")):
                        await finished.wait()
                    if not finished.is_set():
                        control.expire()
                        await finished.wait()
                except cancelled:
                    control.cancel("The Turn was cancelled by the client")
                    raise
                finally:
                    tg.cancel_scope.cancel()  # stop the pump; the shielded worker still finishes
        except cancelled:
            with anyio.CancelScope(shield=True):
                await self._commit(request, turn_id, running, channel, on_event, box, before)
            raise
        return await self._commit(request, turn_id, running, channel, on_event, box, before)

    def _run_engine(
        self,
        request: TurnRequest,
        turn_id: str,
        running: _Running,
        inputs: TurnInputs,
        portal: BlockingPortal,
        loop: asyncio.AbstractEventLoop,
        config: EffectiveConfig,
    ) -> EngineResult:
        """The worker thread: build the program and run it (its events feed the trace)."""
        from fleet_core.engine.jev import jev_client
        from fleet_core.engine.profile import resolve_profile
        from fleet_core.engine.program import TurnProgram
        from fleet_core.engine.spaces import SandboxAgentSpace, SandboxRuntime

        control = running.control
        session_id = request.session_id
        settings = config.settings
        children_dir = config.state_dir / "agents" / session_id / turn_id
        sandboxes = SandboxRuntime(
            settings=settings.sandbox,
            control=control,
            portal=portal,
            loop=loop,
            session_id=session_id,
            turn_id=turn_id,
            children_dir=children_dir,
        )
        root = SandboxAgentSpace(sandboxes, self.sessions.workspace(session_id))
        running.learning = TurnLearning(
            control=control,
            workspace=self.sessions.workspace(session_id),
            turn_id=turn_id,
            known_skills=[s for s in inputs.skills if s.source != "session"],
            memory_count=self.store.memory_count(session_id),
            memories_per_session=MEMORIES_PER_SESSION,
            memory_chars=MEMORY_CONTENT_CHARS,
        )
        embedded_root = running.lms.uses_embedded("root")
        program = TurnProgram(
            profile=resolve_profile(
                settings.engine,
                embedded_root=embedded_root,
                context_tokens=settings.local_model.n_ctx if embedded_root else None,
            ),
            lms=running.lms,
            control=control,
            root_space=root,
            max_iters=settings.runtime.max_rlm_iterations,
            child_max_iters=settings.runtime.child_max_iters,
            child_max_llm_calls=settings.runtime.child_max_llm_calls,
            jev=jev_client(config),
            overrides=running.program.components,
            learning=running.learning,
        )
        try:
            return program.run(inputs)
        finally:
            root.close()
            shutil.rmtree(children_dir, ignore_errors=True)

    # --- inputs ------------------------------------------------------------------------------

    async def _prepare(
        self,
        request: TurnRequest,
        mode: str,
        dataset: DatasetContext | None,
        config: EffectiveConfig,
    ) -> TurnInputs:
        session_id = request.session_id
        settings = config.settings
        workspace = self.sessions.workspace(session_id)
        user_dir = Path(settings.storage.skills_dir)
        if not user_dir.is_absolute():
            user_dir = config.state_dir.parent / user_dir
        found = await self._run(skill_lib.discover, user_dir)
        await self._run(skill_lib.sync, workspace, found)
        saved = await self._run(skill_lib.discover_session, workspace, found)
        found = sorted(found + saved, key=lambda s: s.name)
        manifest = await self.sessions.manifest(session_id)
        history = await self._run(
            self.store.history, session_id, settings.runtime.history_turns, completed_only=True
        )
        memories = await self._run(self.store.memories, session_id, reviewed=True)
        shared: list[Memory] = []  # shared learned notes: opt-in (memory.shared_notes)
        if settings.memory.shared_notes:
            shared = await self._run(
                self.store.shared_learned_notes, session_id, limit=SHARED_NOTES_SCAN
            )
        if self._env is None:
            self._env = await self._run(host_environment)
        env_line = self._env.line()
        inputs = TurnInputs(
            task=request.task,
            mode=mode,
            workspace_manifest=manifest,
            skills_catalog=skill_lib.catalog(found),
            memory_summary=render_memory_summary(
                memories,
                request.task,
                env_line,
                shared,
                shared_max=settings.memory.shared_notes_max,
                shared_chars=settings.memory.shared_notes_chars,
            ),
            session_history=render_history(
                history,
                max_turns=settings.runtime.history_turns,
                max_chars=settings.runtime.history_chars,
            ),
            dataset=dataset,
            skills=tuple(found),
        )
        return self._restore_inputs(inputs) if self._restore_inputs is not None else inputs

    def _report_environment(self, session_id: str, control: TurnControl) -> None:
        """One ``sandbox_environment_incomplete`` per Session (and process) when packages of
        the environment line are missing; the Sessions told are remembered, bounded."""
        env = self._env
        if env is None or not env.missing:
            return
        if session_id in self._env_told:
            self._env_told.move_to_end(session_id)
            return
        self._env_told[session_id] = None
        while len(self._env_told) > ENV_TOLD_MAX:
            self._env_told.popitem(last=False)
        payload = SandboxEnvironmentIncompletePayload(missing=env.missing, python=env.python)
        control.emit("sandbox_environment_incomplete", payload)

    async def _mark_artifacts(self, session_id: str, before: Baseline) -> None:
        """What the artifacts are before the Turn (nothing is read or hashed; with a change
        tree, not even visited)."""
        await self._run(self.sessions.workspace(session_id).mark, before)

    # --- outcome -----------------------------------------------------------------------------

    async def _commit(
        self,
        request: TurnRequest,
        turn_id: str,
        running: _Running,
        channel: EventChannel,
        on_event: OnEvent | None,
        box: dict[str, Any],
        before: Baseline,
    ) -> TurnResult:
        trace = running.trace
        with trace.phase("commit"):  # preparing the outcome; its transaction follows the trace
            result, outcome, kind = await self._outcome(request, turn_id, running, box, before)
        export = await self._run(self._trace_export, trace, result)
        # the workspace's changes (artifacts, memory, Skills) are published in the same commit
        plan = await self._run(self.sessions.content_plan, request.session_id)
        content = None if plan is None or plan.delta.empty else plan.delta
        try:
            version = await self._run(
                self.store.finish_turn,
                turn_id,
                replace(outcome, trace_export=export, content=content),
            )
            if plan is not None:
                self.sessions.content_published(plan, version)
        except SessionOwned as exc:  # ownership lost: nothing of this Turn was committed
            export, kind = None, "turn_failed"
            result = result.model_copy(
                update={"status": "failed", "answer": "", "error": _lost(exc.message)}
            )
        if export is not None and self._on_trace_queued is not None:
            await self._on_trace_queued(export.trace_id)
        channel.emit(kind, result)  # durationSeconds included
        channel.close()
        channel.flush(on_event)
        return result

    async def _outcome(
        self,
        request: TurnRequest,
        turn_id: str,
        running: _Running,
        box: dict[str, Any],
        before: Baseline,
    ) -> tuple[TurnResult, TurnOutcome, str]:
        """The Turn's result, what its commit writes, and its terminal event kind."""
        session_id = request.session_id
        control, trace_id = running.control, running.trace.trace_id
        redact = self.redactor.text
        usage = control.usage()
        duration = round(control.elapsed(), 3)
        error = box.get("error")
        if error is None and "result" not in box:
            error = control.error() if control.terminal else RuntimeError("The Turn did not finish")
        if error is None:
            engine = box["result"]
            artifacts, omitted = await self._changed_artifacts(
                session_id, turn_id, before, engine.artifacts
            )
            answer = redact(engine.answer, None)
            facts = TurnFacts(
                reached=engine.reached,
                answer=answer,
                sandbox_errors=usage.sandbox_errors,
                children_failed=engine.children_failed,
                detail=redact(engine.reached_detail, 300),
                unfilled=tuple(unfilled_tags(request.task, answer)),
            )
            result = TurnResult(
                turn_id=turn_id,
                session_id=session_id,
                status="completed",
                answer=answer,
                route=engine.route,
                learned_note=redact(engine.learned_note, None) or None,
                artifacts=artifacts,
                artifacts_omitted=omitted,
                trace_id=trace_id,
                usage=usage,
                duration_seconds=duration,
                compiled_program_digest=running.program.digest(),
                outcome=completed_outcome(facts),
            )
            outcome = TurnOutcome(
                status="completed",
                result=result.wire(),
                answer=result.answer,
                route=result.route,
                learned_note=result.learned_note,
                trace_id=trace_id,
                artifacts=list(engine.artifacts),
                replay=running.replay,
                memories=self._proposed_memories(running),
            )
            return result, outcome, "turn_completed"
        status, turn_error = self._classify(error, control)
        if running.lost is not None:
            status, turn_error = "failed", _lost(running.lost)
        result = TurnResult(
            turn_id=turn_id,
            session_id=session_id,
            status=status,
            trace_id=trace_id,
            usage=usage,
            error=turn_error,
            duration_seconds=duration,
            compiled_program_digest=running.program.digest(),
            outcome=failed_outcome(turn_error, sandbox_errors=usage.sandbox_errors),
        )
        outcome = TurnOutcome(
            status=status,
            result=result.wire(),
            trace_id=trace_id,
            error=turn_error,
            replay=running.replay,
            memories=self._proposed_memories(running),
        )
        if not isinstance(error, FleetError | Exception):
            log.debug("Turn %s ended by %r", turn_id, error)
        return result, outcome, "turn_cancelled" if status == "cancelled" else "turn_failed"

    def _proposed_memories(self, running: _Running) -> list[Memory]:
        """The memories the Turn's code proposed, redacted like its learned note; committed
        with the outcome whatever its status (they stay unreviewed until a person decides)."""
        if running.learning is None:
            return []
        redact = self.redactor.text
        return [
            m.model_copy(update={"content": redact(m.content, None)})
            for m in running.learning.memories
        ]

    def _trace_export(
        self, trace: TurnTrace | NoopTurnTrace, result: TurnResult
    ) -> TraceExport | None:
        """Worker thread: the finished trace, encoded for the durable export queue."""
        record = trace.finish(result)  # never raises
        if record is None:
            return None
        return TraceExport(
            trace_id=record.trace_id,
            scope=self.tracer.scope,
            record=encode_record(record),
            origin_host=owner_identity(self.config)[0],
        )

    def _classify(self, error: BaseException, control: TurnControl) -> tuple[Any, TurnError]:
        if control.terminal is not None and not isinstance(error, TurnStopped):
            error = control.error()
        redact = self.redactor.text
        if isinstance(error, TurnStopped):
            return error.status, TurnError(kind=error.kind, message=redact(error.message))
        if isinstance(error, anyio.get_cancelled_exc_class()):
            return "cancelled", TurnError(kind=TURN_CANCELLED, message="The Turn was cancelled")
        if isinstance(error, FleetError):
            return "failed", TurnError(kind=error.kind, message=redact(error.message))
        message = redact(f"{type(error).__name__}: {error}", 1000)
        # One line for the log; the traceback only at DEBUG and in the trace (never the wire).
        log.warning("Turn failed: %s", message.splitlines()[0], extra={REPORTED: True})
        log.debug("Turn failed", exc_info=error)
        stack = redact("".join(traceback.format_exception(error)), TRACEBACK_CHARS)
        return "failed", TurnError(
            kind="EngineError", message=f"The Turn failed: {message}", traceback=stack
        )

    async def _changed_artifacts(
        self,
        session_id: str,
        turn_id: str,
        before: Baseline,
        promoted: list[ProvenanceRecord],
    ) -> tuple[list[ArtifactRef], int]:
        """New or changed artifacts: unchanged files are not read, and at most
        ``storage.max_turn_artifacts`` are hashed and listed (the rest stay in the workspace);
        returns them and how many were left out."""
        limit = self.config.settings.storage.max_turn_artifacts
        workspace = self.sessions.workspace(session_id)
        changed, total = await self._run(workspace.changed_after, before, limit=limit)
        if total > len(changed):
            log.warning(
                "Turn %s changed %d artifacts; its result lists the first %d "
                "(storage.max_turn_artifacts); the others are in the workspace",
                turn_id,
                total,
                len(changed),
            )
        by_path = {r.path: r for r in promoted}
        refs = []
        for info in changed:
            record = by_path.get(info.path)
            refs.append(
                ArtifactRef(
                    uri=artifact_uri(session_id, info.path),
                    path=info.path,
                    size_bytes=info.size_bytes,
                    sha256=info.sha256,
                    turn_id=turn_id,
                    agent_id=record.agent_id if record else "root",
                    provenance=[record] if record else None,
                )
            )
        return refs, total - len(changed)

    def _replayed(
        self, stored: dict[str, Any], session_id: str, turn_id: str, on_event: OnEvent | None
    ) -> TurnResult:
        result = TurnResult.model_validate(stored).model_copy(update={"replayed": True})
        channel = EventChannel(turn_id, session_id)
        channel.emit("turn_completed", result)
        channel.flush(on_event)
        return result


def _lost(message: str) -> TurnError:
    return TurnError(kind=SessionOwned.kind, message=message)
