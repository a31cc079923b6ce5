"""Grounded SUBMIT in the trace: a real traced Turn (scripted model, code in the LocalSandbox)
whose cell spans carry the ungrounded figures and whose agent span counts the verdicts."""

from __future__ import annotations

from fleet_core.api import FleetRuntime
from fleet_core.engine.scripted_lm import SwitchableLms, action, scripted_lm, submit
from fleet_core.models import TurnRequest
from fleet_core.observability.tracing import MlflowTracer

TYPED = "'The total is 499500'"


async def test_trace_flags_ungrounded_submits(
    traced_runtime: FleetRuntime, lms: SwitchableLms
) -> None:
    runtime = traced_runtime
    sid = (await runtime.new_session(mode="rlm")).session_id
    lms.root = scripted_lm(
        [action("total = sum(range(1000))"), submit(TYPED), submit(TYPED), submit(TYPED)]
    )
    result = await runtime.run_turn(TurnRequest(session_id=sid, task="Sum below 1000"))
    assert result.status == "completed" and result.usage.submit_rejections == 2
    assert result.trace_id

    await runtime.traces.flush()
    tracer = runtime.tracer
    assert isinstance(tracer, MlflowTracer)
    spans = tracer.backend._get_trace(result.trace_id).data.spans
    cells = [s for s in spans if s.attributes.get("fleet.ungrounded_figures")]
    assert [s.attributes["fleet.submit_rejected"] for s in cells] == [True, True, False]
    assert all(s.attributes["fleet.ungrounded_figures"] == ["499500"] for s in cells)
    assert [s.attributes["fleet.outcome"] for s in cells] == [
        "submit_rejected",
        "submit_rejected",
        "submitted",
    ]
    agent = next(s for s in spans if s.name == "agent.root")
    assert agent.attributes["fleet.submit_rejections"] == 2
    assert agent.attributes["fleet.ungrounded_submits_accepted"] == 1
    root = next(s for s in spans if s.parent_id is None)
    assert root.attributes["fleet.usage"]["submit_rejections"] == 2
    assert root.attributes["fleet.sandbox_errors_observed"] == 0  # rejections are not errors
