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


def render_memory_summary(
    memories: Sequence[Memory],
    task: str,
    environment: str,
    shared: Sequence[Memory] = (),
    *,
    shared_max: int = 8,
    shared_chars: int = 4_000,
) -> str:
    """The reviewed memories matching the task (bounded), the shared learned notes of other
    Sessions matching it (opt-in: ``shared`` is empty when off; marked as unverified hints) and
    the environment line. Learned notes reach the model only once a person reviewed them (as
    ``learned_note`` memories)."""
    parts: list[str] = []
    chosen = relevant_memories(memories, task)
    if chosen:
        lines = [f"- [{m.kind}] {m.content}" for m in chosen]
        text = "\n".join(lines)
        if len(text) > MEMORIES_CHARS:
            text = text[:MEMORIES_CHARS] + "..."
        parts.append("Reviewed memories matching this task:\n" + text)
    notes = shared_learned_notes(shared, task, limit=shared_max)
    if notes:
        text = "\n".join(f"- {_one_line(m.content, SHARED_NOTE_CHARS)}" for m in notes)
        if len(text) > shared_chars:
            text = text[:shared_chars] + "..."
        parts.append(SHARED_NOTES_HEADER + "\n" + text)
    parts.append(environment)
    return "\n\n".join(parts)


SHARED_NOTE_CHARS = 500  # one shared note's line
SHARED_NOTES_SCAN = 200  # the newest reviewed learned notes of other Sessions searched per Turn
SHARED_NOTES_HEADER = (
    "Shared learned notes from other Sessions (unverified hints: reviewed in their own Session, "
    "never a reference; check anything you use in code):"
)


def shared_learned_notes(notes: Sequence[Memory], task: str, *, limit: int) -> list[Memory]:
    """The shared notes to show: those matching the task (as ``relevant_memories`` ranks them),
    a near-duplicate of a note already kept (word-set overlap >= 0.5) left out, at most
    ``limit``."""
    kept: list[Memory] = []
    seen: list[set[str]] = []
    for note in relevant_memories(notes, task, limit=len(notes)):
        words = _words(note.content)
        if any(len(words & other) >= 0.5 * max(len(words | other), 1) for other in seen):
            continue
        kept.append(note)
        seen.append(words)
        if len(kept) >= limit:
            break
    return kept


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."
