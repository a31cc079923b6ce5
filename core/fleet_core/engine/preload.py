"""Skill preloading with Jev: the catalog's first 20 Skills classified in one batch, up to 3
relevant ``SKILL.md`` files appended after the catalog (the predecessor's bounds).

Runs only when Jev is configured and the route runs code (not ``direct``). One unit per Skill
classified, category ``skill_selection``. When Jev fails the model gets the plain catalog: 20
sub-LM calls would cost more than the Skills save (``use_skill`` still reads any Skill).
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from fleet_core.engine.control import TurnStopped
from fleet_core.engine.decisions import Decider, Decision
from fleet_core.engine.jev import JevError
from fleet_core.event_payloads import SkillDecision, SkillSelectionPayload
from fleet_core.skills import Skill

MAX_EVALUATED = 20
MAX_PRELOADED = 3
MAX_SKILL_CHARS = 20_000
TASK_STATE_CHARS = 20_000
QUESTION = "Is this Skill (name: description) relevant to completing the task in the state?"
LABELS = {
    "relevant": "Its instructions would help complete this task.",
    "not_relevant": "It does not bear on this task.",
}


def _skill_text(skill: Skill) -> str:
    text = skill.files.get("SKILL.md", b"").decode("utf-8", errors="replace")[:MAX_SKILL_CHARS]
    return text.replace("</preloaded_skill", "<\\/preloaded_skill")


def _rank(decision: Decision) -> float:
    return decision.probabilities.get("relevant", decision.confidence or 0.0)


def preload(decider: Decider, task: str, skills: Sequence[Skill], catalog: str) -> str:
    """The catalog, with up to 3 relevant Skills' ``SKILL.md`` appended (emits
    ``skill_selection``); the plain catalog when Jev is off, there are no Skills, or Jev fails."""
    candidates = list(skills[:MAX_EVALUATED])
    if decider.jev is None or not candidates:
        return catalog
    items = [f"{s.name}: {s.description}" for s in candidates]
    try:
        decisions = decider.with_jev(
            items,
            QUESTION,
            list(LABELS),
            category="skill_selection",
            context={"task": task[:TASK_STATE_CHARS]},
            descriptions=LABELS,
        )
    except TurnStopped:
        raise
    except JevError:
        decider.control.check()
        return catalog
    relevant = [
        (skill, d)
        for skill, d in zip(candidates, decisions, strict=True)
        if d.decision == "relevant"
    ]
    relevant.sort(key=lambda pair: _rank(pair[1]), reverse=True)  # stable: catalog order ties
    chosen = [skill for skill, _ in relevant[:MAX_PRELOADED]]
    decider.control.emit(
        "skill_selection",
        SkillSelectionPayload(
            selected=[s.name for s in chosen],
            decisions=[
                SkillDecision(
                    skill=skill.name,
                    decision=d.decision,
                    raw_choice=d.raw_choice,
                    probabilities=d.probabilities,
                    confidence=d.confidence,
                    backend=d.backend,
                    model=d.model,
                )
                for skill, d in zip(candidates, decisions, strict=True)
            ],
        ),
    )
    if not chosen:
        return catalog
    blocks = [
        f'<preloaded_skill name="{escape(s.name)}">\n{_skill_text(s)}\n</preloaded_skill>'
        for s in chosen
    ]
    return catalog + "\n" + "\n".join(blocks)
