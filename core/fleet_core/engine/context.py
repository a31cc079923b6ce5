"""Rendering the Turn program's text inputs: session history and memory summary (no dspy)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from fleet_core.models import DatasetContext, Memory, TurnSummary
from fleet_core.skills import Skill

MEMORIES_MAX = 10  # reviewed memories shown to the model per Turn
MEMORIES_CHARS = 6_000  # and their text, at most
_WORD = re.compile(r"[a-z0-9]{3,}")


@dataclass(frozen=True, slots=True)
class TurnInputs:
    """Everything the Turn program reads, prepared on the host before it runs."""

    task: str
    mode: str
    workspace_manifest: str
    skills_catalog: str
    memory_summary: str
    session_history: str
    dataset: DatasetContext | None = None
    skills: tuple[Skill, ...] = ()


def render_history(turns: Sequence[TurnSummary], *, max_turns: int, max_chars: int) -> str:
    """The last ``max_turns`` completed Turns, oldest first, within ``max_chars`` (newest kept)."""
    recent = [t for t in turns if t.status == "completed"][-max_turns:] if max_turns else []
    blocks: list[str] = []
    remaining = max_chars
    for turn in reversed(recent):
        if remaining < 20:
            break
        task, answer = turn.task, turn.answer or ""
        block = f"User: {task}\nAssistant: {answer}"
        if len(block) + 2 > remaining:
            task = task if len(task) <= 4_000 else task[:4_000] + "..."
            room = remaining - len(task) - 22
            if room <= 0:
                break
            answer = answer if len(answer) <= room else "..." + answer[-(room - 3) :]
            block = f"User: {task}\nAssistant: {answer}"[: remaining - 2]
        blocks.append(block)
        remaining -= len(block) + 2
    return "\n\n".join(reversed(blocks)) if blocks else "(no earlier Turns in this Session)"


# Words too common to say that a memory is about the task.
_STOP_WORDS = frozenset(
    {
        "the",
        "and",
        "for",
        "are",
        "but",
        "not",
        "you",
        "all",
        "any",
        "can",
        "had",
        "her",
        "was",
        "one",
        "our",
        "out",
        "has",
        "have",
        "with",
        "this",
        "that",
        "from",
        "they",
        "will",
        "would",
        "there",
        "their",
        "what",
        "when",
        "which",
        "who",
        "how",
        "why",
        "into",
        "than",
        "then",
        "them",
        "these",
        "those",
        "its",
        "also",
        "about",
        "please",
        "just",
    }
)


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower())) - _STOP_WORDS


def relevant_memories(
    memories: Sequence[Memory], task: str, limit: int = MEMORIES_MAX
) -> list[Memory]:
    """Search the reviewed memories by the task's text (the one search a Turn makes).

    A memory matches when it shares at least one word (3+ letters or digits, lower-cased, common
    words left out) with the task; matches rank by the number of shared words, then newest first,
    and at most ``limit`` are kept. Unreviewed memories never match, whatever their words.
    """
    wanted = _words(task)
    scored = [
        (overlap, m.created_at.timestamp(), m)
        for m in memories
        if m.reviewed and (overlap := len(wanted & _words(m.content))) > 0
    ]
    scored.sort(key=lambda item: (item[0], item[1]), reverse=True)
    return [m for _, _, m in scored[:limit]]


def render_memory_summary(memories: Sequence[Memory], task: str, environment: str) -> str:
    """The reviewed memories matching the task (bounded) and the environment line. Learned
    notes reach the model only once a person reviewed them (as ``learned_note`` memories)."""
    parts: list[str] = []
    chosen = relevant_memories(memories, task)
    if chosen:
        lines = [f"- [{m.kind}] {m.content}" for m in chosen]
        text = "\n".join(lines)
        if len(text) > MEMORIES_CHARS:
            text = text[:MEMORIES_CHARS] + "..."
        parts.append("Reviewed memories matching this task:\n" + text)
    parts.append(environment)
    return "\n\n".join(parts)
