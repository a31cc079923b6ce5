"""The Turn tracer: one trace per Turn, buffered while it runs, exported after its commit.

The Turn service plugs a tracer in with a few lines (see docs/observability.md)::

    trace = tracer.start(TurnTraceStart(turn_id=..., session_id=..., task=..., mode=...,
                                        configuration_digest=config.digest()))
    with trace.phase("prepare_inputs"):
        ...                                   # manifest, history, memory, skills
    control.emit = tee_emit(channel.emit, trace)  # or trace.on_event(event) for every event
    ...                                        # triage and execution emit TurnEvents
    record = trace.finish(result)              # the redacted TraceRecord (pure Python, fast)
    store.finish_turn(turn_id, outcome)        # outcome carries the encoded record: the trace
                                               # is queued inside the Turn's own transaction
    exporter.notify()                          # export.py writes it to MLflow later

The trace id is known from ``start`` on, so it can be committed with the Turn. Nothing here
imports mlflow: ``export(record)`` (called by the exporter, off the Turn's path) and
``load_trace`` go through ``MlflowBackend``, which imports it on first use. MLflow's
process-global tracer provider, tracking URI and active experiment are never used, so Sessions
(or a runtime and an evaluation run) in one process cannot leak traces into each other's
destination. ``finish`` never raises: a tracing failure is logged (redacted) and ``None`` is
returned. Module rooms: ``records.py`` (the data), ``spans.py`` (events → spans), this module
(the tracer), ``export.py`` (the durable queue's worker), ``mlflow_backend.py`` (MLflow I/O).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, Protocol

from fleet_core.events import ROOT_AGENT, TurnEvent
from fleet_core.models import TurnResult
from fleet_core.observability.records import TraceRecord, TurnTraceStart
from fleet_core.observability.redaction import NO_SECRETS, Redactor
from fleet_core.observability.spans import TraceBuilder

if TYPE_CHECKING:
    from fleet_core.config import EffectiveConfig
    from fleet_core.observability.destination import MlflowDestination, Scope
    from fleet_core.observability.mlflow_backend import MlflowBackend
    from fleet_core.observability.traceview import TraceView

log = logging.getLogger(__name__)


class TurnTrace(Protocol):
    """The trace of one Turn in progress."""

    @property
    def trace_id(self) -> str | None: ...

    def on_event(self, event: TurnEvent) -> None:
        """Record one TurnEvent (any thread; never raises)."""

    def record(
        self,
        kind: str,
        payload: dict[str, Any] | None = None,
        *,
        agent_id: str = ROOT_AGENT,
        parent_agent_id: str | None = None,
    ) -> None:
        """Record an event given as ``TurnControl.emit`` arguments (any thread; never raises)."""

    def phase(self, name: str, **attributes: Any) -> AbstractContextManager[None]:
        """A host-side step (``prepare_inputs``, ``capture_replay``, ``commit``) as a span."""

    def annotate(self, **attributes: Any) -> None:
        """Add attributes to the root span (e.g. ``replay_sha256``, ``compiled_program_digest``)."""

    def finish(self, result: TurnResult) -> TraceRecord | None:
        """Close every span; the redacted record to export, or ``None`` (off, or it failed)."""


class TurnTracer(Protocol):
    """Creates one ``TurnTrace`` per Turn and writes finished records to its destination."""

    @property
    def enabled(self) -> bool: ...

    @property
    def scope(self) -> Scope: ...

    def start(self, start: TurnTraceStart) -> TurnTrace: ...

    def export(self, record: TraceRecord, scope: Scope | None = None) -> None:
        """Write a finished record (idempotent: the same record twice is one trace)."""

    def load_trace(self, trace_id: str) -> TraceView:
        """Read a stored trace back (raises ``TraceNotFound`` / ``TracingUnavailable``)."""

    def close(self) -> None: ...


class NoopTurnTrace:
    """The trace of a Turn when tracing is off: records nothing, has no id."""

    trace_id: str | None = None

    def on_event(self, event: TurnEvent) -> None:
        return None

    def record(self, kind: str, payload: dict[str, Any] | None = None, **lineage: Any) -> None:
        return None

    @contextmanager
    def phase(self, name: str, **attributes: Any) -> Iterator[None]:
        yield

    def annotate(self, **attributes: Any) -> None:
        return None

    def finish(self, result: TurnResult) -> TraceRecord | None:
        return None


class NoopTracer:
    """The tracer when ``[mlflow] destination = "off"`` (or when the destination is invalid:
    ``reason`` then says why, and reading a trace reports it)."""

    enabled = False
    scope: Scope = "runtime"

    def __init__(self, reason: str = 'Tracing is off ([mlflow] destination = "off")') -> None:
        self.reason = reason

    def start(self, start: TurnTraceStart) -> NoopTurnTrace:
        return NoopTurnTrace()

    def export(self, record: TraceRecord, scope: Scope | None = None) -> None:
        from fleet_core.observability.errors import TracingUnavailable

        raise TracingUnavailable(self.reason)

    def load_trace(self, trace_id: str) -> TraceView:
        from fleet_core.observability.errors import TracingUnavailable

        raise TracingUnavailable(self.reason)

    def close(self) -> None:
        return None


class BufferedTurnTrace:
    """A ``TurnTrace`` buffered in memory by a ``TraceBuilder``; ``finish`` hands the record
    back instead of writing it, so the Turn never waits for a tracing backend."""

    def __init__(self, builder: TraceBuilder) -> None:
        self._builder = builder
        self._record: TraceRecord | None = None
        self._done = False

    @property
    def trace_id(self) -> str | None:
        return self._builder.trace_id

    def on_event(self, event: TurnEvent) -> None:
        self._builder.on_event(event)

    def record(
        self,
        kind: str,
        payload: dict[str, Any] | None = None,
        *,
        agent_id: str = ROOT_AGENT,
        parent_agent_id: str | None = None,
    ) -> None:
        self._builder.record(kind, payload, agent_id=agent_id, parent_agent_id=parent_agent_id)

    def phase(self, name: str, **attributes: Any) -> AbstractContextManager[None]:
        return self._builder.phase(name, **attributes)

    def annotate(self, **attributes: Any) -> None:
        self._builder.annotate(**attributes)

    def finish(self, result: TurnResult) -> TraceRecord | None:
        if self._done:
            return self._record
        self._done = True
        try:
            self._record = self._builder.finish(result)
        except Exception as exc:
            log.warning(
                "the trace of Turn %s was not recorded: %s",
                result.turn_id,
                self._builder.redactor.error(exc),
            )
        return self._record


class MlflowTracer:
    """Traces Turns for an MLflow destination; mlflow is imported on the first export or read."""

    enabled = True

    def __init__(
        self,
        destination: MlflowDestination,
        *,
        scope: Scope = "runtime",
        redactor: Redactor = NO_SECRETS,
    ) -> None:
        self.destination = destination
        self.scope: Scope = scope
        self.redactor = redactor
        self._backend: MlflowBackend | None = None

    @property
    def backend(self) -> MlflowBackend:
        """The destination's MLflow I/O (created on first use; creating it imports no mlflow)."""
        if self._backend is None:
            from fleet_core.observability.mlflow_backend import MlflowBackend

            self._backend = MlflowBackend(self.destination, redactor=self.redactor)
        return self._backend

    def start(self, start: TurnTraceStart) -> BufferedTurnTrace:
        return BufferedTurnTrace(TraceBuilder(start, redactor=self.redactor))

    def export(self, record: TraceRecord, scope: Scope | None = None) -> None:
        self.backend.write_trace(record, scope or self.scope)

    def load_trace(self, trace_id: str) -> TraceView:
        return self.backend.load_trace(trace_id)

    def close(self) -> None:
        if self._backend is not None:
            self._backend.close()


def create_tracer(
    config: EffectiveConfig,
    *,
    scope: Scope = "runtime",
    environ: dict[str, str] | None = None,
) -> NoopTracer | MlflowTracer:
    """The tracer the configuration asks for (``off``: a ``NoopTracer``); never imports mlflow."""
    from fleet_core.observability.destination import resolve_destination

    destination = resolve_destination(config, environ=environ)
    if destination.kind == "off":
        return NoopTracer()
    return MlflowTracer(destination, scope=scope, redactor=Redactor.from_config(config))


def configured_tracer(
    config: EffectiveConfig, *, scope: Scope = "runtime"
) -> NoopTracer | MlflowTracer:
    """``create_tracer`` for a runtime: an invalid ``[mlflow]`` destination does not stop Turns;
    it is logged and Turns run untraced (``load_trace`` then reports the configuration error)."""
    from fleet_core.errors import FleetError

    try:
        return create_tracer(config, scope=scope)
    except FleetError as exc:
        log.warning("tracing is disabled: %s", exc.message)
        return NoopTracer(f"Tracing is disabled: {exc.message}")


def load_trace(config: EffectiveConfig, trace_id: str) -> TraceView:
    """Read a stored trace from the configured destination (``TracingUnavailable`` when off)."""
    tracer = create_tracer(config)
    try:
        return tracer.load_trace(trace_id)
    finally:
        tracer.close()


def tee_emit(emit: Callable[..., None], trace: TurnTrace | NoopTurnTrace) -> Callable[..., None]:
    """Wrap ``TurnControl.emit`` so every event also reaches the trace (before the lossy,
    coalescing event channel): ``control.emit = tee_emit(channel.emit, trace)``."""

    def both(
        kind: str,
        payload: dict[str, Any] | None = None,
        *,
        agent_id: str = ROOT_AGENT,
        parent_agent_id: str | None = None,
    ) -> None:
        emit(kind, payload, agent_id=agent_id, parent_agent_id=parent_agent_id)
        trace.record(kind, payload, agent_id=agent_id, parent_agent_id=parent_agent_id)

    return both
