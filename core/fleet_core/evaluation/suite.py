"""The broader evaluation suite: diagnostics next to ``fleet_metric`` (not GEPA objectives).

Every scorer returns a :class:`SuiteScore` (a value in 0..1 and a rationale) or ``None`` when it is
not applicable to the Turn. ``None`` is never averaged: a run's mean covers the applicable cases.

- ``relevance`` (judge): does the answer address the task? Asked of a :class:`RelevanceJudge`
  (``DspyRelevanceJudge`` in ``fleet_core.evaluation.judge``); an empty answer scores 0 without a
  call. Applicable whenever a relevance judge is given.
- ``retrieval_groundedness`` (judge): applicable only when the trace has retrieval spans (MLflow
  span type ``RETRIEVER``; this engine emits none today, so it is ``None`` for every fleet Turn).
  A :class:`GroundednessJudge` says whether the answer is supported by the retrieved documents.
- ``skill_use`` (deterministic, :func:`skill_use`): applicable only when the trace shows Skill
  activity; see that function for the exact rule.
- ``sandbox_verification`` and ``trace_efficiency`` are computed in ``runner.suite_from_trace``.

Judges must justify their verdicts: an empty or placeholder rationale (``check_rationale``) is
rejected, and the scorer reports an error (value ``None``, ``error=True``) instead of a score.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

RATIONALE_CHARS = 1_000
MIN_RATIONALE_WORDS = 3
MAX_SKILL_READS = 8
SKILL_READ_TOOLS = frozenset({"use_skill", "read_skill_reference"})
SKILL_RUN_TOOLS = frozenset({"run_skill_script"})
SKILL_LIST_TOOLS = frozenset({"list_skills"})
SKILL_TOOLS = SKILL_READ_TOOLS | SKILL_RUN_TOOLS | SKILL_LIST_TOOLS
RETRIEVER_SPAN_TYPE = "RETRIEVER"
GROUNDING_CONTEXT_CHARS = 20_000

_PLACEHOLDER = re.compile(
    r"^\W*(placeholder|todo|tbd|tba|fixme|xxx+|n/?a|none|null|nil|rationale|reason|"
    r"lorem ipsum.*|\.\.\.|…)\W*$",
    re.IGNORECASE,
)
_PLACEHOLDER_START = re.compile(r"^\W*(placeholder|todo|tbd|fixme)\b", re.IGNORECASE)
# Skill activity inside sandbox code (bootstrap cells excluded): the run_skill_script helper is a
# sandbox function (no tool span), and reading skills/<name>/... files directly is a read.
_RUN_IN_CODE = re.compile(r"\brun_skill_script\(\s*(?:name\s*=\s*)?(?:['\"]([^'\"]+)['\"])?")
_SKILL_PATH_IN_CODE = re.compile(r"['\"](?:\./)?skills/([A-Za-z0-9][\w.-]*)/")


class RationaleRejected(ValueError):
    """A judge returned an empty or placeholder rationale."""


def check_rationale(text: Any) -> str:
    """The rationale, stripped and bounded; raises ``RationaleRejected`` when it is empty, a
    placeholder (``TODO``, ``TBD``, ``placeholder``, ``N/A``, ``...``) or under three words."""
    rationale = " ".join(str(text or "").split())[:RATIONALE_CHARS]
    if not rationale:
        raise RationaleRejected("the judge gave no rationale")
    if _PLACEHOLDER.match(rationale) or _PLACEHOLDER_START.match(rationale):
        raise RationaleRejected(f"placeholder rationale {rationale[:40]!r}")
    if len(re.findall(r"\w+", rationale)) < MIN_RATIONALE_WORDS:
        raise RationaleRejected(f"rationale too short to justify a verdict: {rationale[:40]!r}")
    return rationale


@dataclass(frozen=True, slots=True)
class SuiteVerdict:
    """A suite judge's answer: pass/fail, a score in 0..1 and the reason."""

    passed: bool
    score: float
    rationale: str


class RelevanceJudge(Protocol):
    def __call__(self, *, task: str, answer: str) -> SuiteVerdict: ...


class GroundednessJudge(Protocol):
    def __call__(self, *, task: str, answer: str, context: str) -> SuiteVerdict: ...


@dataclass(frozen=True, slots=True)
class SuiteScore:
    """One suite value: ``value`` in 0..1, or ``None`` with ``error`` when the scorer failed."""

    value: float | None
    rationale: str
    error: bool = False


def _judged(call: Any, **kwargs: Any) -> SuiteScore:
    try:
        verdict = call(**kwargs)
        rationale = check_rationale(verdict.rationale)
        score = float(verdict.score)
    except RationaleRejected as exc:
        return SuiteScore(None, f"judge rationale rejected: {exc}", error=True)
    except Exception as exc:
        return SuiteScore(None, f"the judge failed ({type(exc).__name__})", error=True)
    if score != score:  # NaN
        return SuiteScore(None, "the judge returned no score", error=True)
    score = min(1.0, max(0.0, score))
    if not verdict.passed:
        score = min(score, 0.5)  # a failed verdict never reads as a pass
    return SuiteScore(round(score, 3), rationale)


def relevance(task: str, answer: str, judge: RelevanceJudge | None) -> SuiteScore | None:
    """The relevance judge's score; 0 for an empty answer; ``None`` without a judge."""
    if judge is None:
        return None
    if not answer.strip():
        return SuiteScore(0.0, "the Turn produced no answer")
    return _judged(judge, task=task, answer=answer)


# retrieval ---------------------------------------------------------------------------------------


def retrieval_groundedness(
    view: Any, task: str, answer: str, judge: GroundednessJudge | None
) -> SuiteScore | None:
    """Applicable only when the trace has retrieval spans (``TraceView.retrievals()``).

    The judge sees the retrieved documents (bounded) and says whether the answer is supported by
    them. An empty answer scores 0; retrieval spans with no judge report an error (applicable but
    unscored)."""
    retrievals = list(view.retrievals()) if view is not None else []
    if not retrievals:
        return None
    if not answer.strip():
        return SuiteScore(0.0, "the Turn produced no answer")
    documents = [doc for r in retrievals for doc in r.documents]
    if not documents:
        return SuiteScore(0.0, f"{len(retrievals)} retrieval(s) returned no documents")
    if judge is None:
        return SuiteScore(None, "retrieval spans exist but no judge was given", error=True)
    context = "\n\n".join(f"[document {i}]\n{doc}" for i, doc in enumerate(documents, 1))
    return _judged(judge, task=task, answer=answer, context=context[:GROUNDING_CONTEXT_CHARS])


# skills ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SkillEvent:
    kind: str  # "list", "read" or "run"
    skill: str | None  # the Skill's name when the trace shows it
    position: int  # index of the sandbox cell the event belongs to (tool spans: the last cell)
    source: str  # "tool <name>" or "cell <n>"


def skill_events(view: Any) -> list[SkillEvent]:
    """Skill activity in time order, every agent included (children at their spawn position).

    - tool spans named ``list_skills`` (list), ``use_skill`` / ``read_skill_reference`` (read) and
      ``run_skill_script`` (run; the engine runs it inside the sandbox, but an engine exposing it
      as a tool is counted the same way);
    - non-bootstrap cells whose code calls ``run_skill_script(`` (run, one per call), and cells
      whose code names a path under ``skills/<name>/`` outside such a call (read, one per Skill
      per cell).

    Tool calls made from a cell start after the cell does, so a tool event carries the position of
    the cell that was running: a read and a run in the same cell count as read-before-use."""
    events: list[SkillEvent] = []
    if view is None or view.root is None:
        return events
    position = -1
    run_tools = any(
        t.tool in SKILL_RUN_TOOLS for a in view.agents() for t in getattr(a, "tool_calls", [])
    )
    for step in _walk(view.root):
        kind = type(step).__name__
        if kind == "CellView":
            if getattr(step, "phase", None) == "bootstrap":
                continue
            position += 1
            code = str(step.code or "")
            if not run_tools:
                for match in _RUN_IN_CODE.finditer(code):
                    events.append(SkillEvent("run", match.group(1), position, f"cell {position}"))
            stripped = _RUN_IN_CODE.sub("", code)
            for skill in dict.fromkeys(_SKILL_PATH_IN_CODE.findall(stripped)):
                events.append(SkillEvent("read", skill, position, f"cell {position}"))
        elif kind == "ToolCallView" and step.tool in SKILL_TOOLS:
            name = _skill_name(step.inputs)
            where = max(position, 0)
            if step.tool in SKILL_LIST_TOOLS:
                events.append(SkillEvent("list", None, where, f"tool {step.tool}"))
            elif step.tool in SKILL_READ_TOOLS:
                events.append(SkillEvent("read", name, where, f"tool {step.tool}"))
            else:
                events.append(SkillEvent("run", name, where, f"tool {step.tool}"))
    return events


def _walk(agent: Any) -> Iterator[Any]:
    for step in agent.steps:
        if type(step).__name__ == "AgentView":
            yield from _walk(step)
        else:
            yield step


def _skill_name(inputs: Any) -> str | None:
    if isinstance(inputs, dict):
        name = inputs.get("name")
        if isinstance(name, str) and name:
            return name
        args = inputs.get("args")
        if isinstance(args, list | tuple) and args and isinstance(args[0], str):
            return args[0]
    return None


def skill_use(view: Any, max_reads: int = MAX_SKILL_READS) -> SuiteScore | None:
    """Skill-use discipline (deterministic), applicable only when ``skill_events`` finds any.

    Two checks, the score is the share that pass:

    1. *read before use*: every Skill script run (``run_skill_script``) is preceded, at the same
       or an earlier cell, by a read of that Skill (``use_skill``, ``read_skill_reference`` or a
       file under ``skills/<name>/``); when the run's Skill name is not visible, any earlier read
       counts. Skipped (not counted) when nothing ran.
    2. *progressive disclosure*: at most ``max_reads`` Skill reads in the whole Turn.

    Listing Skills alone is activity (the check set is then just the read bound)."""
    events = skill_events(view)
    if not events:
        return None
    reads = [e for e in events if e.kind == "read"]
    runs = [e for e in events if e.kind == "run"]
    passed: list[bool] = []
    notes: list[str] = []
    if runs:
        blind = [r for r in runs if not _read_before(r, reads)]
        passed.append(not blind)
        if blind:
            first = blind[0]
            notes.append(
                f"FAIL read before use: {len(blind)} of {len(runs)} Skill script run(s) without "
                f"reading the Skill first (first: {first.skill or 'unknown Skill'} at "
                f"{first.source})"
            )
        else:
            notes.append(f"PASS read before use: all {len(runs)} Skill script run(s) were informed")
    bounded = len(reads) <= max_reads
    passed.append(bounded)
    notes.append(
        f"{'PASS' if bounded else 'FAIL'} progressive disclosure: {len(reads)} Skill read(s) "
        f"(at most {max_reads})"
    )
    return SuiteScore(round(sum(passed) / len(passed), 3), "; ".join(notes))


def _read_before(run: SkillEvent, reads: Sequence[SkillEvent]) -> bool:
    return any(
        r.position <= run.position and (run.skill is None or r.skill in (None, run.skill))
        for r in reads
    )
