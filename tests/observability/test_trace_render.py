"""One trace renderer (``traceview.render_trace_markdown``) for a stored trace and for the
store's outcome of a Turn whose trace cannot be read (``stored_trace_view``: tracing off, the
destination unreadable). Pure Python: no MLflow, no store."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from fleet_core.models import AnswerOutcome, OutcomeReason, TurnSummary
from fleet_core.observability import attributes as attr
from fleet_core.observability.records import TurnTraceStart
from fleet_core.observability.sample_turn import scripted_turn_events, scripted_turn_result
from fleet_core.observability.spans import TraceBuilder
from fleet_core.observability.traceview import (
    build_view,
    render_trace_markdown,
    stored_trace_view,
)

SESSION = "sess-render"
NOTE = "This Turn has no MLflow trace (tracing was off when it ran)."


def _summary(turn_id: str, **fields: Any) -> TurnSummary:
    values: dict[str, Any] = {
        "turn_id": turn_id,
        "seq": 3,
        "status": "completed",
        "task": "Sum revenue in files/sales.csv",
        "answer": "Total revenue is 42",
        "route": "rlm",
        "learned_note": "revenue is in column 3",
        "created_at": datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC),
        "duration_seconds": 1.5,
    }
    return TurnSummary(**(values | fields))


def _artifacts(turn_id: str) -> list[dict[str, Any]]:
    record = {
        "path": "artifacts/root.1/chart.txt",
        "root_path": "artifacts/chart.txt",
        "sha256": "ab" * 32,
        "size_bytes": 2,
        "agent_id": "root.1",
        "source_sandbox": "sbx-1",
        "parent_chain": ["root"],
        "turn_id": turn_id,
    }
    other = record | {"turn_id": "another-turn"}
    return [
        {
            "path": "artifacts/root.1/chart.txt",
            "size_bytes": 2,
            "sha256": "ab" * 32,
            "uri": f"fleet:/sessions/{SESSION}/artifacts/root.1/chart.txt",
            "provenance": [other, record],
        },
        {"path": "artifacts/old.csv", "size_bytes": 1, "sha256": "cd" * 32, "provenance": [other]},
    ]


def _section(text: str, heading: str) -> str:
    start = text.index(f"\n{heading}\n")
    end = text.find("\n## ", start + len(heading) + 2)
    return text[start : end if end >= 0 else None]


def test_a_stored_outcome_renders_like_a_trace_after_its_note() -> None:
    turn_id = uuid.uuid4().hex
    events = scripted_turn_events(turn_id, SESSION)
    result = scripted_turn_result(turn_id, SESSION).wire()
    view = stored_trace_view(
        _summary(turn_id),
        session_id=SESSION,
        result=result,
        artifacts=_artifacts(turn_id),
        events=events,
        note=NOTE,
    )
    text = render_trace_markdown(view)
    assert text.startswith(f"> **Note:** {NOTE}\n\n# Turn trace `{turn_id}`\n")
    for row in (
        f"| Session | {SESSION} |",
        f"| Turn | {turn_id} |",
        "| Outcome | completed |",
        "| Mode | hybrid |",  # from the turn_started event
        "| Route | rlm |",
        "| Route reason | needs code over files/sales.csv |",
        "| Started | 2025-01-02T03:04:05+00:00 |",
        "| Duration | 1.50 s |",
    ):
        assert row in text
    # what only a trace records is left out, not shown as absent
    assert "Replay snapshot" not in text and "Configuration digest" not in text
    assert "> Total revenue is 42" in text
    assert "## Learned note\n\n> revenue is in column 3" in text
    assert "- model calls: 3" in text and "- tokens: 160 in / 35 out" in text
    assert "Cell 1 — **error**" in text and "ZeroDivisionError" in text
    assert "Child agent `root.1` — succeeded" in text and "Subtask: Chart revenue" in text
    assert "- `triage` (1 model call(s)) → route **rlm**" in text
    artifacts = _section(text, "## Artifacts")
    link = f"[`artifacts/root.1/chart.txt`](<fleet:/sessions/{SESSION}/artifacts/root.1/chart.txt>)"
    assert link in artifacts and "in sandbox `sbx-1`" in artifacts
    assert "old.csv" not in artifacts and artifacts.count("from agent") == 1  # this Turn's only


def test_the_agents_of_a_stored_outcome_and_of_its_trace_render_alike() -> None:
    turn_id = uuid.uuid4().hex
    events = scripted_turn_events(turn_id, SESSION)
    result = scripted_turn_result(turn_id, SESSION)
    builder = TraceBuilder(
        TurnTraceStart(turn_id, SESSION, "Sum revenue", mode="hybrid", configuration_digest="c")
    )
    for event in events:
        builder.on_event(event)
    record = builder.finish(result)
    traced = render_trace_markdown(build_view(record.trace_id, record.spans))
    stored = render_trace_markdown(
        stored_trace_view(
            _summary(turn_id), session_id=SESSION, result=result.wire(), events=events, note=NOTE
        )
    )
    assert _section(stored, "## Agents") == _section(traced, "## Agents")
    assert _section(stored, "## Usage") == _section(traced, "## Usage")
    assert "| Replay snapshot | not captured |" in traced  # a trace says so


def test_without_events_or_a_stored_result_the_document_says_what_it_lacks() -> None:
    turn_id = uuid.uuid4().hex
    running = _summary(
        turn_id, status="running", answer=None, route=None, learned_note=None, duration_seconds=None
    )
    text = render_trace_markdown(stored_trace_view(running, session_id=SESSION, note=NOTE))
    assert text.startswith("> **Note:** ")
    assert "| Outcome | running |" in text and "Duration" not in text and "| Route |" not in text
    assert "_(no answer)_" in text and "_(usage unavailable)_" in text
    assert "_Agent steps were not recorded by this process; the stored outcome is shown._" in text
    assert "## Artifacts\n\n_(none)_" in text

    # a failed Turn's stored error; the events of a Turn still running: its agent is running
    failed = _summary(turn_id, status="failed", answer=None)
    result = scripted_turn_result(turn_id, SESSION, outcome="failed").wire()
    text = render_trace_markdown(stored_trace_view(failed, session_id=SESSION, result=result))
    assert "## Error\n\n**SandboxError**: worker died" in text
    events = scripted_turn_events(turn_id, SESSION)[:8]  # up to the second cell's code
    text = render_trace_markdown(stored_trace_view(running, session_id=SESSION, events=events))
    assert "### Root agent — running" in text and "Cell 1 — **error**" in text


def test_code_and_output_cannot_close_their_fence() -> None:
    turn_id = uuid.uuid4().hex
    events = scripted_turn_events(turn_id, SESSION, extra_text="\n```\n# not a heading")
    text = render_trace_markdown(stored_trace_view(_summary(turn_id), session_id=SESSION,
                                                   events=events))  # fmt: skip
    assert "````python\nprint(1/0)\n```\n# not a heading\n````" in text


def test_the_answer_outcome_is_recorded_and_rendered_in_both_documents() -> None:
    """A Turn that completed with errors says so in its trace (root span attribute, tag) and in
    both renderings; a trace without an outcome (older) shows no such row."""
    turn_id = uuid.uuid4().hex
    events = scripted_turn_events(turn_id, SESSION)
    outcome = AnswerOutcome(
        kind="extracted",
        reasons=[OutcomeReason(kind="iterations_exhausted", detail="the RLM loop ran out")],
    )
    result = scripted_turn_result(turn_id, SESSION).model_copy(update={"outcome": outcome})
    builder = TraceBuilder(
        TurnTraceStart(turn_id, SESSION, "Sum revenue", mode="hybrid", configuration_digest="c")
    )
    for event in events:
        builder.on_event(event)
    record = builder.finish(result)
    assert record.tags[attr.ANSWER_OUTCOME] == "extracted"
    view = build_view(record.trace_id, record.spans)
    assert view.answer_outcome == outcome
    row = "| Answer reached | extracted (completed with errors: the RLM loop ran out) |"
    assert row in render_trace_markdown(view)
    stored = stored_trace_view(
        _summary(turn_id), session_id=SESSION, result=result.wire(), events=events, note=NOTE
    )
    assert row in render_trace_markdown(stored)
    plain = result.model_copy(update={"outcome": None})  # as stored before outcomes existed
    assert "Answer reached" not in render_trace_markdown(
        stored_trace_view(_summary(turn_id), session_id=SESSION, result=plain.wire(), note=NOTE)
    )
