"""Helpers the engine tests share: a Turn run with its events collected."""

from __future__ import annotations

from typing import Any, Literal

from fleet_core.events import TurnEvent
from fleet_core.models import TurnRequest, TurnResult
from fleet_core.runtime import FleetRuntime


async def run_turn(
    runtime: FleetRuntime,
    session: str,
    task: str,
    mode: Literal["hybrid", "rlm", "flex"] | None = None,
) -> tuple[TurnResult, list[TurnEvent]]:
    """One Turn through the facade; its result and every event it emitted, in order."""
    events: list[TurnEvent] = []
    request = TurnRequest(session_id=session, task=task, mode=mode)
    result = await runtime.run_turn(request, on_event=events.append)
    return result, events


def payloads(events: list[TurnEvent], kind: str) -> list[Any]:
    """The typed payloads (``TurnEvent.data``: the kind's model) of the events of one kind."""
    found = [e.data for e in events if e.kind == kind]
    assert all(data is not None for data in found), f"a {kind} payload does not parse"
    return found
