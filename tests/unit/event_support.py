"""A TurnEvent for consumer tests: agent ``root``, or a child of ``root``."""

from __future__ import annotations

from typing import Any

from fleet_core.events import TurnEvent


def event(seq: int, kind: str, payload: dict[str, Any], agent: str = "root") -> TurnEvent:
    parent = None if agent == "root" else "root"
    return TurnEvent(
        turn_id="t1",
        session_id="s1",
        seq=seq,
        agent_id=agent,
        parent_agent_id=parent,
        kind=kind,  # type: ignore[arg-type]
        payload=payload,
    )
