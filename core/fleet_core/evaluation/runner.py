"""``fleet-lsp eval run``: labelled cases as fresh Turns, scored, reported as an MLflow run.

For each case: a fresh Session ``eval-<run>-<case>``, its files written, one Turn through
``runtime.run_turn`` (idempotency key = case id, replay-captured so labelled cases can become
optimization data), ``fleet_metric`` with the judge, and, when a backend is given, the case's
labels and per-check feedback written on the Turn's trace. Labels go through ``LabelService`` when
the runtime has a store (``FleetRuntime`` does): MLflow expectations *and* the
``fleet_trace_labels`` table, with optimization eligibility. Then one MLflow run in the
*evaluation* experiment with the mean of every objective, a per-case table and links to the
traces. The runtime should be opened with a tracer for the ``evaluation`` scope
(``create_tracer(config, scope="evaluation")``) so the Turn traces land in the same experiment.

Broader suite (diagnostics, not GEPA objectives; ``fleet_core.evaluation.suite``), each a value in
0..1 or ``None`` when not applicable: ``relevance`` (the relevance judge, when one is given:
``relevance_judge=`` or ``judge.relevance`` as on ``DspyJudge``), ``retrieval_groundedness``
(only when the trace has ``RETRIEVER`` spans: never, in this engine; judged by
``judge.groundedness``), ``sandbox_verification`` (a code route ended with at least one successful
task cell), ``skill_use`` (deterministic, only when the trace shows Skill activity) and
``trace_efficiency`` (the formula over trace counters). Each applicable value is written as a
feedback on the case's trace (with its rationale), averaged into the run's metrics, and shown in
the per-case table; a judge error (e.g. a rejected placeholder rationale) leaves the value
``None`` and sets ``<name>_error`` in the row.
"""

from __future__ import annotations

import functools
import statistics
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio.to_thread

from fleet_core.evaluation.datasets import EvalCase
from fleet_core.evaluation.labels import LabelService, LabelUpdate
from fleet_core.evaluation.metric import (
    Judge,
    MetricResult,
    TurnObservation,
    efficiency,
    fleet_metric,
)
from fleet_core.evaluation.suite import (
    GroundednessJudge,
    RelevanceJudge,
    SuiteScore,
    relevance,
    retrieval_groundedness,
    skill_use,
)
from fleet_core.models import TurnRequest, TurnResult

OK_OUTCOMES = ("ok", "submitted")
NOT_ERRORS = (*OK_OUTCOMES, "submit_rejected")  # an ungrounded SUBMIT refused is no sandbox error
SUITE_KEYS = (
    "relevance",
    "retrieval_groundedness",
    "sandbox_verification",
    "skill_use",
    "trace_efficiency",
)
SYNTHETIC_REVIEWER = "synthetic-generator"


class EvalRuntime(Protocol):
    async def new_session(self, session_id: str | None = None, mode: str | None = None) -> Any: ...

    async def write_file(self, session_id: str, path: str, data: bytes) -> Any: ...

    async def run_turn(self, request: TurnRequest) -> TurnResult: ...


@dataclass(slots=True)
class CaseOutcome:
    case_id: str
    session_id: str
    result: TurnResult
    metric: MetricResult
    suite: dict[str, float | None] = field(default_factory=dict)
    labels: dict[str, Any] = field(default_factory=dict)
    # why each suite value is what it is (judge rationales, deterministic checks); errors apart
    suite_notes: dict[str, str] = field(default_factory=dict)
    suite_errors: dict[str, str] = field(default_factory=dict)

    def row(self) -> dict[str, Any]:
        """One table row; every suite key is present (``None``: not applicable or errored)."""
        return {
            "case_id": self.case_id,
            "status": self.result.status,
            "route": self.result.route,
            "trace_id": self.result.trace_id,
            "fleet_metric": self.metric.score,
            **{f"fleet_metric.{k}": v for k, v in self.metric.objective_scores().items()},
            **{k: self.suite.get(k) for k in SUITE_KEYS},
            **{k: v for k, v in self.suite.items() if k not in SUITE_KEYS},
            **{f"{k}_error": v for k, v in self.suite_errors.items()},
            "feedback": self.metric.feedback,
        }


@dataclass(slots=True)
class EvalReport:
    run_id: str | None
    outcomes: list[CaseOutcome]

    def metrics(self) -> dict[str, float]:
        found: dict[str, list[float]] = {}
        for outcome in self.outcomes:
            for key, value in outcome.row().items():
                if isinstance(value, int | float) and not isinstance(value, bool):
                    found.setdefault(key, []).append(float(value))
        return {key: round(statistics.fmean(values), 4) for key, values in found.items()}


def suite_from_trace(view: Any, result: TurnResult) -> dict[str, float | None]:
    """Deterministic diagnostics from a stored ``TraceView`` (None = not applicable)."""
    return {k: (s.value if s else None) for k, s in _trace_suite(view, result).items()}


def _trace_suite(view: Any, result: TurnResult) -> dict[str, SuiteScore | None]:
    if view is None:
        return {}
    cells = [c for c in view.cells() if getattr(c, "phase", None) != "bootstrap"]
    errors = sum(1 for c in cells if c.outcome not in NOT_ERRORS)
    calls = sum(len(a.lm_calls) for a in view.agents()) + len(view.triage_lm_calls)
    code_route = result.route in ("rlm", "flex")
    verified = sum(1 for c in cells if c.outcome in OK_OUTCOMES)
    return {
        "trace_efficiency": SuiteScore(
            round(efficiency(calls, errors), 3),
            f"{calls} model call(s), {errors} sandbox error(s) in the trace",
        ),
        "sandbox_verification": SuiteScore(
            1.0 if verified else 0.0,
            f"{verified} of {len(cells)} task cell(s) succeeded on the {result.route} route",
        )
        if code_route
        else None,
        "skill_use": skill_use(view),
    }


def score_suite(
    view: Any,
    task: str,
    result: TurnResult,
    *,
    relevance_judge: RelevanceJudge | None = None,
    groundedness_judge: GroundednessJudge | None = None,
) -> dict[str, SuiteScore | None]:
    """Every suite scorer for one Turn (``None`` = not applicable); see the module docstring.

    Relevance needs only the answer; the rest need the stored trace (``view``)."""
    answer = str(result.answer or "")
    scores: dict[str, SuiteScore | None] = {"relevance": relevance(task, answer, relevance_judge)}
    scores |= _trace_suite(view, result)
    scores["retrieval_groundedness"] = retrieval_groundedness(
        view, task, answer, groundedness_judge
    )
    return scores


async def run_eval(
    runtime: EvalRuntime,
    cases: Sequence[EvalCase],
    *,
    judge: Judge,
    backend: Any | None = None,
    limit: int | None = None,
    run_name: str | None = None,
    on_case: Callable[[CaseOutcome], None] | None = None,
    record_replay: bool = True,
    store: Any | None = None,
    relevance_judge: RelevanceJudge | None = None,
    groundedness_judge: GroundednessJudge | None = None,
) -> EvalReport:
    """Run, score and (with a backend) record every case; see the module docstring.

    ``store`` defaults to ``runtime.store``; without one, labels are written to MLflow only.
    The suite judges default to ``judge.relevance`` / ``judge.groundedness`` when the judge has
    them (``DspyJudge`` does)."""
    store = store if store is not None else getattr(runtime, "store", None)
    relevance_judge = relevance_judge or getattr(judge, "relevance", None)
    groundedness_judge = groundedness_judge or getattr(judge, "groundedness", None)
    run_tag = uuid.uuid4().hex[:8]
    outcomes: list[CaseOutcome] = []
    for case in list(cases)[: limit or None]:
        session_id = f"eval-{run_tag}-{case.case_id}"[:64]
        await runtime.new_session(session_id)
        for path, data in sorted(case.files.items()):
            await runtime.write_file(session_id, path, data)
        result = await runtime.run_turn(
            TurnRequest(
                session_id=session_id,
                task=case.task,
                idempotency_key=case.case_id,
                record_replay=record_replay,
            )
        )
        observation = TurnObservation.from_result(case.task, result)
        metric = await anyio.to_thread.run_sync(fleet_metric, case.labels, observation, judge)
        view = None
        if backend is not None and result.trace_id:
            view = await anyio.to_thread.run_sync(backend.load_trace, result.trace_id)
        scores = await anyio.to_thread.run_sync(
            functools.partial(
                score_suite,
                view,
                case.task,
                result,
                relevance_judge=relevance_judge,
                groundedness_judge=groundedness_judge,
            )
        )
        outcome = CaseOutcome(
            case.case_id,
            session_id,
            result,
            metric,
            {k: (s.value if s else None) for k, s in scores.items()},
            case.labels.wire(),
            {k: s.rationale for k, s in scores.items() if s is not None and not s.error},
            {k: s.rationale for k, s in scores.items() if s is not None and s.error},
        )
        outcomes.append(outcome)
        if on_case is not None:
            on_case(outcome)
    report = EvalReport(None, outcomes)
    if backend is not None:
        report.run_id = await anyio.to_thread.run_sync(
            _record, backend, report, run_name or f"fleet-eval-{run_tag}", store
        )
    return report


def _record(backend: Any, report: EvalReport, name: str, store: Any | None = None) -> str:
    run_id: str = backend.start_run("evaluation", name, tags={"fleet.scorer": "fleet-metric-v1"})
    traces = []
    for outcome in report.outcomes:
        trace_id = outcome.result.trace_id
        if not trace_id:
            continue
        traces.append(trace_id)
        if store is not None:
            labels = dict(outcome.labels)
            if labels.get("review_status") == "synthetic" and labels.get("reviewer") == "human":
                labels["reviewer"] = SYNTHETIC_REVIEWER
            update = LabelUpdate(**labels)
            LabelService(store, backend).label_sync(trace_id, update)
        else:
            backend.log_labels(
                trace_id, outcome.labels, source_type="CODE", source_id=SYNTHETIC_REVIEWER
            )
        backend.log_feedback(
            trace_id,
            "fleet_metric",
            outcome.metric.score,
            rationale=outcome.metric.feedback,
            run_id=run_id,
        )
        for key, value in outcome.suite.items():
            if value is not None:
                backend.log_feedback(
                    trace_id, key, value, rationale=outcome.suite_notes.get(key), run_id=run_id
                )
    backend.log_run(
        run_id,
        params={"cases": len(report.outcomes)},
        metrics=report.metrics(),
        tables={"eval_results.json": [o.row() for o in report.outcomes]},
    )
    if traces:
        backend.link_traces(run_id, traces)
    backend.end_run(run_id)
    return run_id
