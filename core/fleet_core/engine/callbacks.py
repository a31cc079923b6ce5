"""DSPy callbacks that turn module and tool activity into TurnEvents (outputs never included)."""

from __future__ import annotations

import time
from typing import Any

from dspy.utils.callback import BaseCallback

from fleet_core.engine.control import Lineage, TurnControl
from fleet_core.engine.stream import clip
from fleet_core.event_payloads import (
    EventPayload,
    ModuleEndPayload,
    ModuleStartPayload,
    ToolCallEndPayload,
    ToolCallStartPayload,
)


class EventCallback(BaseCallback):  # type: ignore[misc]
    """Emits module and tool start/end events for one agent."""

    def __init__(self, control: TurnControl, agent_id: str, parent_agent_id: str | None) -> None:
        self._control = control
        self._lineage = Lineage(agent_id=agent_id, parent_agent_id=parent_agent_id)
        self._started: dict[str, tuple[float, str]] = {}

    def _emit(self, kind: str, payload: EventPayload) -> None:
        self._control.emit(kind, payload, **self._lineage)

    def on_module_start(self, call_id: str, instance: Any, inputs: dict[str, Any]) -> None:
        module = type(instance).__name__
        self._started[call_id] = (time.perf_counter(), module)
        iteration = (inputs.get("kwargs") or {}).get("iteration")
        if isinstance(iteration, str):
            payload = ModuleStartPayload(call_id=call_id, module=module, iteration=iteration)
        else:
            payload = ModuleStartPayload(call_id=call_id, module=module)
        self._emit("module_start", payload)

    def on_module_end(
        self, call_id: str, outputs: Any | None, exception: Exception | None = None
    ) -> None:
        started, module = self._started.pop(call_id, (time.perf_counter(), "?"))
        self._emit(
            "module_end",
            ModuleEndPayload(
                call_id=call_id,
                module=module,
                duration_ms=round((time.perf_counter() - started) * 1000, 2),
                ok=exception is None,
                error_type=type(exception).__name__ if exception else None,
            ),
        )

    def on_tool_start(self, call_id: str, instance: Any, inputs: dict[str, Any]) -> None:
        name = str(getattr(instance, "name", type(instance).__name__))[:100]
        self._started[call_id] = (time.perf_counter(), name)
        self._emit(
            "tool_call_start",
            ToolCallStartPayload(
                call_id=call_id, tool=name, source="dspy", inputs=clip(inputs, 500)
            ),
        )

    def on_tool_end(
        self, call_id: str, outputs: Any | None, exception: Exception | None = None
    ) -> None:
        started, name = self._started.pop(call_id, (time.perf_counter(), "?"))
        self._emit(
            "tool_call_end",
            ToolCallEndPayload(
                call_id=call_id,
                tool=name,
                source="dspy",
                duration_ms=round((time.perf_counter() - started) * 1000, 2),
                ok=exception is None,
                error_type=type(exception).__name__ if exception else None,
                output=clip(outputs, 500) if exception is None else None,
            ),
        )
