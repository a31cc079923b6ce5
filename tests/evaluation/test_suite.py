"""The broader suite: relevance (DSPy judge on a scripted judge LM), skill-use discipline,
retrieval groundedness on synthetic TraceViews, and what ``run_eval`` records of them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from fleet_core.engine.scripted_lm import fields, scripted_lm
from fleet_core.evaluation.datasets import EvalCase
from fleet_core.evaluation.judge import DspyGroundednessJudge, DspyJudge, DspyRelevanceJudge
from fleet_core.evaluation.labels import TraceLabels
from fleet_core.evaluation.metric import JudgeVerdict
from fleet_core.evaluation.runner import run_eval, score_suite, suite_from_trace
from fleet_core.evaluation.suite import (
    MAX_SKILL_READS,
    RationaleRejected,
    SuiteVerdict,
    check_rationale,
    relevance,
    retrieval_groundedness,
    skill_events,
    skill_use,
)
from fleet_core.events import ROOT_AGENT, TurnEvent
from fleet_core.models import TurnRequest, TurnResult, Usage
from fleet_core.observability.records import SpanRecord, TurnTraceStart
from fleet_core.observability.traceview import (
    AgentView,
    CellView,
    LmCallView,
    RetrievalView,
    ToolCallView,
    TraceView,
    build_view,
    render_trace_markdown,
)
from fleet_core.observability.tracing import MlflowTracer

# synthetic traces ----------------------------------------------------------------------------


def cell(code: str, outcome: str = "ok", phase: str | None = "task") -> CellView:
    return CellView(code, outcome, None, None, None, None, 1.0, phase)


def tool(tool_name: str, **inputs: Any) -> ToolCallView:
    return ToolCallView(tool_name, True, inputs, "…", None)


def lm() -> LmCallView:
    return LmCallView("openai/scripted", "root", True, 10, 5, 1.0)


def view(*steps: Any, route: str = "rlm", children: list[AgentView] | None = None) -> TraceView:
    root = AgentView("root", None, "succeeded", steps=[lm(), *steps, *(children or [])])
    return TraceView(
        trace_id="tr-x", session_id="s", turn_id="t", task="Sum revenue", mode="hybrid",
        route=route, route_reason=None, outcome="completed", answer="42", error=None, usage={},
        configuration_digest=None, compiled_program_digest=None, replay_sha256=None,
        started_ms=0, duration_ms=1, artifacts=[], phases=[], triage_lm_calls=[lm()], root=root,
    )  # fmt: skip


def result(answer: str = "Total revenue is 42", route: str = "rlm") -> TurnResult:
    return TurnResult(
        turn_id="t", session_id="s", status="completed", answer=answer, route=route,
        usage=Usage(model_calls=2, sandbox_errors=0),
    )  # fmt: skip


RUN = "out = run_skill_script('csv-tools', 'scripts/sum.py', ['files/sales.csv'])"

# rationale -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text", ["", "   ", "TODO", "tbd.", "Placeholder", "N/A", "...", "TODO: explain later", "Yes."]
)
def test_placeholder_rationales_are_rejected(text: str) -> None:
    with pytest.raises(RationaleRejected):
        check_rationale(text)


def test_real_rationale_is_kept_and_normalized() -> None:
    assert check_rationale("  The answer gives\nthe requested total. ") == (
        "The answer gives the requested total."
    )


# relevance -----------------------------------------------------------------------------------


def relevance_reply(relevant: bool = True, score: float = 0.9, rationale: str = "") -> str:
    return fields(
        reasoning="Compared the answer with the task.",
        relevant=str(relevant),
        relevance_score=str(score),
        rationale=rationale or "The answer states the revenue total the task asks for.",
    )


def test_relevance_judge_passes_a_relevant_answer() -> None:
    judge = DspyRelevanceJudge(scripted_lm([relevance_reply(score=0.9)]))
    score = relevance("Sum revenue in files/sales.csv", "Total revenue is 42", judge)
    assert score is not None and score.value == 0.9 and not score.error
    assert score.rationale == "The answer states the revenue total the task asks for."
    (request,) = judge.lm.engine_script.requests
    assert "Sum revenue in files/sales.csv" in request and "relevance_score" in request


def test_relevance_judge_fails_an_off_topic_answer() -> None:
    judge = DspyRelevanceJudge(
        scripted_lm([relevance_reply(False, 0.8, "The answer talks about weather, not revenue.")])
    )
    score = relevance("Sum revenue", "It is sunny today", judge)
    assert score is not None and score.value == 0.5  # a failed verdict is capped at 0.5
    low = relevance(
        "Sum revenue",
        "It is sunny",
        DspyRelevanceJudge(scripted_lm([relevance_reply(False, 0.0, "Off topic, no revenue.")])),
    )
    assert low is not None and low.value == 0.0


@pytest.mark.parametrize("placeholder", ["TODO", "placeholder", "N/A"])
def test_relevance_judge_rejects_placeholder_rationales(placeholder: str) -> None:
    judge = DspyRelevanceJudge(scripted_lm([relevance_reply(rationale=placeholder)]))
    with pytest.raises(RationaleRejected):
        judge(task="Sum revenue", answer="42")
    again = DspyRelevanceJudge(scripted_lm([relevance_reply(rationale=placeholder)]))
    score = relevance("Sum revenue", "42", again)
    assert score is not None and score.value is None and score.error
    assert "rationale rejected" in score.rationale


def test_relevance_of_an_empty_answer_and_without_a_judge() -> None:
    judge = DspyRelevanceJudge(scripted_lm([]))
    empty = relevance("Sum revenue", "  ", judge)
    assert empty is not None and empty.value == 0.0
    assert judge.lm.engine_script.requests == []
    assert relevance("Sum revenue", "42", None) is None


def test_relevance_judge_failure_is_an_error_not_a_score() -> None:
    def broken(*, task: str, answer: str) -> SuiteVerdict:
        raise RuntimeError("endpoint down")

    score = relevance("Sum revenue", "42", broken)
    assert score is not None and score.value is None and score.error
    assert "RuntimeError" in score.rationale


def test_dspy_judge_carries_the_suite_judges() -> None:
    judge = DspyJudge(scripted_lm([]))
    assert isinstance(judge.relevance, DspyRelevanceJudge)
    assert isinstance(judge.groundedness, DspyGroundednessJudge)


# skill use -----------------------------------------------------------------------------------


def test_skill_use_not_applicable_without_skill_activity() -> None:
    plain = view(cell("print(open('files/sales.csv').read())"), tool("spawn_agent", subtask="x"))
    assert skill_events(plain) == []
    assert skill_use(plain) is None
    # the bootstrap cell that defines the run_skill_script helper is not activity
    helpers = view(cell("def run_skill_script(name, path):\n    'skills/x/'", phase="bootstrap"))
    assert skill_use(helpers) is None
    assert suite_from_trace(plain, result())["skill_use"] is None


def test_skill_read_before_use_passes() -> None:
    trace = view(
        tool("list_skills"),
        cell("print(use_skill('csv-tools'))"),
        tool("use_skill", name="csv-tools"),
        cell(RUN),
    )
    score = skill_use(trace)
    assert score is not None and score.value == 1.0, score
    assert "PASS read before use: all 1" in score.rationale
    assert [e.kind for e in skill_events(trace)] == ["list", "read", "run"]


def test_read_and_run_in_the_same_cell_counts_as_read_first() -> None:
    trace = view(cell("print(use_skill('csv-tools'))\n" + RUN), tool("use_skill", name="csv-tools"))
    score = skill_use(trace)
    assert score is not None and score.value == 1.0


def test_reading_skill_files_from_the_sandbox_counts_as_a_read() -> None:
    trace = view(cell("print(open('skills/csv-tools/SKILL.md').read())"), cell(RUN))
    score = skill_use(trace)
    assert score is not None and score.value == 1.0
    assert [(e.kind, e.skill) for e in skill_events(trace)] == [
        ("read", "csv-tools"),
        ("run", "csv-tools"),
    ]


def test_running_a_skill_script_without_reading_it_fails() -> None:
    trace = view(tool("use_skill", name="other-skill"), cell(RUN))
    score = skill_use(trace)
    assert score is not None and score.value == 0.5  # read-before-use fails, the bound holds
    assert "FAIL read before use: 1 of 1" in score.rationale and "csv-tools" in score.rationale
    # only a run, nothing read at all
    blind = skill_use(view(cell(RUN)))
    assert blind is not None and blind.value == 0.5


def test_too_many_skill_reads_fail_progressive_disclosure() -> None:
    reads = [
        tool("read_skill_reference", name="csv-tools", path=f"references/{i}.md")
        for i in range(MAX_SKILL_READS + 1)
    ]
    score = skill_use(view(*reads))
    assert score is not None and score.value == 0.0  # the only check (nothing ran) fails
    assert f"{MAX_SKILL_READS + 1} Skill read(s)" in score.rationale
    both = skill_use(view(*reads, cell("run_skill_script('x', 'scripts/a.py')")))
    assert both is not None and both.value == 0.0
    bounded = skill_use(view(*reads[:MAX_SKILL_READS]))
    assert bounded is not None and bounded.value == 1.0


def test_a_child_running_a_skill_its_parent_read_is_informed() -> None:
    child = AgentView("root.1", "root", "succeeded", steps=[lm(), cell(RUN)])
    trace = view(tool("use_skill", name="csv-tools"), children=[child])
    score = skill_use(trace)
    assert score is not None and score.value == 1.0


def test_run_skill_script_as_a_tool_span_is_not_counted_twice() -> None:
    trace = view(
        tool("use_skill", name="csv-tools"),
        cell(RUN),
        tool("run_skill_script", name="csv-tools", path="scripts/sum.py"),
    )
    assert [e.kind for e in skill_events(trace)] == ["read", "run"]


def test_skill_use_from_a_real_mlflow_trace(tracer: MlflowTracer) -> None:
    """Tool spans and cells written by the tracer, read back: ``use_skill`` then a script run."""
    turn_id, session_id = "turn-skill", "s-skill"
    trace = tracer.start(
        TurnTraceStart(
            turn_id=turn_id, session_id=session_id, task="Sum revenue", mode="hybrid",
            configuration_digest="c",
        )
    )  # fmt: skip
    start = datetime.now(UTC)
    payloads: list[tuple[str, dict[str, Any]]] = [
        ("turn_started", {"mode": "hybrid", "task": "Sum revenue"}),
        ("triage_decision", {"mode": "hybrid", "route": "rlm", "summary": "needs code"}),
        ("code_cell", {"cell": 1, "phase": "task", "code": "print(use_skill('csv-tools'))"}),
        ("tool_call_start", {"call_id": "u1", "tool": "use_skill", "source": "dspy",
                             "inputs": {"name": "csv-tools"}}),
        ("tool_call_end", {"call_id": "u1", "tool": "use_skill", "source": "dspy", "ok": True,
                           "output": "# csv", "duration_ms": 1}),
        ("cell_output", {"cell": 1, "phase": "task", "ok": True, "outcome": "completed",
                         "output": "# csv", "duration_ms": 1}),
        ("code_cell", {"cell": 2, "phase": "task", "code": RUN}),
        ("cell_output", {"cell": 2, "phase": "task", "ok": True, "outcome": "completed",
                         "output": "42", "duration_ms": 1}),
        ("turn_completed", {"turnId": turn_id, "sessionId": session_id, "status": "completed",
                            "answer": "42", "route": "rlm"}),
    ]  # fmt: skip
    for seq, (kind, payload) in enumerate(payloads, 1):
        trace.on_event(
            TurnEvent(
                turn_id=turn_id, session_id=session_id, seq=seq, agent_id=ROOT_AGENT,
                parent_agent_id=None, kind=kind, payload=payload,
                at=start + timedelta(milliseconds=10 * seq),
            )
        )  # fmt: skip
    finished = result("42")
    tracer.export(
        trace.finish(finished.model_copy(update={"turn_id": turn_id, "session_id": session_id}))
    )
    loaded = tracer.backend.load_trace(trace.trace_id)
    assert [(e.kind, e.skill) for e in skill_events(loaded)] == [
        ("read", "csv-tools"),
        ("run", "csv-tools"),
    ]
    suite = suite_from_trace(loaded, finished)
    assert suite["skill_use"] == 1.0 and suite["sandbox_verification"] == 1.0
    assert retrieval_groundedness(loaded, "Sum revenue", "42", None) is None


# retrieval groundedness ----------------------------------------------------------------------


DOCS = ("Q1 revenue was 40.", "Q2 revenue was 2.")


def grounded_reply(grounded: bool = True, score: float = 1.0, rationale: str = "") -> str:
    return fields(
        reasoning="Checked each claim.",
        grounded=str(grounded),
        groundedness_score=str(score),
        rationale=rationale or "The total 42 is the sum of the two retrieved quarters.",
    )


def test_groundedness_not_applicable_without_retrieval_spans() -> None:
    judge = DspyGroundednessJudge(scripted_lm([]))
    assert retrieval_groundedness(view(cell("print(1)")), "Sum revenue", "42", judge) is None
    assert retrieval_groundedness(None, "Sum revenue", "42", judge) is None
    assert judge.lm.engine_script.requests == []
    scores = score_suite(view(cell("print(1)")), "Sum revenue", result(), groundedness_judge=judge)
    assert scores["retrieval_groundedness"] is None


def test_groundedness_applies_to_retrieval_spans_and_passes() -> None:
    trace = view(RetrievalView("revenue by quarter", DOCS), cell("print(40 + 2)"))
    judge = DspyGroundednessJudge(scripted_lm([grounded_reply()]))
    score = retrieval_groundedness(trace, "Sum revenue", "Total revenue is 42", judge)
    assert score is not None and score.value == 1.0 and not score.error
    (request,) = judge.lm.engine_script.requests
    assert "[document 1]" in request and "Q2 revenue was 2." in request


def test_groundedness_fails_an_unsupported_answer() -> None:
    trace = view(RetrievalView("revenue", DOCS))
    judge = DspyGroundednessJudge(
        scripted_lm([grounded_reply(False, 0.2, "The total 99 appears in no retrieved document.")])
    )
    score = retrieval_groundedness(trace, "Sum revenue", "Total revenue is 99", judge)
    assert score is not None and score.value == 0.2


def test_groundedness_rejects_placeholder_rationales_and_needs_a_judge() -> None:
    trace = view(RetrievalView("revenue", DOCS))
    judge = DspyGroundednessJudge(scripted_lm([grounded_reply(rationale="TBD")]))
    score = retrieval_groundedness(trace, "Sum revenue", "42", judge)
    assert score is not None and score.value is None and score.error
    unjudged = retrieval_groundedness(trace, "Sum revenue", "42", None)
    assert unjudged is not None and unjudged.value is None and unjudged.error
    empty = retrieval_groundedness(view(RetrievalView("q", ())), "Sum revenue", "42", judge)
    assert empty is not None and empty.value == 0.0


def test_retriever_spans_become_retrieval_views() -> None:
    """MLflow's RETRIEVER convention (documents with page_content), under an agent or the Turn."""
    spans = [
        SpanRecord(1, None, "turn", "CHAIN", "turn", 0, 10, {"task": "Sum revenue"}),
        SpanRecord(
            2, 1, "agent.root", "AGENT", "agent", 1, 9, attributes={"fleet.agent_id": "root"}
        ),
        SpanRecord(
            3, 2, "search", "RETRIEVER", "other", 2, 3, {"query": "revenue"},
            {"value": [{"page_content": DOCS[0], "metadata": {}}, {"page_content": DOCS[1]}]},
        ),
        SpanRecord(4, 1, "kb", '"RETRIEVER"', "other", 4, 5, {"value": "q"}, {"value": ["plain"]}),
    ]  # fmt: skip
    built = build_view("tr-r", spans)
    assert [r.documents for r in built.retrievals()] == [("plain",), DOCS]
    assert built.retrievals()[1].query == "revenue"
    assert "retrieval (2 document(s)): revenue" in render_trace_markdown(built)


# run_eval ------------------------------------------------------------------------------------


class FakeRuntime:
    def __init__(self, tracer: MlflowTracer, answer: str) -> None:
        self.tracer, self.answer = tracer, answer

    async def new_session(self, session_id: str | None = None, mode: str | None = None) -> None:
        return None

    async def write_file(self, session_id: str, path: str, data: bytes) -> None:
        return None

    async def run_turn(self, request: TurnRequest) -> TurnResult:
        turn_id = f"turn-{request.session_id}"
        trace = self.tracer.start(
            TurnTraceStart(
                turn_id=turn_id, session_id=request.session_id, task=request.task,
                mode="hybrid", configuration_digest="c",
            )
        )  # fmt: skip
        done = TurnResult(
            turn_id=turn_id, session_id=request.session_id, status="completed",
            answer=self.answer, route="direct", usage=Usage(model_calls=2, sandbox_errors=0),
        )  # fmt: skip
        self.tracer.export(trace.finish(done))
        return done.model_copy(update={"trace_id": trace.trace_id})


def answer_judge(*, task: str, answer: str, expected_answer: str | None) -> JudgeVerdict:
    return JudgeVerdict(correct=True, critique="matches")


CASE = EvalCase(
    case_id="q1",
    task="What is 6 times 7?",
    files={},
    labels=TraceLabels(review_status="synthetic", source_group="g", expected_values=["42"]),
    category="question",
)


async def test_run_eval_records_relevance_on_the_run_and_the_trace(tracer: MlflowTracer) -> None:
    judge = DspyJudge(
        scripted_lm(rules={"relevance_score": relevance_reply(score=0.8)}),
    )
    report = await run_eval(
        FakeRuntime(tracer, "The answer is 42."),
        [CASE],
        judge=answer_judge,
        relevance_judge=judge.relevance,
        backend=tracer.backend,
    )
    (outcome,) = report.outcomes
    row = outcome.row()
    assert row["relevance"] == 0.8 and row["skill_use"] is None
    assert row["retrieval_groundedness"] is None and row["sandbox_verification"] is None
    assert row["trace_efficiency"] == 1.0 and "relevance_error" not in row
    run = tracer.backend.get_run(report.run_id)
    assert run.data.metrics["relevance"] == 0.8
    assert "skill_use" not in run.data.metrics  # not applicable: never averaged
    raw = tracer.backend._get_trace(outcome.result.trace_id)
    feedback = {a.name: a for a in raw.info.assessments}
    assert {"fleet_metric", "relevance", "trace_efficiency"} <= set(feedback)
    assert "skill_use" not in feedback
    assert feedback["relevance"].rationale.startswith("The answer states the revenue total")


async def test_run_eval_reports_a_rejected_rationale_as_an_error(tracer: MlflowTracer) -> None:
    judge = DspyJudge(scripted_lm(rules={"relevance_score": relevance_reply(rationale="TODO")}))
    answer_judge.relevance = judge.relevance  # type: ignore[attr-defined]
    try:
        report = await run_eval(FakeRuntime(tracer, "42"), [CASE], judge=answer_judge)
    finally:
        del answer_judge.relevance  # type: ignore[attr-defined]
    row = report.outcomes[0].row()
    assert row["relevance"] is None and "rationale rejected" in row["relevance_error"]
    assert "relevance" not in report.metrics()
