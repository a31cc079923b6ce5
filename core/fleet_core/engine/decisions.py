"""Typed decisions: Jev when configured, the sub LM otherwise (or when Jev fails).

One ``Decider`` per agent of a Turn. It serves triage (category ``routing``), Skill preloading
(``skill_selection``) and the sandbox's ``jev_decide_batched`` (``other_decisions``). Every
decision costs one budget unit per item, whichever backend answers: Jev's units are charged
before its one batched call, the sub LM's through its ``MeteredLM`` (one call per item). A Jev
call that fails gives its units back (it decided nothing); the fallback then charges its own.

Each batch emits one ``jev_decision`` event (backend, model, item count, duration, tokens, and
the Jev error a fallback followed). The result shape is the same for both backends::

    {item, decision, raw_choice, probabilities, confidence, backend, model}
"""

from __future__ import annotations

import contextvars
import re
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal

import dspy

from fleet_core.engine.control import TurnControl, TurnStopped
from fleet_core.engine.jev import ChoiceAnswer, ChoiceQuestion, JevClient, JevError
from fleet_core.engine.metering import MeteredLM
from fleet_core.errors import InvalidInput
from fleet_core.event_payloads import JevDecisionPayload, TokenUsage
from fleet_core.modes import ROUTES

MAX_ITEMS = 100
MAX_ITEM_CHARS = 100_000
MAX_QUESTION_CHARS = 10_000
MAX_CHOICES = 20
MAX_CHOICE_CHARS = 256
FALLBACK_THREADS = 8
Backend = Literal["jev", "generative"]


class ItemDecision(dspy.Signature):  # type: ignore[misc]
    """Answer the question about the item with exactly one of the given choices."""

    item: str = dspy.InputField(desc="The item to decide about")
    question: str = dspy.InputField(desc="The question")
    choices: str = dspy.InputField(desc="The allowed answers, one per line")
    decision: str = dspy.OutputField(desc="Exactly one of the choices, verbatim")


@dataclass(slots=True)
class Decision:
    item: str
    decision: str | None
    raw_choice: str | None
    probabilities: dict[str, float] = field(default_factory=dict)
    confidence: float | None = None
    backend: Backend = "generative"
    model: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "item": self.item,
            "decision": self.decision,
            "raw_choice": self.raw_choice,
            "probabilities": dict(self.probabilities),
            "confidence": self.confidence,
            "backend": self.backend,
            "model": self.model,
        }


def check_request(items: Any, question: Any, choices: Any) -> tuple[list[str], str, list[str]]:
    """The sandbox helper's bounds (the predecessor's): ``InvalidInput`` naming the rule."""
    if not isinstance(items, list | tuple) or not 1 <= len(items) <= MAX_ITEMS:
        raise InvalidInput(f"items must be a list of 1-{MAX_ITEMS} strings")
    if not all(isinstance(i, str) and len(i) <= MAX_ITEM_CHARS for i in items):
        raise InvalidInput(f"each item must be a string of at most {MAX_ITEM_CHARS:,} characters")
    if not isinstance(question, str) or not 1 <= len(question.strip()) <= MAX_QUESTION_CHARS:
        raise InvalidInput(f"question must be a string of 1-{MAX_QUESTION_CHARS:,} characters")
    if not isinstance(choices, list | tuple) or not 1 <= len(choices) <= MAX_CHOICES:
        raise InvalidInput(f"choices must be a list of 1-{MAX_CHOICES} unique strings")
    if not all(isinstance(c, str) and 1 <= len(c) <= MAX_CHOICE_CHARS for c in choices):
        raise InvalidInput(f"each choice must be a string of 1-{MAX_CHOICE_CHARS} characters")
    if len(set(choices)) != len(choices):
        raise InvalidInput("choices must be unique")
    return list(items), question, list(choices)


def match_choice(raw: str, choices: Sequence[str]) -> str | None:
    """The choice a generative reply names: verbatim, case-insensitively, or as its first word."""
    text = raw.strip().strip("`'\"").strip()
    if text in choices:
        return text
    lowered = {c.lower(): c for c in choices}
    if text.lower() in lowered:
        return lowered[text.lower()]
    words = re.findall(r"[\w-]+", text.lower())
    if words and words[0] in lowered:
        return lowered[words[0]]
    return None


def _jev_decision(item: str, answer: ChoiceAnswer, model: str) -> Decision:
    return Decision(
        item=item,
        decision=answer.choice,
        raw_choice=answer.choice,
        probabilities=answer.probabilities,
        confidence=answer.confidence,
        backend="jev",
        model=model,
    )


class Decider:
    """One agent's decisions (see the module docstring)."""

    def __init__(
        self,
        *,
        control: TurnControl,
        jev: JevClient | None,
        sub_lm: Any,
        agent_id: str = "root",
        parent_agent_id: str | None = None,
    ) -> None:
        self.control = control
        self.jev = jev
        self.sub_lm = sub_lm
        self.agent_id = agent_id
        self.parent_agent_id = parent_agent_id

    def _emit(self, fields: dict[str, Any]) -> None:
        """One ``jev_decision`` event of ``fields`` (``JevDecisionPayload``'s, in wire order)."""
        self.control.emit(
            "jev_decision",
            JevDecisionPayload(**fields),
            agent_id=self.agent_id,
            parent_agent_id=self.parent_agent_id,
        )

    def with_jev(
        self,
        items: Sequence[str],
        question: str,
        choices: Sequence[str],
        *,
        category: str,
        context: dict[str, Any] | None = None,
        descriptions: dict[str, str] | None = None,
    ) -> list[Decision]:
        """One batched Jev call (one unit per item, charged first); ``JevError`` if it fails."""
        jev = self.jev
        if jev is None:
            raise JevError("Jev is off (FLEET_JEV_API_KEY is not set)")
        control = self.control
        control.charge(len(items), category, self.agent_id)
        labels = {c: (descriptions or {}).get(c) for c in choices}
        questions = {
            f"item-{i}": ChoiceQuestion(f"For the item at index {i} of `items`: {question}", labels)
            for i in range(len(items))
        }
        state = {**(context or {}), "items": list(items)}
        started = time.perf_counter()
        event: dict[str, Any] = {
            "category": category,
            "backend": "jev",
            "model": jev.model,
            "items": len(items),
            "ok": False,
        }
        try:
            answers = jev.decide(state, questions, remaining_seconds=control.remaining_seconds())
        except JevError as exc:
            event["error"] = exc.message
            control.refund(len(items), category)  # no decision came of it
            raise
        finally:
            event["duration_ms"] = round((time.perf_counter() - started) * 1000, 2)
            if "error" in event:
                self._emit(event)
        control.check()
        control.add_tokens(answers.input_tokens, answers.output_tokens)
        control.note_jev_decisions(category, len(items))
        event.update(ok=True, model=answers.model or jev.model)
        if answers.input_tokens is not None or answers.output_tokens is not None:
            event["usage"] = TokenUsage(
                input_tokens=answers.input_tokens, output_tokens=answers.output_tokens
            )
        self._emit(event)
        return [
            _jev_decision(item, answers.answers[f"item-{i}"], event["model"])
            for i, item in enumerate(items)
        ]

    def with_sub_lm(
        self,
        items: Sequence[str],
        question: str,
        choices: Sequence[str],
        *,
        category: str,
        jev_error: str | None = None,
    ) -> list[Decision]:
        """One sub-LM call per item (each charged one unit by its ``MeteredLM``), ≤8 at once."""
        lm = MeteredLM(
            self.sub_lm,
            self.control,
            category=category,
            agent_id=self.agent_id,
            parent_agent_id=self.parent_agent_id,
        )
        model = str(getattr(self.sub_lm, "model", "") or "")[:150] or None
        listing = "\n".join(choices)
        started = time.perf_counter()

        def one(item: str) -> Decision:
            with dspy.context(lm=lm):
                prediction = dspy.Predict(ItemDecision)(
                    item=item, question=question, choices=listing
                )
            raw = str(getattr(prediction, "decision", "") or "")
            return Decision(
                item=item,
                decision=match_choice(raw, choices),
                raw_choice=raw[:MAX_CHOICE_CHARS],
                backend="generative",
                model=model,
            )

        workers = min(FALLBACK_THREADS, len(items))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="fleet-decide") as pool:
            futures = [pool.submit(contextvars.copy_context().run, one, i) for i in items]
            try:
                results = [f.result() for f in futures]
            except BaseException:
                for f in futures:
                    f.cancel()
                raise
        event: dict[str, Any] = {
            "category": category,
            "backend": "generative",
            "model": model,
            "items": len(items),
            "ok": True,
            "duration_ms": round((time.perf_counter() - started) * 1000, 2),
        }
        if jev_error is not None:
            event["fallback_from"] = jev_error
        self._emit(event)
        return results

    def decide(
        self,
        items: Sequence[str],
        question: str,
        choices: Sequence[str],
        *,
        category: str,
        context: dict[str, Any] | None = None,
    ) -> list[Decision]:
        """Jev if configured, else (or when Jev fails) the sub LM; the same result shape."""
        jev_error: str | None = None
        if self.jev is not None:
            try:
                return self.with_jev(items, question, choices, category=category, context=context)
            except TurnStopped:
                raise
            except JevError as exc:
                self.control.check()
                jev_error = exc.message
        return self.with_sub_lm(items, question, choices, category=category, jev_error=jev_error)


# --- triage by Jev ----------------------------------------------------------------------------

TRIAGE_QUESTION = (
    "Which is the least expensive route that can satisfy this request? The state also holds the "
    "workspace manifest and the Skills catalog."
)
ROUTE_DESCRIPTIONS = {  # per route (fleet_core.modes.ROUTES)
    "direct": (
        "A conversational reply or general knowledge; no files, no computation. Not for anything "
        "that reads workspace files, computes figures or writes artifacts."
    ),
    "flex": "A short, well-defined program over the workspace (one pass, few steps).",
    "rlm": "Iterative exploration, long inputs, multi-step analysis or delegation.",
}
TRIAGE_STATE_CHARS = 20_000  # of the manifest and of the catalog each, in Jev's state


def triage_with_jev(
    decider: Decider, task: str, workspace_manifest: str, skills_catalog: str
) -> Decision:
    """Jev's route for the task (one unit, ``routing``); ``JevError`` when it cannot answer."""
    context = {
        "workspace_manifest": workspace_manifest[:TRIAGE_STATE_CHARS],
        "skills_catalog": skills_catalog[:TRIAGE_STATE_CHARS],
    }
    return decider.with_jev(
        [task],
        TRIAGE_QUESTION,
        list(ROUTES),
        category="routing",
        context=context,
        descriptions=ROUTE_DESCRIPTIONS,
    )[0]
