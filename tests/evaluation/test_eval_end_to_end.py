"""``run_eval`` end to end: synthetic cases as real ``FleetRuntime`` Turns (scripted root/sub
models, code in the LocalSandbox), judged by ``DspyJudge`` on a scripted judge LM, recorded as an
MLflow evaluation run, with labels in MLflow *and* the store."""

from __future__ import annotations

from typing import Any

from fleet_core.api import FleetRuntime
from fleet_core.config import EffectiveConfig
from fleet_core.engine.scripted_lm import action, fields, route, scripted_lm
from fleet_core.evaluation.datasets import build_dataset
from fleet_core.evaluation.judge import DspyJudge
from fleet_core.evaluation.runner import run_eval
from fleet_core.observability.tracing import MlflowTracer, create_tracer


class Lms:
    def __init__(self, root: Any, sub: Any) -> None:
        self.root, self.sub = root, sub

    def check(self, *roles: str) -> None:
        return None

    def lm(self, role: str) -> Any:
        return self.root if role == "root" else self.sub

    def uses_embedded(self, role: str) -> bool:
        return False


async def test_eval_run_through_the_real_runtime(obs_config: EffectiveConfig) -> None:
    cases = build_dataset(seed=11, per_kind=1)[:3]
    for case in cases:  # the scripted triage always answers rlm
        object.__setattr__(case, "labels", case.labels.model_copy(update={"route": "rlm"}))
    gold = {case.task: case.labels.expected_values for case in cases}

    def answer(text: str) -> str:
        # the scripted model prints its figures before it submits them (grounded SUBMIT)
        values = next(v for task, v in gold.items() if task in text)
        shown = repr("The answer is " + ", ".join(values))
        return action(
            f"answer = {shown}\nprint(answer)\n"
            "SUBMIT(answer=answer, learned_skill_note='read the CSV')",
            "Submit.",
        )

    root = scripted_lm(rules={"": answer})
    sub = scripted_lm(rules={"[[ ## route ## ]]": route("rlm")})
    judge_lm = scripted_lm(
        rules={
            "relevance_score": fields(
                reasoning="Checked.",
                relevant=True,
                relevance_score=1.0,
                rationale="The answer gives the values the task asks for.",
            ),
            "": fields(reasoning="Checked.", correct=True, safe=True, critique="Matches."),
        }
    )
    tracer = create_tracer(obs_config, scope="evaluation")
    assert isinstance(tracer, MlflowTracer)
    runtime = await FleetRuntime.open(
        obs_config, lm_provider=Lms(root, sub), tracer=tracer, trace_export="inline"
    )
    try:
        report = await run_eval(
            runtime, cases, judge=DspyJudge(judge_lm), backend=tracer.backend, run_name="e2e"
        )
        assert [o.case_id for o in report.outcomes] == [c.case_id for c in cases]
        for outcome, case in zip(report.outcomes, cases, strict=True):
            result = outcome.result
            assert result.status == "completed", result.error
            assert result.route == "rlm" and result.trace_id
            assert outcome.metric.score == 1.0, outcome.metric.feedback  # 2 calls, no errors
            assert outcome.suite["sandbox_verification"] == 1.0
            assert outcome.suite["relevance"] == 1.0, outcome.suite_errors
            assert outcome.suite["skill_use"] is None  # no Skill activity in these Turns
            assert outcome.suite["retrieval_groundedness"] is None  # the engine never retrieves
            # labels in the store (replay captured, so eligible) and on the trace
            row = await runtime._run(runtime.store.get_trace_labels, result.trace_id)
            assert row is not None and row["turn_id"] == result.turn_id
            assert row["labels"]["expected_values"] == case.labels.expected_values
            assert row["labels"]["review_status"] == "synthetic"
            assert row["eligible"], row["ineligible_reason"]
            raw = tracer.backend._get_trace(result.trace_id)
            names = {a.name for a in raw.info.assessments}
            assert {"fleet_metric", "fleet.labels"} <= names
            assert raw.info.experiment_id == tracer.backend.experiment_id("evaluation")
        # one answer verdict and one relevance verdict per case
        assert len(judge_lm.engine_script.requests) >= 2 * len(cases)
        assert report.run_id
        run = tracer.backend.get_run(report.run_id)
        assert run.info.experiment_id == tracer.backend.experiment_id("evaluation")
        assert run.data.metrics["fleet_metric"] == 1.0
        assert run.data.metrics["sandbox_verification"] == 1.0
        assert run.data.metrics["relevance"] == 1.0
    finally:
        await runtime.close()
        tracer.close()
