"""What a Turn's code asks the Session to keep, through FleetRuntime on SQLite and PostgreSQL:
``workspace.remember`` proposes an unreviewed memory that reaches a later Turn only once reviewed
(and only when its task mentions it), ``save_skill`` writes a Session Skill that the next Turn's
catalog lists, their refusals, and the opt-in shared learned notes of other Sessions. The scripted
model's code really runs in the local sandbox."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fleet_core.api import FleetRuntime
from fleet_core.config import EffectiveConfig, load_config
from fleet_core.engine.context import SHARED_NOTES_HEADER
from fleet_core.engine.scripted_lm import SwitchableLms, action, scripted_lm, submit
from fleet_core.events import TurnEvent
from fleet_core.models import TurnRequest
from tests.integration.test_runtime_memories import _memories_section

SKILL_MD = "---\nname: csv-cleanup\ndescription: Clean CSV exports before analysis\n---\n\nStrip."


async def turn(
    runtime: FleetRuntime, lms: SwitchableLms, session: str, task: str, *replies: str
) -> tuple[list[TurnEvent], str]:
    """Run one Turn whose model replies ``replies``; returns its events and first prompt."""
    lms.root = scripted_lm(list(replies))
    events: list[TurnEvent] = []
    result = await runtime.run_turn(
        TurnRequest(session_id=session, task=task), on_event=events.append
    )
    assert result.status == "completed", result.error
    return events, lms.root.engine_script.requests[0]


async def root_span(runtime: FleetRuntime, events: list[TurnEvent]) -> Any:
    """The root span of the Turn's trace (queued in its commit; export is deferred here)."""
    trace = await runtime.traces.pending(events[-1].payload["traceId"])
    assert trace is not None
    [root] = [s for s in trace.spans if s.parent_id is None]
    return root


def try_each(attempts: list[tuple[str, Any]], call: str) -> str:
    """Sandbox code that makes ``call`` once per ``(name, args)`` in ``attempts`` and prints
    ``kept <name> <result>`` or ``refused <name> <error>`` for each."""
    return (
        f"import json\nfor name, args in json.loads({json.dumps(attempts)!r}):\n"
        "    try:\n"
        f"        print('kept', name, {call})\n"
        "    except Exception as exc:\n"
        "        print('refused', name, exc)"
    )


def outputs(events: list[TurnEvent]) -> str:
    """Everything the Turn's task cells printed or raised (what the model saw)."""
    cells = [e.payload for e in events if e.kind == "cell_output"]
    return "\n".join(str(p.get("output") or p.get("error") or "") for p in cells)


async def test_remember_proposes_an_unreviewed_memory_shown_once_reviewed(
    scripted: tuple[FleetRuntime, SwitchableLms],
) -> None:
    runtime, lms = scripted
    await runtime.new_session("r", mode="rlm")
    code = (
        "print(workspace.remember('units', 'Invoice amounts are in EUR cents'))\n"
        "print(remembered := workspace.remember('other', 'Zebra gossip stays private'))"
    )
    events, _ = await turn(runtime, lms, "r", "look at invoices", action(code), submit("'ok'"))
    proposed = [e for e in events if e.kind == "memory_proposed"]
    assert [p.payload["name"] for p in proposed] == ["units", "other"]
    assert proposed[0].payload == {
        "memory_id": proposed[0].payload["memory_id"],
        "name": "units",
        "kind": "sandbox",
        "chars": len("Invoice amounts are in EUR cents"),
    }
    memories = await runtime.memories("r")
    assert [(m.kind, m.content, m.reviewed) for m in memories] == [
        ("sandbox", "Invoice amounts are in EUR cents", False),
        ("sandbox", "Zebra gossip stays private", False),
    ]
    units = memories[0]
    assert units.memory_id == proposed[0].payload["memory_id"]
    assert units.sources["name"] == "units" and units.sources["agentId"] == "root"
    root = await root_span(runtime, events)
    listed = root.attributes["fleet.memories_proposed"]
    assert [m["name"] for m in listed] == ["units", "other"]

    # unreviewed: never shown, even when the task mentions it
    _, prompt = await turn(runtime, lms, "r", "Sum the invoice amounts", submit("'1'"))
    assert _memories_section(prompt) == [] and "EUR cents" not in prompt

    await runtime.review_memory("r", units.memory_id)
    _, prompt = await turn(runtime, lms, "r", "Sum the invoice amounts again", submit("'2'"))
    assert _memories_section(prompt) == ["- [sandbox] Invoice amounts are in EUR cents"]
    _, prompt = await turn(runtime, lms, "r", "Tell me about zebra gossip", submit("'3'"))
    assert _memories_section(prompt) == []
    assert "Zebra gossip stays private" not in prompt


async def test_remember_refusals_are_clear_errors_the_code_sees(
    scripted: tuple[FleetRuntime, SwitchableLms], monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime, lms = scripted
    await runtime.new_session("rb", mode="rlm")
    await runtime.add_memory("rb", "one the user added")
    monkeypatch.setattr("fleet_core.turns.MEMORIES_PER_SESSION", 2)
    attempts = [
        ("bad name!", "x"),
        ("long", "y" * 4001),
        ("empty", "  "),
        ("fits", "kept"),
        ("over", "one too many"),
    ]
    code = try_each(attempts, "workspace.remember(name, args)")
    events, _ = await turn(runtime, lms, "rb", "remember things", action(code), submit("'ok'"))
    seen = outputs(events)
    assert "refused bad name! InvalidInput: workspace.remember: name must be 1-64" in seen
    assert "refused long InvalidInput: workspace.remember: a memory holds at most 4000" in seen
    assert "refused empty InvalidInput: workspace.remember: content must not be empty" in seen
    assert "kept fits" in seen
    assert "refused over InvalidInput: workspace.remember: the Session already holds 2" in seen
    assert [e.payload["name"] for e in events if e.kind == "memory_proposed"] == ["fits"]
    assert [m.content for m in await runtime.memories("rb")] == ["one the user added", "kept"]


async def test_save_skill_is_listed_in_the_next_turns_catalog(
    scripted: tuple[FleetRuntime, SwitchableLms], fleet_config: EffectiveConfig
) -> None:
    runtime, lms = scripted
    await runtime.new_session("s", mode="rlm")
    code = f"print(save_skill('csv-cleanup', {SKILL_MD!r}))"
    events, prompt = await turn(runtime, lms, "s", "save a skill", action(code), submit("'ok'"))
    assert '<skill name="csv-cleanup">' not in prompt
    [saved] = [e.payload for e in events if e.kind == "skill_saved"]
    assert saved["name"] == "csv-cleanup" and saved["path"] == "skills/csv-cleanup/SKILL.md"
    assert saved["replaced"] is False
    written = runtime.workspace("s").read("skills/csv-cleanup/SKILL.md")
    assert written.decode() == SKILL_MD
    root = await root_span(runtime, events)
    assert [s["name"] for s in root.attributes["fleet.skills_saved"]] == ["csv-cleanup"]

    use = "print(use_skill('csv-cleanup'))"
    events, prompt = await turn(runtime, lms, "s", "clean it", action(use), submit("'ok'"))
    assert '<skill name="csv-cleanup">Clean CSV exports before analysis</skill>' in prompt
    assert "# Skill csv-cleanup" in outputs(events)
    assert not (fleet_config.state_dir.parent / ".agents").exists()


async def test_save_skill_refusals_and_replace(
    scripted: tuple[FleetRuntime, SwitchableLms],
) -> None:
    runtime, lms = scripted
    await runtime.new_session("sr", mode="rlm")
    attempts: list[tuple[str, dict[str, Any]]] = [
        ("Bad_Name", {"content": "x", "description": "d"}),
        ("huge", {"content": "y" * 200_001, "description": "d"}),
        ("no-front", {"content": "just text"}),
        ("tabular-analysis", {"content": "body", "description": "mine"}),
        ("notes", {"content": "Write notes.", "description": "How to take notes"}),
        ("notes", {"content": "Again.", "description": "How to take notes"}),
        ("notes", {"content": "Replaced.", "description": "Notes v2", "replace": True}),
    ]
    code = try_each(attempts, "save_skill(name, **args)['replaced']")
    events, _ = await turn(runtime, lms, "sr", "save skills", action(code), submit("'ok'"))
    seen = outputs(events)
    assert "refused Bad_Name InvalidInput: save_skill: Skill name 'Bad_Name' is invalid" in seen
    assert "refused huge InvalidInput: save_skill: SKILL.md would be 200,0" in seen
    assert "refused no-front InvalidInput: save_skill: content must be a SKILL.md" in seen
    assert "refused tabular-analysis InvalidInput: save_skill: 'tabular-analysis' is a bundled" in (
        seen
    )
    assert "kept notes False" in seen
    assert "refused notes InvalidInput: save_skill: Skill 'notes' already exists" in seen
    assert "pass replace=True" in seen
    assert "kept notes True" in seen
    saved = [e.payload for e in events if e.kind == "skill_saved"]
    assert [(s["name"], s["replaced"]) for s in saved] == [("notes", False), ("notes", True)]
    text = runtime.workspace("sr").read("skills/notes/SKILL.md").decode()
    assert "description: Notes v2" in text and "Replaced." in text
    bundled = runtime.workspace("sr").read("skills/tabular-analysis/SKILL.md").decode()
    assert "mine" not in bundled


async def test_shared_learned_notes_are_opt_in_reviewed_only_and_marked_unverified(
    scripted: tuple[FleetRuntime, SwitchableLms], fleet_environ: dict[str, str], tmp_path: Path
) -> None:
    runtime, lms = scripted
    await runtime.new_session("a", mode="rlm")
    await runtime.new_session("b", mode="rlm")
    await turn(runtime, lms, "a", "t1", submit("'x'", note="Parquet exports need pyarrow"))
    await turn(runtime, lms, "a", "t2", submit("'y'", note="Parquet files hide secret zebra"))
    first, _unreviewed = await runtime.memories("a")
    await runtime.review_memory("a", first.memory_id)

    _, prompt = await turn(runtime, lms, "b", "Read the parquet files", submit("'z'"))
    assert SHARED_NOTES_HEADER not in prompt  # off by default

    shared = {**fleet_environ, "FLEET_SHARED_NOTES": "true"}
    await runtime.reconfigure(load_config(environ=shared, cwd=tmp_path))
    _, prompt = await turn(runtime, lms, "b", "Read the parquet files", submit("'z'"))
    assert SHARED_NOTES_HEADER in prompt
    assert "- Parquet exports need pyarrow" in prompt
    assert "secret zebra" not in prompt  # not reviewed
    # a Session's own notes come only through its reviewed memories, never as shared notes
    _, prompt = await turn(runtime, lms, "a", "Read the parquet files", submit("'w'"))
    assert SHARED_NOTES_HEADER not in prompt


async def test_a_remembered_secret_is_redacted_before_it_is_stored(
    fleet_environ: dict[str, str], tmp_path: Path
) -> None:
    secret = "dtn-7f3a9c2e5b1d4f8a"
    config = load_config(environ={**fleet_environ, "FLEET_DAYTONA_API_KEY": secret}, cwd=tmp_path)
    lms = SwitchableLms()
    runtime = await FleetRuntime.open(config, lm_provider=lms, trace_export="deferred")
    try:
        await runtime.new_session("x", mode="rlm")
        code = f"workspace.remember('key', 'the sandbox key is {secret}')"
        events, _ = await turn(runtime, lms, "x", "keep it", action(code), submit("'ok'"))
        [memory] = await runtime.memories("x")
        assert secret not in memory.content and memory.content.startswith("the sandbox key is")
        assert all(secret not in json.dumps(e.payload) for e in events)
    finally:
        await runtime.close()
