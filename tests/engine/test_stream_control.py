"""Event stream bounds/coalescing and Turn control limits (no dspy, no sandbox)."""

from __future__ import annotations

import threading

import pytest

from fleet_core.engine.control import (
    AgentLimits,
    BudgetExhausted,
    ChildCapacityError,
    TurnCancelled,
    TurnControl,
)
from fleet_core.engine.stream import EventChannel
from fleet_core.event_payloads import (
    BudgetUpdatePayload,
    CodeCellPayload,
    LmStartPayload,
    StatusPayload,
    TurnStartedPayload,
)
from fleet_core.models import TurnResult

LM_START = LmStartPayload(call_id="lm1", model="openai/scripted", category="generation")


def test_progress_events_are_coalesced_and_the_queue_is_bounded() -> None:
    channel = EventChannel("t", "s", max_pending=10)
    channel.emit("turn_started", TurnStartedPayload(task="t", mode="hybrid"))
    for used in range(1, 500):
        channel.emit(
            "budget_update", BudgetUpdatePayload(used=used, max=500, category="generation")
        )
    for i in range(50):
        channel.emit("code_cell", CodeCellPayload(cell=i, phase="task", code="pass"))
    channel.emit("turn_completed", TurnResult(turn_id="t", session_id="s", status="completed"))
    events = channel.drain()
    budget = [e.data for e in events if e.kind == "budget_update"]
    assert budget == [BudgetUpdatePayload(used=499, max=500, category="generation")]
    assert events[0].kind == "turn_started"
    assert any(e.kind == "turn_completed" for e in events)  # essential kinds are never dropped
    assert events[-1].data == StatusPayload(status="events_dropped", dropped=42)
    assert events[-1].payload == {"status": "events_dropped", "dropped": 42}  # the wire
    seqs = [e.seq for e in events]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)


def test_emit_from_many_threads_never_blocks() -> None:
    channel = EventChannel("t", "s", max_pending=100)
    threads = [
        threading.Thread(target=lambda: [channel.emit("lm_start", LM_START) for _ in range(1000)])
        for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5)
    assert len(channel.drain()) <= 101


def test_budget_cancel_and_capacity() -> None:
    control = TurnControl(max_units=2, timeout_seconds=None, limits=AgentLimits(1, 2, 1))
    control.charge(2, "generation")
    with pytest.raises(BudgetExhausted):
        control.charge(1, "sub_query")
    with pytest.raises(BudgetExhausted):
        control.check()  # terminal from now on
    other = TurnControl(max_units=5, timeout_seconds=None, limits=AgentLimits(1, 2, 1))
    interrupted = []
    with other.child_slot(0):
        with pytest.raises(ChildCapacityError, match="running"), other.child_slot(0):
            pass
        with other.on_stop(lambda: interrupted.append(True)):
            other.cancel()
    assert interrupted == [True]
    with pytest.raises(TurnCancelled):
        other.check()
    with pytest.raises(ChildCapacityError, match="depth"):
        TurnControl(
            max_units=1, timeout_seconds=None, limits=AgentLimits(1, 2, 1)
        ).reserve_children(1, 1)
