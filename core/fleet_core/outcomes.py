"""How a Turn's answer was reached, said honestly (``models.AnswerOutcome``).

A Turn that completed is ``submitted`` only when its program or RLM submitted the answer and
nothing failed on the way. The loop running out (DSPy's extract step answered from the
trajectory) is ``extracted``; failed cells or children behind an answer that stands on the rest,
or the host answering from what a failing program left, or an answer that leaves one of the
task's ``@name[...]`` tags unfilled (its placeholder printed as it stands, ``format_unmet``), is
``partial``; an answer that is the
program's own error message (it caught an exception and printed it, or printed that a column or
file does not exist) is ``failed``, as is a Turn that failed or was cancelled.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from fleet_core.models import AnswerOutcome, OutcomeReason, TurnError

Reached = Literal["submitted", "extracted", "fallback"]
"""How the engine's route produced the answer (``EngineResult.reached``)."""

_ERROR_LINE = re.compile(
    r"""^\s*(?:
        traceback\ \(most\ recent\ call\ last\)
      | (?:[A-Z]\w*(?:Error|Exception)|KeyError|IndexError)\b\s*[:(]
      | error\s*[:!-]
      | an\ error\ occurred
    )""",
    re.IGNORECASE | re.VERBOSE,
)
_MISSING = re.compile(
    r"""\b(?:does\ not\ exist|doesn't\ exist|do\ not\ exist|not\ found|no\ such\ (?:file|column)
      |could\ not\ (?:find|be\ found|read|open|parse)|cannot\ (?:find|be\ found|read|open)
      |is\ not\ (?:in|a\ column)
      |not\ (?:in|present\ in)\ the\ (?:data|dataframe|columns|file))\b""",
    re.IGNORECASE | re.VERBOSE,
)
_SUBJECT = re.compile(r"\b(?:column|file|key|field|path|directory|sheet|dataset)s?\b", re.I)
EXTRACT_FORCED = "Extract forced final output"
"""dspy.RLM's ``final_reasoning`` when its loop ran out and the extract step answered."""


@dataclass(frozen=True, slots=True)
class RouteAnswer:
    """What a code route answered, and how (``fleet_core.outcomes.Reached``)."""

    answer: str
    note: str = ""
    reached: Reached = "submitted"
    detail: str = ""

    @classmethod
    def of(cls, prediction: Any) -> RouteAnswer:
        """From an RLM's or Flex's prediction: extracted when the loop ran out."""
        answer = prediction.answer
        extracted = getattr(prediction, "final_reasoning", None) == EXTRACT_FORCED
        return cls(
            answer=answer if isinstance(answer, str) else str(answer),
            note=str(getattr(prediction, "learned_skill_note", "") or ""),
            reached="extracted" if extracted else "submitted",
        )


ERROR_ANSWER_CHARS = 400
"""A longer answer is taken as an answer that mentions a problem, not as an error message."""


@dataclass(frozen=True, slots=True)
class TurnFacts:
    """What the Turn service knows when it classifies a finished Turn."""

    reached: Reached
    answer: str
    sandbox_errors: int = 0
    children_failed: int = 0
    detail: str = ""  # what the route said about how it answered (e.g. the last failed step)
    unfilled: tuple[str, ...] = ()  # the task's @name[...] tags the answer left unfilled


def error_answer(answer: str) -> str | None:
    """The line that makes ``answer`` an error message rather than an answer, if it is one."""
    text = answer.strip()
    if not text or len(text) > ERROR_ANSWER_CHARS:
        return None
    first = text.splitlines()[0]
    missing = _MISSING.search(text) and _SUBJECT.search(text)
    if _ERROR_LINE.search(first) or (len(text.splitlines()) <= 3 and missing):
        return first[:200]
    return None


def completed_outcome(facts: TurnFacts) -> AnswerOutcome:
    """The outcome of a Turn that completed (see the module docstring)."""
    reasons: list[OutcomeReason] = []
    if facts.reached == "extracted":
        reasons.append(
            OutcomeReason(
                kind="iterations_exhausted",
                detail="the RLM loop reached its iteration limit without submitting; an "
                "extract step answered from its trajectory",
            )
        )
    elif facts.reached == "fallback":
        reasons.append(
            OutcomeReason(
                kind="fallback_answer",
                detail=facts.detail
                or "no program fully succeeded; the answer comes from what the last one left",
            )
        )
    if facts.sandbox_errors:
        reasons.append(
            OutcomeReason(
                kind="sandbox_errors",
                count=facts.sandbox_errors,
                detail=f"{_count(facts.sandbox_errors, 'sandbox cell')} failed",
            )
        )
    if facts.children_failed:
        reasons.append(
            OutcomeReason(
                kind="child_failed",
                count=facts.children_failed,
                detail=f"{_count(facts.children_failed, 'child agent')} failed",
            )
        )
    if facts.unfilled:
        reasons.append(
            OutcomeReason(
                kind="format_unmet",
                count=len(facts.unfilled),
                detail="the answer leaves the task's "
                + " ".join(f"@{t}[...]" for t in facts.unfilled)
                + " without a computed value",
            )
        )
    said = error_answer(facts.answer)
    if said is not None:
        reasons.insert(
            0,
            OutcomeReason(kind="error_answer", detail=f"the answer is an error message: {said}"),
        )
        return AnswerOutcome(kind="failed", reasons=reasons)
    if facts.reached == "extracted":
        return AnswerOutcome(kind="extracted", reasons=reasons)
    return AnswerOutcome(kind="partial" if reasons else "submitted", reasons=reasons)


def failed_outcome(error: TurnError, *, sandbox_errors: int = 0) -> AnswerOutcome:
    """The outcome of a Turn that failed or was cancelled."""
    reasons = [OutcomeReason(kind="turn_failed", detail=error.message.splitlines()[0][:300])]
    if sandbox_errors:
        reasons.append(
            OutcomeReason(
                kind="sandbox_errors",
                count=sandbox_errors,
                detail=f"{_count(sandbox_errors, 'sandbox cell')} failed",
            )
        )
    return AnswerOutcome(kind="failed", reasons=reasons)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"
