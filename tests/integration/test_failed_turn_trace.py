"""A Turn the engine failed (issue 19): its result carries one readable message and no traceback on
the wire; the traceback is kept, redacted, on the root span of its trace."""

from __future__ import annotations

from fleet_core.api import FleetRuntime
from fleet_core.engine.scripted_lm import SwitchableLms, route, scripted_lm
from fleet_core.events import TurnEvent
from fleet_core.models import TurnRequest


def _explode(_request: str) -> str:
    raise RuntimeError("the endpoint hung up (key sk-live-abcdef0123456789abcdef)")


async def test_an_engine_failure_keeps_its_traceback_in_the_trace_only(
    scripted: tuple[FleetRuntime, SwitchableLms],
) -> None:
    runtime, lms = scripted
    await runtime.new_session("boom", mode="rlm")
    lms.root = scripted_lm([route("rlm"), _explode])
    events: list[TurnEvent] = []
    result = await runtime.run_turn(
        TurnRequest(session_id="boom", task="fail please"), on_event=events.append
    )
    assert result.status == "failed" and result.error is not None
    assert result.error.kind == "EngineError" and "the endpoint hung up" in result.error.message
    assert "traceback" not in result.wire()["error"]
    assert "Traceback" not in result.error.message
    trace = await runtime.traces.pending(result.trace_id or "")
    assert trace is not None
    [root] = [s for s in trace.spans if s.parent_id is None]
    stack = root.attributes["fleet.error_traceback"]
    assert "Traceback (most recent call last)" in stack and "RuntimeError" in stack
    assert "sk-live-abcdef0123456789abcdef" not in stack  # credential-shaped text is redacted
