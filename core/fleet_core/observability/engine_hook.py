"""Adapter from this package's tracer to the engine's current hook (``fleet_core.turns.TurnTracer``:
``turn(session_id=, turn_id=, task=)`` context manager + ``callbacks()``).

With only that hook, a trace has its root span, the route and the outcome (failed Turns too),
but not the per-step spans: for those the engine should also feed events with
``control.emit = tee_emit(channel.emit, handle.trace)`` (see docs/observability.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from fleet_core.models import TurnError, TurnResult
from fleet_core.observability.redaction import NO_SECRETS, Redactor
from fleet_core.observability.tracing import (
    MlflowTracer,
    NoopTracer,
    NoopTurnTrace,
    TurnTrace,
    TurnTraceStart,
)


class EngineTraceHandle:
    """What ``turn()`` yields: ``trace_id``, ``set_attribute`` and the underlying ``trace``."""

    def __init__(self, trace: TurnTrace | NoopTurnTrace) -> None:
        self.trace = trace
        self.trace_id: str | None = trace.trace_id
        self.route: str | None = None

    def set_attribute(self, key: str, value: Any) -> None:
        if key == "fleet.routing" and isinstance(value, dict):
            route = value.get("route") or value.get("effective_route")
            if route:
                self.route = str(route)
            if not isinstance(self.trace, NoopTurnTrace) and route:
                self.trace.record(
                    "triage_decision",
                    {
                        "route": route,
                        "reason": value.get("reason"),
                        "fallback": value.get("fallback"),
                    },
                )
        self.trace.annotate(**{key.removeprefix("fleet."): value})


class EngineTracer:
    """Implements the engine's ``TurnTracer`` protocol over a ``MlflowTracer``/``NoopTracer``."""

    def __init__(
        self,
        tracer: MlflowTracer | NoopTracer,
        *,
        mode: str = "hybrid",
        configuration_digest: str = "",
        redactor: Redactor = NO_SECRETS,
    ) -> None:
        self.tracer = tracer
        self.mode = mode
        self.configuration_digest = configuration_digest
        self.redactor = redactor

    @contextmanager
    def turn(self, *, session_id: str, turn_id: str, task: str) -> Iterator[EngineTraceHandle]:
        trace = self.tracer.start(
            TurnTraceStart(
                turn_id=turn_id,
                session_id=session_id,
                task=task,
                mode=self.mode,
                configuration_digest=self.configuration_digest,
            )
        )
        handle = EngineTraceHandle(trace)
        try:
            yield handle
        except BaseException as exc:
            cancelled = "Cancel" in type(exc).__name__
            trace.finish(
                TurnResult(
                    turn_id=turn_id,
                    session_id=session_id,
                    status="cancelled" if cancelled else "failed",
                    route=handle.route,
                    error=TurnError(
                        kind=type(exc).__name__, message=self.redactor.error(exc, 1_000)
                    ),
                )
            )
            raise
        trace.finish(
            TurnResult(
                turn_id=turn_id, session_id=session_id, status="completed", route=handle.route
            )
        )

    def callbacks(self) -> list[Any]:
        return []
