"""Typed, versioned events a Turn emits; front ends turn them into progress and documents."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import Field

from fleet_core.models import Record

EVENT_VERSION = 1
EventKind = Literal[
    "turn_started",
    "triage_decision",
    "module_start",
    "module_end",
    "lm_start",
    "lm_end",
    "code_cell",
    "cell_output",
    "tool_call_start",
    "tool_call_end",
    "child_spawned",
    "child_finished",
    "artifact",
    "budget_update",
    "status",
    "turn_completed",
    "turn_failed",
    "turn_cancelled",
]
ROOT_AGENT = "root"


class TurnEvent(Record):
    version: int = EVENT_VERSION
    turn_id: str
    session_id: str
    seq: int
    agent_id: str = ROOT_AGENT
    parent_agent_id: str | None = None
    kind: EventKind
    payload: dict[str, Any] = Field(default_factory=dict)
    at: datetime = Field(default_factory=lambda: datetime.now(UTC))
