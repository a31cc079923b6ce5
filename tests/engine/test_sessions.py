"""Idempotent replay, restart keeps history and notes, parallel Sessions, memory and skills."""

from __future__ import annotations

import asyncio
import time

from fleet_core.engine.scripted_lm import action, scripted_lm, submit
from fleet_core.models import TurnRequest


async def test_idempotent_replay_returns_the_stored_outcome(engine_runtime, lms) -> None:
    runtime = engine_runtime
    await runtime.new_session("i", mode="rlm")
    lms.root = scripted_lm([action("v = 21 * 2\nprint(v)"), submit("str(v)")])
    request = TurnRequest(session_id="i", task="compute", idempotency_key="key-1")
    first = await runtime.run_turn(request)
    calls = len(lms.root.engine_script.requests)
    events: list = []
    second = await runtime.run_turn(request, on_event=events.append)
    assert second.replayed and not first.replayed
    assert second.turn_id == first.turn_id and second.answer == "42"
    assert second.usage == first.usage
    assert len(lms.root.engine_script.requests) == calls  # nothing ran again
    assert [e.kind for e in events] == ["turn_completed"]
    assert len(await runtime.history("i")) == 1


async def test_restart_keeps_history_and_only_reviewed_notes_reach_the_model(
    open_runtime, lms
) -> None:
    first = await open_runtime()
    await first.new_session("r", mode="rlm")
    lms.root = scripted_lm([submit("'Paris'", note="capital lookups need no code")])
    result = await first.run_turn(TurnRequest(session_id="r", task="Capital of France?"))
    assert result.learned_note == "capital lookups need no code"
    await first.close()

    second = await open_runtime()
    await second.load_session("r")
    [turn] = await second.history("r")
    assert turn.task == "Capital of France?" and turn.answer == "Paris"
    assert "capital lookups need no code" in await second.memory_summary("r")
    lms.root = scripted_lm([submit("'Berlin'")])
    again = await second.run_turn(TurnRequest(session_id="r", task="And of Germany?"))
    assert again.answer == "Berlin"
    prompt = lms.root.engine_script.requests[0]
    assert "User: Capital of France?" in prompt and "Assistant: Paris" in prompt
    assert "capital lookups need no code" not in prompt  # unreviewed: never shown to the model
    assert "Sandbox: Python" in prompt
    assert '<skill name="tabular-analysis">' in prompt
    [note] = await second.memories("r")  # the note was proposed as a memory; a person reviews it
    assert note.kind == "learned_note" and not note.reviewed
    await second.review_memory("r", note.memory_id)
    lms.root = scripted_lm([submit("'Rome'")])
    await second.run_turn(TurnRequest(session_id="r", task="Which capital has Italy?"))
    assert "capital lookups need no code" in lms.root.engine_script.requests[0]


async def test_reviewed_memories_reach_the_prompt(engine_runtime, lms) -> None:
    runtime = engine_runtime
    await runtime.new_session("m", mode="rlm")
    memory = await runtime._run(
        runtime.store.add_memory, "m", "preference", "Report revenue in euros", {}
    )
    await runtime._run(runtime.store.add_memory, "m", "observation", "unreviewed guess", {})
    await runtime.review_memory("m", memory.memory_id)
    lms.root = scripted_lm([submit("'ok'")])
    await runtime.run_turn(TurnRequest(session_id="m", task="revenue please"))
    prompt = lms.root.engine_script.requests[0]
    assert "Report revenue in euros" in prompt and "unreviewed guess" not in prompt


async def test_a_second_session_runs_while_the_first_runs(engine_runtime, lms) -> None:
    runtime = engine_runtime
    await runtime.new_session("slow", mode="rlm")
    await runtime.new_session("fast", mode="rlm")
    lms.root = scripted_lm(
        rules={
            "SLOW-TASK": [action("import time\ntime.sleep(3)\nprint('done')"), submit("'slow'")],
            "FAST-TASK": [submit("'fast'")],
        }
    )
    events: list = []
    slow = asyncio.create_task(
        runtime.run_turn(TurnRequest(session_id="slow", task="SLOW-TASK"), on_event=events.append)
    )
    while not any(e.kind == "code_cell" and "sleep" in e.data.code for e in events):  # noqa: ASYNC110
        await asyncio.sleep(0.02)
    started = time.monotonic()
    fast = await runtime.run_turn(TurnRequest(session_id="fast", task="FAST-TASK"))
    assert fast.answer == "fast" and time.monotonic() - started < 2.5
    assert not slow.done()
    assert (await slow).answer == "slow"


async def test_user_skill_is_synced_into_the_workspace(engine_runtime, lms, tmp_path) -> None:
    skill = tmp_path / ".fleet" / "skills" / "csv-style"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: csv-style\ndescription: House style for CSV outputs.\n---\n"
        "Use ; as separator.\n"
    )
    runtime = engine_runtime
    await runtime.new_session("u", mode="rlm")
    lms.root = scripted_lm(
        [action("text = use_skill(name='csv-style')\nprint(text)"), submit("text.splitlines()[-1]")]
    )
    result = await runtime.run_turn(TurnRequest(session_id="u", task="style?"))
    assert result.answer == "Use ; as separator."
    assert await runtime.read_file("u", "skills/csv-style/SKILL.md")


async def test_sandbox_skill_helpers_list_read_and_run(engine_runtime, lms, tmp_path) -> None:
    skill = tmp_path / ".fleet" / "skills" / "greeter"
    (skill / "scripts").mkdir(parents=True)
    (skill / "references").mkdir()
    (skill / "SKILL.md").write_text(
        "---\nname: greeter\ndescription: Greets people.\n---\nRun scripts/hello.py NAME.\n"
    )
    (skill / "references" / "tone.md").write_text("Be warm.\n")
    (skill / "scripts" / "hello.py").write_text(
        "import os, sys\nprint('hello', sys.argv[1], os.path.basename(os.getcwd()))\n"
    )
    runtime = engine_runtime
    await runtime.new_session("h", mode="rlm")
    lms.root = scripted_lm(
        [
            action(
                "names = [s['name'] for s in list_skills()]\n"
                "tone = read_skill_reference(name='greeter', path='references/tone.md')\n"
                "run = run_skill_script('greeter', 'scripts/hello.py', ['Ada'])\n"
                "print(names, tone, run)"
            ),
            submit("' | '.join([str('greeter' in names), tone.strip(), run['stdout'].strip()])"),
        ]
    )
    result = await runtime.run_turn(TurnRequest(session_id="h", task="greet Ada"))
    assert result.status == "completed", result.error
    assert result.answer == "True | Be warm. | hello Ada greeter"
    assert result.usage.sandbox_errors == 0
