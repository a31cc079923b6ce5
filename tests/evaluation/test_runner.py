from __future__ import annotations

from typing import Any

from fleet_core.evaluation.datasets import build_dataset, read_dataset, write_dataset
from fleet_core.evaluation.metric import JudgeVerdict
from fleet_core.evaluation.runner import run_eval
from fleet_core.models import TurnRequest, TurnResult, Usage
from fleet_core.observability.sample_turn import scripted_turn_events
from fleet_core.observability.tracing import MlflowTracer, TurnTraceStart


def test_dataset_is_seeded_and_gold_values_come_from_files(tmp_path: Any) -> None:
    cases = build_dataset(seed=7)
    assert [c.wire() for c in cases] == [c.wire() for c in build_dataset(seed=7)]
    assert [c.wire() for c in cases] != [c.wire() for c in build_dataset(seed=8)]
    late = next(c for c in cases if c.category == "csv_filter")
    rows = [
        line.split(",") for line in late.files[next(iter(late.files))].decode().splitlines()[1:]
    ]
    assert late.labels.expected_values == [str(sum(int(d) > int(p) for _, p, d in rows))]
    assert {c.category for c in cases} >= {
        "csv_aggregation",
        "csv_filter",
        "csv_join",
        "long_context",
    }
    assert read_dataset(write_dataset(cases, tmp_path / "d.json"))[3].wire() == cases[3].wire()


class FakeRuntime:
    """Stands in for FleetRuntime.run_turn: answers with the gold values and records a trace."""

    def __init__(self, tracer: MlflowTracer, gold: dict[str, list[str]]) -> None:
        self.tracer, self.gold, self.files = tracer, gold, {}

    async def new_session(self, session_id: str | None = None, mode: str | None = None) -> None:
        return None

    async def write_file(self, session_id: str, path: str, data: bytes) -> None:
        self.files[(session_id, path)] = data

    async def run_turn(self, request: TurnRequest) -> TurnResult:
        turn_id = f"turn-{request.idempotency_key}"
        trace = self.tracer.start(
            TurnTraceStart(
                turn_id=turn_id,
                session_id=request.session_id,
                task=request.task,
                mode="hybrid",
                configuration_digest="c",
            )
        )
        for event in scripted_turn_events(turn_id, request.session_id):
            trace.on_event(event)
        answer = "The answer: " + ", ".join(self.gold[request.idempotency_key or ""])
        result = TurnResult(
            turn_id=turn_id,
            session_id=request.session_id,
            status="completed",
            answer=answer,
            route="rlm",
            usage=Usage(model_calls=3, sandbox_errors=1),
        )
        self.tracer.export(trace.finish(result))
        return result.model_copy(update={"trace_id": trace.trace_id})


async def test_eval_run_produces_an_mlflow_evaluation_run(tracer: MlflowTracer) -> None:
    cases = [c for c in build_dataset(seed=7, per_kind=1) if c.labels.route != "direct"][:3]
    for case in cases:  # route labels other than rlm would fail the fake's fixed route
        object.__setattr__(case, "labels", case.labels.model_copy(update={"route": None}))
    runtime = FakeRuntime(tracer, {c.case_id: c.labels.expected_values for c in cases})

    def judge(*, task: str, answer: str, expected_answer: str | None) -> JudgeVerdict:
        return JudgeVerdict(correct=True, critique="matches")

    seen: list[str] = []
    report = await run_eval(
        runtime,
        cases,
        judge=judge,
        backend=tracer.backend,
        on_case=lambda o: seen.append(o.case_id),
    )
    assert seen == [c.case_id for c in cases]
    assert all(o.metric.score == 0.985 for o in report.outcomes)  # 1 sandbox error
    assert report.run_id
    run = tracer.backend.get_run(report.run_id)
    assert run.data.metrics["fleet_metric"] == 0.985
    assert run.data.metrics["sandbox_verification"] == 1.0
    trace = tracer.backend._get_trace(report.outcomes[0].result.trace_id)
    names = {a.name for a in trace.info.assessments}
    assert {"fleet_metric", "fleet.labels"} <= names
