"""Memories a Turn proposes and a person reviews, through FleetRuntime, on both databases."""

from __future__ import annotations

import pytest

from fleet_core.api import FleetRuntime
from fleet_core.engine.context import relevant_memories, render_memory_summary
from fleet_core.engine.scripted_lm import SwitchableLms, scripted_lm, submit
from fleet_core.errors import InvalidInput, MemoryNotFound
from fleet_core.models import Memory, TurnRequest
from fleet_core.store import MEMORY_CONTENT_CHARS

SECTION = "Reviewed memories matching this task:\n"


def _memories_section(prompt: str) -> list[str]:
    """The reviewed memories the prompt shows (its lines may be indented by the adapter)."""
    if SECTION.strip() not in prompt:
        return []
    lines = prompt.split(SECTION.strip(), 1)[1].splitlines()[1:]
    shown: list[str] = []
    for line in lines:
        if not line.strip().startswith("- ["):
            break
        shown.append(line.strip())
    return shown


async def test_a_learned_note_is_proposed_reviewed_then_shown_when_the_task_mentions_it(
    scripted: tuple[FleetRuntime, SwitchableLms],
) -> None:
    runtime, lms = scripted
    await runtime.new_session("m", mode="rlm")
    lms.root = scripted_lm([submit("'done'", note="Invoices are in column amount_eur")])
    first = await runtime.run_turn(TurnRequest(session_id="m", task="sum the invoices"))
    [proposed] = await runtime.memories("m")
    assert (proposed.kind, proposed.reviewed) == ("learned_note", False)
    assert proposed.content == "Invoices are in column amount_eur"
    assert proposed.sources == {"turnId": first.turn_id}
    hidden = await runtime.add_memory("m", "Invoices secret unreviewed hint", kind="preference")

    # unreviewed: neither memory is in the reviewed section; the user's never reaches the model
    lms.root = scripted_lm([submit("'ok'")])
    await runtime.run_turn(TurnRequest(session_id="m", task="invoices again"))
    prompt = lms.root.engine_script.requests[0]
    assert _memories_section(prompt) == []
    assert "secret unreviewed hint" not in prompt

    await runtime.review_memory("m", proposed.memory_id)
    other = await runtime.add_memory("m", "Weather data comes from Oslo", kind="observation")
    await runtime.review_memory("m", other.memory_id)
    lms.root = scripted_lm([submit("'ok'")])
    await runtime.run_turn(TurnRequest(session_id="m", task="Total of the invoices by month?"))
    prompt = lms.root.engine_script.requests[0]
    assert _memories_section(prompt) == ["- [learned_note] Invoices are in column amount_eur"]
    assert "Oslo" not in prompt  # reviewed, but the task does not mention it
    assert "secret unreviewed hint" not in prompt

    await runtime.reject_memory("m", hidden.memory_id)
    assert hidden.memory_id not in {m.memory_id for m in await runtime.memories("m")}
    with pytest.raises(MemoryNotFound):
        await runtime.reject_memory("m", hidden.memory_id)


async def test_memory_bounds_are_clear_invalid_inputs(
    runtime: FleetRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    await runtime.new_session("b")
    with pytest.raises(InvalidInput, match="at most 4000 characters"):
        await runtime.add_memory("b", "x" * (MEMORY_CONTENT_CHARS + 1))
    with pytest.raises(InvalidInput, match="must not be empty"):
        await runtime.add_memory("b", "   ")
    with pytest.raises(InvalidInput, match="kind"):
        await runtime.add_memory("b", "fine", kind="Not A Kind!")
    monkeypatch.setattr("fleet_core.store.MEMORIES_PER_SESSION", 2)
    await runtime.add_memory("b", "one")
    await runtime.add_memory("b", "two")
    with pytest.raises(InvalidInput, match="already holds 2 memories"):
        await runtime.add_memory("b", "three")
    assert [m.content for m in await runtime.memories("b")] == ["one", "two"]


def _memory(content: str, *, reviewed: bool = True, second: int = 0) -> Memory:
    from datetime import UTC, datetime

    stamp = datetime(2026, 1, 1, 0, 0, second, tzinfo=UTC)
    return Memory(memory_id=content, kind="k", content=content, reviewed=reviewed, created_at=stamp)


def test_the_search_ranks_by_shared_words_then_recency_within_its_bounds() -> None:
    memories = [
        _memory("revenue in euros", second=1),
        _memory("revenue by region in euros", second=2),
        _memory("revenue numbers", second=3),
        _memory("the weather", second=4),  # shares only a common word with the task
        _memory("euros and revenue unreviewed", reviewed=False, second=5),
    ]
    found = relevant_memories(memories, "Show the revenue in euros", limit=10)
    assert [m.content for m in found] == [
        "revenue by region in euros",
        "revenue in euros",
        "revenue numbers",
    ]
    assert len(relevant_memories(memories, "revenue", limit=2)) == 2
    many = [_memory(f"revenue {i} " + "y" * 3_000, second=i) for i in range(20)]
    text = render_memory_summary(many, "revenue", "Sandbox: Python 3.")
    assert text.count("- [k] revenue") <= 10 and len(text) < 6_200
