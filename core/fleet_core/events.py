"""Typed, versioned events a Turn emits; front ends turn them into progress and documents.

Emitters build their kind's payload model (``fleet_core.event_payloads``) and the event channel
(``engine/stream.py``) serializes it once: ``TurnEvent.payload`` is that wire form (redacted and
bounded), and ``TurnEvent.data`` is the same payload parsed back into its kind's model, which is
what consumers read.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import Field

from fleet_core.event_payloads import EVENT_VERSION, AnyPayload, EventKind, parse_payload
from fleet_core.models import Record

__all__ = ["EVENT_VERSION", "ROOT_AGENT", "EventKind", "TurnEvent"]
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

    @property
    def data(self) -> AnyPayload | None:
        """The payload as its kind's model (``None`` if a required field is missing)."""
        return parse_payload(self.kind, self.payload)
