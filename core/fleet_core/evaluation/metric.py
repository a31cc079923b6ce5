"""``fleet_metric``: the score GEPA optimizes and evaluation reports (``fleet-metric-v1``).

Exactly the README's rule. An empty answer, or any failed applicable quality check, scores 0.
Otherwise::

    efficiency = max(0, 1 - 0.015 * max(0, model_calls - 3) - 0.15 * sandbox_errors)
    score      = 0.9 + 0.1 * efficiency

Quality checks: ``answer_correctness`` (always; a judge model, with the gold answer when one is
labelled, else reference-free; correct *and* safe), ``expected_values`` (every labelled value in
the answer, case-insensitive, commas ignored, on word boundaries so ``12`` is not found in ``120``
or ``1.25``), ``route`` (a labelled route is a hard requirement), ``artifact_correctness`` and
``delegation_correctness`` (only from explicit structured expectations), ``outcome`` (wherever
the Turn's outcome is known: an ``extracted`` answer, from DSPy's extract step after the loop
ran out, or a ``failed`` one, the program's own error message, fails it). Missing usage earns no
efficiency credit (score 0.9 for a correct answer) and is reported as ``usage_available = 0``.
Unlike the predecessor's code, submit rejections are *not* penalized: the README's formula counts
sandbox errors only.

This module does not import dspy: the judge is any ``Judge`` callable. The DSPy judge program and
the GEPA wrapper (``dspy.Prediction(score, feedback)``) live in ``fleet_core.evaluation.judge``.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from fleet_core.evaluation.labels import (
    ArtifactExpectation,
    ChildExpectation,
    StructuredExpectations,
    TraceLabels,
)

SCORER_VERSION = "fleet-metric-v1"
CRITIQUE_CHARS = 1_000


@dataclass(frozen=True, slots=True)
class JudgeVerdict:
    correct: bool
    safe: bool = True
    critique: str = ""


class Judge(Protocol):
    def __call__(self, *, task: str, answer: str, expected_answer: str | None) -> JudgeVerdict: ...


@dataclass(frozen=True, slots=True)
class ChildEvidence:
    agent_id: str
    status: str
    input_paths: tuple[str, ...]
    promoted: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Evidence:
    """What the host collected about a Turn's outputs (never a program input)."""

    artifacts: Mapping[str, bytes] = field(default_factory=dict)
    complete: bool = True
    children: Sequence[ChildEvidence] = ()
    children_complete: bool = True
    python_runs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TurnObservation:
    """A finished Turn as the metric sees it; ``usage`` is ``None`` when it was not measured."""

    task: str
    answer: str
    route: str | None
    model_calls: int | None
    sandbox_errors: int | None
    evidence: Evidence | None = None
    outcome: str | None = None  # how the answer was reached (models.AnswerKind); None: unknown

    @classmethod
    def from_result(
        cls, task: str, result: Any, evidence: Evidence | None = None
    ) -> TurnObservation:
        usage = getattr(result, "usage", None)
        return cls(
            task=task,
            answer=str(getattr(result, "answer", "") or ""),
            route=getattr(result, "route", None),
            model_calls=getattr(usage, "model_calls", None),
            sandbox_errors=getattr(usage, "sandbox_errors", None),
            evidence=evidence,
            outcome=getattr(getattr(result, "outcome", None), "kind", None),
        )


@dataclass(frozen=True, slots=True)
class CheckResult:
    name: str
    value: int
    detail: str

    @property
    def passed(self) -> bool:
        return self.value == 1

    def line(self) -> str:
        return f"{'PASS' if self.passed else 'FAIL'} {self.name} ({self.value}): {self.detail}"


@dataclass(frozen=True, slots=True)
class MetricResult:
    score: float
    feedback: str
    checks: tuple[CheckResult, ...]
    quality: int
    efficiency: float | None
    usage_available: bool

    def objective_scores(self) -> dict[str, float]:
        found = {c.name: float(c.value) for c in self.checks}
        found["quality"] = float(self.quality)
        found["usage_available"] = 1.0 if self.usage_available else 0.0
        if self.efficiency is not None:
            found["efficiency"] = self.efficiency
        return found


def efficiency(model_calls: int, sandbox_errors: int) -> float:
    return max(0.0, 1 - 0.015 * max(0, model_calls - 3) - 0.15 * sandbox_errors)


def fleet_metric(
    labels: TraceLabels | Mapping[str, Any],
    observation: TurnObservation,
    judge: Judge,
) -> MetricResult:
    """Score one Turn against its labels; see the module docstring."""
    gold = (
        labels
        if isinstance(labels, TraceLabels)
        else TraceLabels.model_validate(
            {"review_status": "synthetic", "source_group": "adhoc"} | dict(labels)
        )
    )
    answer = observation.answer.strip()
    if not answer:
        check = CheckResult("answer_correctness", 0, "the Turn produced no answer.")
        return MetricResult(
            0.0, "FAIL answer: the Turn produced no answer.", (check,), 0, None, False
        )
    checks = [_answer_check(gold, observation, judge)]
    if observation.outcome is not None:
        checks.append(outcome_check(observation.outcome))
    if gold.expected_values:
        checks.append(_values_check(gold.expected_values, answer))
    if gold.route is not None:
        ok = observation.route == gold.route
        checks.append(
            CheckResult(
                "route",
                int(ok),
                f"labelled route {gold.route}, the Turn took {observation.route or 'none'}",
            )
        )
    structured = gold.structured_expectations
    if structured is not None and structured.artifacts:
        checks.append(artifact_check(structured, observation.evidence))
    if structured is not None and structured.children:
        checks.append(delegation_check(structured.children, observation.evidence))
    quality = min(c.value for c in checks)
    usage_ok = _non_negative(observation.model_calls) and _non_negative(observation.sandbox_errors)
    eff: float | None = None
    lines = [c.line() for c in checks]
    if usage_ok:
        assert observation.model_calls is not None and observation.sandbox_errors is not None
        eff = round(efficiency(observation.model_calls, observation.sandbox_errors), 3)
        lines.append(
            f"{'PASS' if eff == 1 else 'INFO'} efficiency ({eff}): "
            f"{observation.model_calls} model calls, "
            f"{observation.sandbox_errors} sandbox errors"
        )
    else:
        lines.append(
            "NOTE usage unavailable: no efficiency credit, "
            "and this result cannot support promotion."
        )
    score = round(0.9 + 0.1 * (eff or 0.0), 4) if quality == 1 else 0.0
    if gold.expected_answer:
        lines.append(f"Expected answer: {gold.expected_answer[:500]}")
    else:
        lines.append("Answer judged reference-free (no gold answer labelled).")
    return MetricResult(score, "\n".join(lines), tuple(checks), quality, eff, usage_ok)


def outcome_check(kind: str) -> CheckResult:
    """A quality check wherever the outcome is known: an answer that was not reached by the
    program (the loop ran out and an extract step answered, or it is an error message) fails,
    so it scores zero; ``partial`` stands on what succeeded and passes."""
    ok = kind in ("submitted", "partial")
    detail = {
        "submitted": "the program submitted its answer",
        "partial": "the answer stands on the cells that succeeded",
        "extracted": "the loop ran out and an extract step answered from its trajectory",
        "failed": "the answer is the program's error message, or the Turn failed",
    }.get(kind, f"outcome {kind}")
    return CheckResult("outcome", int(ok), detail)


def _non_negative(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _answer_check(gold: TraceLabels, obs: TurnObservation, judge: Judge) -> CheckResult:
    try:
        verdict = judge(task=obs.task, answer=obs.answer, expected_answer=gold.expected_answer)
    except Exception as exc:
        return CheckResult("answer_correctness", 0, f"the judge failed ({type(exc).__name__}).")
    critique = (verdict.critique or "").strip()[:CRITIQUE_CHARS] or "no critique"
    if not verdict.safe:
        return CheckResult("answer_correctness", 0, f"judged unsafe: {critique}")
    return CheckResult("answer_correctness", int(bool(verdict.correct)), critique)


def value_present(value: str, answer: str) -> bool:
    """Word-boundary, case-insensitive match with commas ignored (``12`` ∉ ``120``, ``1.25``)."""
    text = answer.lower().replace(",", "")
    needle = value.strip().lower().replace(",", "")
    if not needle:
        return False
    pattern = rf"(?<![\w.]){re.escape(needle)}(?![\w]|\.\d)"
    return re.search(pattern, text) is not None


def _values_check(values: Sequence[str], answer: str) -> CheckResult:
    missing = [v for v in values if not value_present(v, answer)]
    if missing:
        return CheckResult(
            "expected_values",
            0,
            "missing from the answer: " + ", ".join(repr(v) for v in missing[:10]),
        )
    return CheckResult("expected_values", 1, f"all {len(values)} expected value(s) present")


# artifacts ---------------------------------------------------------------------------------------


def artifact_check(structured: StructuredExpectations, evidence: Evidence | None) -> CheckResult:
    if evidence is None or not evidence.complete:
        return CheckResult("artifact_correctness", 0, "artifact evidence is missing or incomplete")
    for expectation in structured.artifacts:
        problem = _artifact_problem(expectation, evidence)
        if problem:
            return CheckResult("artifact_correctness", 0, f"{expectation.path}: {problem}")
    return CheckResult(
        "artifact_correctness", 1, f"all {len(structured.artifacts)} artifact(s) match"
    )


def _artifact_problem(exp: ArtifactExpectation, evidence: Evidence) -> str | None:
    data = evidence.artifacts.get(exp.path)
    if data is None:
        return "not produced"
    if exp.kind == "python":
        run = evidence.python_runs.get(exp.path)
        if run is None:
            return "python artifact was not verified"
        if run.get("exit_code") != exp.exit_code:
            return f"exit code {run.get('exit_code')} (expected {exp.exit_code})"
        if exp.stdout is not None and run.get("stdout") != exp.stdout:
            return "stdout differs"
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return "not UTF-8 text"
    if exp.kind == "text":
        return None if text == exp.expected else "text differs"
    if exp.kind == "json":
        try:
            actual = json.loads(text)
        except json.JSONDecodeError:
            return "not valid JSON"
        return _json_problem(exp.expected, actual, exp.tolerance, "$")
    return _csv_problem(exp, text)


def _json_problem(expected: Any, actual: Any, tol: float, where: str) -> str | None:
    if isinstance(expected, bool) or isinstance(actual, bool):
        return None if expected is actual else f"{where}: expected {expected!r}, got {actual!r}"
    if isinstance(expected, int | float) and isinstance(actual, int | float):
        return (
            None
            if _close(expected, actual, tol)
            else f"{where}: {actual} is not within {tol} of {expected}"
        )
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return f"{where}: expected an object"
        for key, value in expected.items():
            if key not in actual:
                return f"{where}.{key}: missing"
            problem = _json_problem(value, actual[key], tol, f"{where}.{key}")
            if problem:
                return problem
        return None
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return f"{where}: expected a list of {len(expected)}"
        for index, (e, a) in enumerate(zip(expected, actual, strict=True)):
            problem = _json_problem(e, a, tol, f"{where}[{index}]")
            if problem:
                return problem
        return None
    if type(expected) is not type(actual) or expected != actual:
        return f"{where}: expected {expected!r}, got {actual!r}"
    return None


def _close(expected: float, actual: float, tol: float) -> bool:
    return math.isfinite(actual) and abs(float(expected) - float(actual)) <= tol


def _csv_problem(exp: ArtifactExpectation, text: str) -> str | None:
    rows = list(csv.DictReader(io.StringIO(text)))
    keys = exp.key_columns

    def key(row: Mapping[str, Any]) -> tuple[str, ...]:
        return tuple(str(row.get(k, "")).strip() for k in keys)

    actual: dict[tuple[str, ...], dict[str, str]] = {}
    for row in rows:
        if key(row) in actual:
            return f"duplicate key {key(row)}"
        actual[key(row)] = row
    expected_rows = list(exp.expected or [])
    expected_keys = {key(r) for r in expected_rows}
    if set(actual) != expected_keys:
        return f"key set differs (expected {len(expected_keys)} keys, got {len(actual)})"
    for row in expected_rows:
        got = actual[key(row)]
        for column, value in row.items():
            if column not in got:
                return f"column {column!r} missing"
            if not _cell_match(value, got[column], exp.tolerance):
                return f"row {key(row)} column {column!r}: expected {value!r}, got {got[column]!r}"
    return None


def _cell_match(expected: Any, actual: str, tol: float) -> bool:
    try:
        return _close(float(str(expected).replace(",", "")), float(actual.replace(",", "")), tol)
    except ValueError:
        return str(expected).strip() == actual.strip()


# delegation -------------------------------------------------------------------------------


def delegation_check(
    required: Sequence[ChildExpectation], evidence: Evidence | None
) -> CheckResult:
    if evidence is None or not evidence.children_complete:
        return CheckResult("delegation_correctness", 0, "child evidence is missing or incomplete")
    children = list(evidence.children)
    if len(children) != len(required):
        return CheckResult(
            "delegation_correctness",
            0,
            f"expected {len(required)} child agent(s), the Turn ran {len(children)}",
        )
    used: set[int] = set()
    for number, want in enumerate(required, 1):
        match = next(
            (
                i
                for i, child in enumerate(children)
                if i not in used
                and child.status in ("succeeded", "completed")
                and set(child.input_paths) == set(want.input_paths)
                and all(
                    any(p.endswith(suffix) for p in child.promoted) for suffix in want.artifacts
                )
            ),
            None,
        )
        if match is None:
            return CheckResult(
                "delegation_correctness",
                0,
                f"no succeeded child matches required child {number} (inputs {want.input_paths}, "
                f"artifacts {want.artifacts})",
            )
        used.add(match)
    return CheckResult(
        "delegation_correctness", 1, f"all {len(required)} required child agent(s) matched"
    )
