from __future__ import annotations

import sys
import uuid

import pytest

from fleet_core.observability.sample_turn import scripted_turn_events, scripted_turn_result
from fleet_core.observability.traceview import render_trace_markdown
from fleet_core.observability.tracing import MlflowTracer, TurnTraceStart


def _run(tracer: MlflowTracer, outcome: str = "completed") -> tuple[str, str]:
    turn_id, session_id = uuid.uuid4().hex, "sess-trace"
    trace = tracer.start(
        TurnTraceStart(
            turn_id=turn_id,
            session_id=session_id,
            task="Sum revenue in files/sales.csv",
            mode="hybrid",
            configuration_digest="c" * 64,
            compiled_program_digest="p" * 64,
        )
    )
    assert trace.trace_id and trace.trace_id.startswith("tr-")
    with trace.phase("prepare_inputs", files=1):
        pass
    for event in scripted_turn_events(turn_id, session_id, outcome=outcome):
        trace.on_event(event)
    result = scripted_turn_result(turn_id, session_id, outcome=outcome)
    with trace.phase("commit"):
        pass
    record = trace.finish(result)
    assert record is not None and record.trace_id == trace.trace_id
    tracer.export(record)
    return trace.trace_id, turn_id


def test_turn_trace_has_every_span(tracer: MlflowTracer) -> None:
    trace_id, turn_id = _run(tracer)
    view = tracer.load_trace(trace_id)
    assert view.turn_id == turn_id and view.session_id == "sess-trace"
    assert (view.mode, view.route, view.outcome) == ("hybrid", "rlm", "completed")
    assert view.route_reason == "needs code over files/sales.csv"
    assert view.configuration_digest == "c" * 64 and view.compiled_program_digest == "p" * 64
    assert [p.name for p in view.phases] == ["prepare_inputs", "commit"]
    assert len(view.triage_lm_calls) == 1
    root = view.root
    assert root is not None
    assert [c.outcome for c in root.cells] == ["error", "ok"]
    assert "ZeroDivisionError" in (root.cells[0].error or "")
    assert root.lm_calls[0].input_tokens == 100
    assert [t.tool for t in root.tool_calls] == ["spawn_agent"]
    (child,) = root.children
    assert child.agent_id == "root.1" and child.parent_agent_id == "root"
    assert child.subtask == "Chart revenue" and child.input_paths == ["files/sales.csv"]
    assert child.cells[0].outcome == "ok" and child.status == "succeeded"
    assert view.usage["model_calls"] == 3
    assert view.artifacts[0]["provenance"][0]["agent_id"] == "root.1"
    # MLflow's own fields: session metadata, client request id, token usage
    raw = tracer.backend._get_trace(trace_id)
    assert raw.info.trace_metadata["mlflow.trace.session"] == "sess-trace"
    assert raw.info.client_request_id == turn_id
    assert raw.info.state == "OK" or str(raw.info.state).endswith("OK")
    text = render_trace_markdown(view)
    for needle in (
        "Route reason",
        "Child agent `root.1`",
        "ZeroDivisionError",
        "chart.txt",
        "sha256",
    ):
        assert needle in text


@pytest.mark.parametrize("outcome", ["failed", "cancelled"])
def test_failed_and_cancelled_turns_have_traces(tracer: MlflowTracer, outcome: str) -> None:
    trace_id, _ = _run(tracer, outcome)
    view = tracer.load_trace(trace_id)
    assert view.outcome == outcome
    assert view.error and view.error["kind"]
    raw = tracer.backend._get_trace(trace_id)
    assert str(raw.info.state).endswith("ERROR")


def test_tracer_does_not_touch_global_mlflow_state(tracer: MlflowTracer) -> None:
    import mlflow

    _run(tracer)
    assert "mlflow" in sys.modules
    assert not mlflow.tracking._tracking_service.utils._tracking_uri  # never set globally
