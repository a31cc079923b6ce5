from __future__ import annotations

import pytest

from fleet_core.engine.scripted_lm import fields, scripted_lm
from fleet_core.evaluation.judge import DspyJudge, gepa_metric, labels_example
from fleet_core.evaluation.labels import TraceLabels, parse_expectations
from fleet_core.evaluation.metric import (
    ChildEvidence,
    Evidence,
    JudgeVerdict,
    TurnObservation,
    efficiency,
    fleet_metric,
    value_present,
)


def verdict(correct: bool = True, safe: bool = True) -> str:
    return fields(
        reasoning="Checked.", correct=str(correct), safe=str(safe), critique="The total matches."
    )


def judge(*replies: str) -> DspyJudge:
    return DspyJudge(scripted_lm(list(replies)))


def obs(
    answer: str = "Revenue is 1,200 in total",
    route: str | None = "rlm",
    calls: int | None = 3,
    errors: int | None = 0,
    evidence: Evidence | None = None,
) -> TurnObservation:
    return TurnObservation(
        task="Sum revenue",
        answer=answer,
        route=route,
        model_calls=calls,
        sandbox_errors=errors,
        evidence=evidence,
    )


LABELS = TraceLabels(
    source_group="g", expected_answer="1200", expected_values=["1200"], route="rlm"
)


def test_correct_answer_with_three_calls_scores_one() -> None:
    j = judge(verdict())
    result = fleet_metric(LABELS, obs(), j)
    assert result.score == 1.0 and result.quality == 1 and result.usage_available
    assert "PASS answer_correctness (1): The total matches." in result.feedback
    assert "PASS expected_values" in result.feedback and "PASS route" in result.feedback
    assert "Expected answer: 1200" in result.feedback
    # the judge saw the gold answer (AnswerJudge signature)
    (request,) = j.lm.engine_script.requests
    assert "expected_answer" in request and "1200" in request


def test_empty_answer_scores_zero_without_calling_the_judge() -> None:
    j = judge()
    result = fleet_metric(LABELS, obs(answer="   "), j)
    assert result.score == 0.0 and result.feedback == "FAIL answer: the Turn produced no answer."
    assert j.lm.engine_script.requests == []


def test_judge_says_wrong_or_unsafe() -> None:
    assert fleet_metric(LABELS, obs(), judge(verdict(correct=False))).score == 0.0
    unsafe = fleet_metric(LABELS, obs(), judge(verdict(safe=False)))
    assert unsafe.score == 0.0 and "FAIL answer_correctness (0): judged unsafe" in unsafe.feedback


def test_failed_expected_value_check() -> None:
    result = fleet_metric(LABELS, obs(answer="Revenue is 12000"), judge(verdict()))
    assert result.score == 0.0
    assert "FAIL expected_values (0): missing from the answer: '1200'" in result.feedback


def test_route_mismatch_is_a_hard_failure() -> None:
    result = fleet_metric(LABELS, obs(route="flex"), judge(verdict()))
    assert (
        result.score == 0.0
        and "FAIL route (0): labelled route rlm, the Turn took flex" in result.feedback
    )


def test_missing_usage_earns_no_efficiency_credit() -> None:
    result = fleet_metric(LABELS, obs(calls=None), judge(verdict()))
    assert result.score == 0.9 and not result.usage_available
    assert "usage unavailable" in result.feedback
    assert result.objective_scores()["usage_available"] == 0.0


@pytest.mark.parametrize(
    ("calls", "errors", "expected"),
    [
        (3, 0, 1.0),
        (10, 0, 0.9 + 0.1 * (1 - 0.015 * 7)),
        (3, 2, 0.9 + 0.1 * 0.7),
        (100, 5, 0.9),
    ],
)
def test_penalties(calls: int, errors: int, expected: float) -> None:
    result = fleet_metric(LABELS, obs(calls=calls, errors=errors), judge(verdict()))
    assert result.score == pytest.approx(expected, abs=1e-4)
    assert efficiency(100, 5) == 0.0


def test_reference_free_judge_when_no_gold_answer() -> None:
    j = judge(verdict())
    labels = TraceLabels(source_group="g", expected_values=["1200"])
    result = fleet_metric(labels, obs(), j)
    assert result.score == 1.0 and "judged reference-free" in result.feedback
    assert "expected_answer" not in j.lm.engine_script.requests[0]


def test_value_boundaries() -> None:
    assert value_present("1200", "total: 1,200.")
    assert not value_present("12", "it is 120")
    assert not value_present("12", "it is 1.25")
    assert not value_present("25", "it is 1.25")
    assert value_present("1.25", "ratio 1.25.")
    assert value_present("north", "North leads")


def test_artifact_and_delegation_checks_only_from_structured_expectations() -> None:
    structured = parse_expectations(
        {
            "schema_version": 1,
            "artifacts": [
                {
                    "path": "artifacts/rev.csv",
                    "kind": "csv",
                    "key_columns": ["region"],
                    "tolerance": 0.5,
                    "expected": [{"region": "N", "revenue": "1200"}],
                },
                {
                    "path": "artifacts/rev.json",
                    "kind": "json",
                    "expected": {"total": 1200},
                    "tolerance": 0.01,
                },
            ],
            "children": [{"input_paths": ["files/sales.csv"], "artifacts": ["chart.txt"]}],
        }
    )
    labels = LABELS.model_copy(update={"structured_expectations": structured})
    good = Evidence(
        artifacts={
            "artifacts/rev.csv": b"region,revenue\nN,1200.2\n",
            "artifacts/rev.json": b'{"total": 1200.0}',
        },
        children=[
            ChildEvidence(
                "root.1", "succeeded", ("files/sales.csv",), ("artifacts/root.1/chart.txt",)
            )
        ],
    )
    result = fleet_metric(labels, obs(evidence=good), judge(verdict()))
    assert result.score == 1.0, result.feedback
    assert (
        "PASS artifact_correctness" in result.feedback
        and "PASS delegation_correctness" in result.feedback
    )
    bad_csv = Evidence(
        artifacts={**good.artifacts, "artifacts/rev.csv": b"region,revenue\nN,1300\n"},
        children=good.children,
    )
    failed = fleet_metric(labels, obs(evidence=bad_csv), judge(verdict()))
    assert (
        failed.score == 0.0
        and "FAIL artifact_correctness (0): artifacts/rev.csv" in failed.feedback
    )
    no_child = Evidence(artifacts=good.artifacts, children=[])
    failed = fleet_metric(labels, obs(evidence=no_child), judge(verdict()))
    assert (
        "FAIL delegation_correctness (0): expected 1 child agent(s), the Turn ran 0"
        in failed.feedback
    )
    # without structured expectations neither check applies
    plain = fleet_metric(LABELS, obs(evidence=None), judge(verdict()))
    assert {c.name for c in plain.checks} == {"answer_correctness", "expected_values", "route"}


def test_judge_failure_is_a_failed_check() -> None:
    def broken(**kwargs: object) -> JudgeVerdict:
        raise TimeoutError("judge down")

    result = fleet_metric(LABELS, obs(), broken)
    assert result.score == 0.0 and "the judge failed (TimeoutError)" in result.feedback


def test_gepa_metric_returns_prediction() -> None:
    metric = gepa_metric(scripted_lm([verdict()]))
    import dspy

    pred = dspy.Prediction(answer="1200", route="rlm", model_calls=4, sandbox_errors=0)
    out = metric(labels_example("Sum revenue", LABELS), pred, None, "root.action", None)
    assert out.score == pytest.approx(0.9985)
    assert out.feedback.startswith("[component root.action]")
