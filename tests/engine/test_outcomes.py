"""A Turn says how its answer was reached (``TurnResult.outcome``, fleet_core/outcomes.py):
submitted, extracted, partial or failed, with the reasons; on the wire, in the trace and in the
metric. Scripted model, real local sandbox."""

from __future__ import annotations

import pytest

from fleet_core.api import FleetRuntime
from fleet_core.engine.scripted_lm import SwitchableLms, action, fields, scripted_lm, submit
from fleet_core.evaluation.metric import JudgeVerdict, TurnObservation, fleet_metric
from fleet_core.models import TurnRequest, TurnResult
from fleet_core.outcomes import TurnFacts, completed_outcome, error_answer
from tests.engine.conftest import OpenRuntime


async def _turn(runtime: FleetRuntime, session: str = "o") -> TurnResult:
    await runtime.new_session(session, mode="rlm")
    return await runtime.run_turn(TurnRequest(session_id=session, task="compute it"))


async def test_a_submitted_answer_is_submitted(
    engine_runtime: FleetRuntime, lms: SwitchableLms
) -> None:
    lms.root = scripted_lm([action("x = 6 * 7\nprint(x)"), submit("str(x)")])
    result = await _turn(engine_runtime)
    assert result.status == "completed" and result.answer == "42"
    assert result.outcome is not None and result.outcome.kind == "submitted"
    assert result.outcome.reasons == [] and result.outcome.summary() == ""
    assert result.wire()["outcome"] == {"kind": "submitted", "reasons": []}


async def test_a_loop_that_runs_out_is_extracted_not_a_clean_success(
    open_runtime: OpenRuntime, lms: SwitchableLms
) -> None:
    runtime = await open_runtime(FLEET_RUNTIME__MAX_RLM_ITERATIONS="2")
    lms.root = scripted_lm(
        [
            action("print('still working')"),
            action("print('still working')"),
            fields(answer="maybe 42"),  # DSPy's extract step, after the loop ran out
        ]
    )
    result = await _turn(runtime)
    assert result.status == "completed" and result.answer == "maybe 42"
    outcome = result.outcome
    assert outcome is not None and outcome.kind == "extracted"
    assert [r.kind for r in outcome.reasons] == ["iterations_exhausted"]
    assert outcome.summary().startswith("completed with errors: the RLM loop reached its")


async def test_failed_cells_behind_a_submitted_answer_make_it_partial(
    engine_runtime: FleetRuntime, lms: SwitchableLms
) -> None:
    lms.root = scripted_lm(
        [
            action("import pandas as pd\npd.read_csv('files/missing.csv')"),
            action("1 / 0"),
            action("x = 42\nprint(x)"),
            submit("str(x)"),
        ]
    )
    result = await _turn(engine_runtime)
    assert result.status == "completed" and result.answer == "42"
    outcome = result.outcome
    assert outcome is not None and outcome.kind == "partial"
    [reason] = outcome.reasons
    assert (reason.kind, reason.count) == ("sandbox_errors", 2)
    assert outcome.summary() == "completed with errors: 2 sandbox cells failed"


async def test_an_answer_that_is_the_programs_error_message_is_failed(
    engine_runtime: FleetRuntime, lms: SwitchableLms
) -> None:
    lms.root = scripted_lm(
        [
            action(
                "import pandas as pd\n"
                "df = pd.DataFrame({'Diameter': [1, 2]})\n"
                "msg = df['diameter'].mean() if 'diameter' in df.columns "
                "else \"Column 'diameter' does not exist\"\nprint(msg)"
            ),
            submit("msg"),
        ]
    )
    result = await _turn(engine_runtime)
    assert result.status == "completed"  # delivered, but not a success
    outcome = result.outcome
    assert outcome is not None and outcome.kind == "failed"
    assert outcome.reasons[0].kind == "error_answer"
    assert "Column 'diameter' does not exist" in outcome.summary()
    assert outcome.summary().startswith("failed: the answer is an error message")


async def test_a_failed_child_makes_the_answer_partial(
    engine_runtime: FleetRuntime, lms: SwitchableLms
) -> None:
    lms.root = scripted_lm(
        [
            action("r = spawn_agent(subtask='BROKEN child')\nprint(r)"),
            submit("'done without the child'"),
        ]
    )
    lms.sub = scripted_lm(rules={"BROKEN child": "this reply has no fields at all"})
    result = await _turn(engine_runtime)
    assert result.status == "completed"
    outcome = result.outcome
    assert outcome is not None and outcome.kind == "partial"
    assert ("child_failed", 1) in [(r.kind, r.count) for r in outcome.reasons]


async def test_a_failed_turn_has_a_failed_outcome(
    open_runtime: OpenRuntime, lms: SwitchableLms
) -> None:
    runtime = await open_runtime()
    lms.root = scripted_lm([action("1 / 0")])  # then replies that do not parse: the Turn fails
    result = await _turn(runtime)
    assert result.status == "failed"
    outcome = result.outcome
    assert outcome is not None and outcome.kind == "failed"
    assert [r.kind for r in outcome.reasons] == ["turn_failed", "sandbox_errors"]
    assert outcome.summary().startswith("failed: The Turn failed: AdapterParseError")


async def test_the_outcome_is_stored_and_replayed_with_the_result(
    engine_runtime: FleetRuntime, lms: SwitchableLms
) -> None:
    lms.root = scripted_lm([action("1 / 0"), action("x = 42\nprint(x)"), submit("str(x)")])
    await engine_runtime.new_session("r", mode="rlm")
    request = TurnRequest(session_id="r", task="compute it", idempotency_key="k1")
    first = await engine_runtime.run_turn(request)
    again = await engine_runtime.run_turn(request)
    assert again.replayed and again.outcome == first.outcome
    assert first.outcome is not None and first.outcome.kind == "partial"


def right(*, task: str, answer: str, expected_answer: str | None) -> JudgeVerdict:
    return JudgeVerdict(correct=answer == expected_answer)


@pytest.mark.parametrize(
    ("kind", "passes"),
    [("submitted", True), ("partial", True), ("extracted", False), ("failed", False)],
)
def test_the_metric_scores_an_extracted_or_failed_answer_zero(kind: str, passes: bool) -> None:
    observation = TurnObservation(
        task="t", answer="42", route="rlm", model_calls=3, sandbox_errors=0, outcome=kind
    )
    result = fleet_metric({"expected_answer": "42"}, observation, right)
    assert (result.score > 0) is passes
    assert any(c.name == "outcome" and c.passed is passes for c in result.checks)


@pytest.mark.parametrize(
    ("answer", "is_error"),
    [
        ("Column 'diameter' does not exist", True),
        ("KeyError: 'diameter'", True),
        ("Traceback (most recent call last):\n  File ...", True),
        ("Error: could not parse the dates", True),
        ("The file files/sales.csv was not found", True),
        ("north: 150.5, south: 250.5", False),
        ("No anomalies found in the log.", False),
        ("Customers not found in orders: 3 (ids 4, 7, 9)", False),
        ("The p-value is 0.03; the error rate dropped from 5% to 2%.", False),
    ],
)
def test_an_error_message_is_told_from_an_answer(answer: str, is_error: bool) -> None:
    assert (error_answer(answer) is not None) is is_error


def test_an_answer_that_leaves_a_tag_unfilled_is_partial() -> None:
    facts = TurnFacts(reached="submitted", answer="@r[0.41] @p[value]", unfilled=("p",))
    outcome = completed_outcome(facts)
    assert outcome.kind == "partial" and outcome.reasons[0].kind == "format_unmet"
    assert completed_outcome(TurnFacts(reached="submitted", answer="@r[0.41]")).kind == (
        "submitted"
    )
