"""The small-model profile's code-first Flex route (engine/codefirst.py): one program, repaired
with only its error on a stable prefix, bounded, sampled and asked as configured, and the optional
self-check; with the scripted model and the real local sandbox.
Artifact checks and doubts: test_small_profile_inspection.py."""

from __future__ import annotations

import json
from typing import Any

import dspy
from dspy.lm15 import Message

from fleet_core.engine.codefirst import (
    CODE_GRAMMAR,
    REPAIR_TEMPERATURE,
    SYSTEM,
    CodeFirst,
    error_digest,
    extract_code,
)
from fleet_core.engine.profile import EngineProfile, dataset_preview
from fleet_core.engine.scripted_lm import scripted_lm
from fleet_core.models import TurnRequest
from tests.engine.support import (
    EXPECTED,
    LOG_PROGRAM,
    LOG_TASK,
    PROGRAM,
    TASK,
    RecordingEngine,
    artifact_rows,
    fenced,
    log_session,
    quick_session,
    recording_lm,
    task_cells,
)

BROKEN = PROGRAM.replace("'revenue'].sum()", "'amount'].sum()")  # KeyError: no such column


# --- code-first Flex --------------------------------------------------------------------------


async def test_code_first_repairs_with_only_the_error_on_a_stable_prefix(
    open_runtime, lms, tmp_path
) -> None:
    runtime = await open_runtime(FLEET_ENGINE_PROFILE="small")
    await quick_session(runtime, tmp_path)
    lms.root = scripted_lm([fenced(BROKEN), fenced(PROGRAM)])
    events: list[Any] = []
    result = await runtime.run_turn(TurnRequest(session_id="s", task=TASK), on_event=events.append)
    assert result.status == "completed", result.error
    assert await artifact_rows(runtime) == EXPECTED
    first, second = lms.root.engine_script.requests
    assert first.startswith(SYSTEM)
    assert second.startswith(first)  # the cached prefix is the whole first prompt
    added = second[len(first) :]
    assert "KeyError" in added and "amount" in added
    assert len(added) < len(fenced(BROKEN)) + 1_500  # the program and its error, nothing else
    assert len(task_cells(events)) == 2
    assert result.usage.calls_by_category == {"generation": 2}


async def test_code_first_start_is_the_same_in_every_turn(open_runtime, lms, tmp_path) -> None:
    runtime = await open_runtime(FLEET_ENGINE_PROFILE="small")
    await quick_session(runtime, tmp_path)
    lms.root = scripted_lm([fenced(PROGRAM), fenced("print('again')")])
    await runtime.run_turn(TurnRequest(session_id="s", task=TASK))
    await runtime.run_turn(TurnRequest(session_id="s", task="Print again."))
    one, two = lms.root.engine_script.requests
    shared = len(SYSTEM + "\nWorkspace files:\nfiles/sales.csv (")
    assert one[:shared] == two[:shared]


async def test_code_first_first_prompt_is_short(open_runtime, lms, tmp_path) -> None:
    runtime = await open_runtime(FLEET_ENGINE_PROFILE="small")
    await quick_session(runtime, tmp_path)
    lms.root = scripted_lm([fenced(PROGRAM)])
    await runtime.run_turn(TurnRequest(session_id="s", task=TASK))
    prompt = lms.root.engine_script.requests[0]
    assert len(prompt) < 2_700  # about 750 tokens; the default action prompt is 4x that
    assert "north,100" in prompt  # the dataset's first lines
    assert "'region' (text), 'revenue' (float)" in prompt  # its columns, exactly


def test_a_json_datasets_preview_shows_the_keys_of_its_first_records() -> None:
    body = json.dumps([{"order_id": 1, "lines": [{"item": "gizmo", "qty": 3}]}] * 3, indent=1)
    manifest = (
        "files/o.json  (99 bytes, sha256 "
        + "a" * 64
        + ")\n"
        + "\n".join("    " + line for line in body.splitlines()[:20])
    )
    preview = dataset_preview(manifest, "files/o.json")
    assert '"item": "gizmo", "qty": 3' in preview and "\n" not in preview


async def test_code_first_accepts_a_reply_that_is_only_code(open_runtime, lms, tmp_path) -> None:
    runtime = await open_runtime(FLEET_ENGINE_PROFILE="small")
    await quick_session(runtime, tmp_path)
    lms.root = scripted_lm([PROGRAM])  # no fence, no field headers
    result = await runtime.run_turn(TurnRequest(session_id="s", task=TASK))
    assert result.status == "completed", result.error
    assert await artifact_rows(runtime) == EXPECTED


async def test_code_first_answer_from_the_artifact_when_nothing_printed(
    open_runtime, lms, tmp_path
) -> None:
    runtime = await open_runtime(FLEET_ENGINE_PROFILE="small")
    await quick_session(runtime, tmp_path)
    quiet = PROGRAM.replace("print(totals.to_string(index=False))", "totals")
    quiet = quiet.rsplit("\n", 1)[0] + "\nNone"
    quiet2 = quiet.replace("import os", "import os  # again")  # not a repeat: it runs
    lms.root = scripted_lm([fenced(quiet), fenced(quiet2), fenced(quiet2 + "\nNone")])
    result = await runtime.run_turn(TurnRequest(session_id="s", task=TASK))
    assert result.status == "completed", result.error
    assert "printed nothing" in lms.root.engine_script.requests[1]  # asked to print the answer
    assert "Saved artifacts/revenue_by_region.csv:" in result.answer
    assert "north,150.5" in result.answer and "south,250.5" in result.answer


async def test_code_first_repairs_are_sampled_and_a_repeat_is_not_rerun(
    open_runtime, lms, tmp_path
) -> None:
    runtime = await open_runtime(FLEET_ENGINE_PROFILE="small")
    await quick_session(runtime, tmp_path)
    lms.root = recording_lm([fenced(BROKEN), fenced(BROKEN), fenced(PROGRAM)])
    events: list[Any] = []
    result = await runtime.run_turn(TurnRequest(session_id="s", task=TASK), on_event=events.append)
    assert result.status == "completed", result.error
    assert len(task_cells(events)) == 2  # the repeated program never ran again
    temperatures = [c.temperature for c in lms.root.engine_script.configs]
    assert temperatures == [None, REPAIR_TEMPERATURE, REPAIR_TEMPERATURE]  # none configured
    assert all(c.max_tokens == 300 for c in lms.root.engine_script.configs)  # output capped


async def test_code_first_gives_up_after_bounded_repairs(open_runtime, lms, tmp_path) -> None:
    runtime = await open_runtime(
        FLEET_ENGINE_PROFILE="small",
        FLEET_ENGINE__SMALL_REPAIRS="1",
        FLEET_ENGINE__SMALL_EXTRA_REPAIRS="0",  # test_small_profile_extra_repairs.py
        FLEET_ENGINE__SMALL_FRESH_RETRY="false",  # test_small_profile_fresh_retry.py
    )
    await quick_session(runtime, tmp_path)
    lms.root = scripted_lm([fenced("1/0"), fenced("[][1]"), fenced(PROGRAM)])
    result = await runtime.run_turn(TurnRequest(session_id="s", task=TASK))
    assert result.status == "failed"
    assert "code-first" in (result.error.message if result.error else "")
    assert lms.root.engine_script.remaining == 1  # 1 program + 1 repair


async def test_code_first_answers_from_an_artifact_written_before_a_later_step_failed(
    open_runtime, lms, tmp_path
) -> None:
    runtime = await open_runtime(FLEET_ENGINE_PROFILE="small", FLEET_ENGINE__SMALL_REPAIRS="1")
    await quick_session(runtime, tmp_path)
    crashing = PROGRAM + "\nprint(f'{totals:.2f}')"  # TypeError after the artifact is written
    lms.root = scripted_lm([fenced(crashing), fenced(crashing)])
    result = await runtime.run_turn(TurnRequest(session_id="s", task=TASK))
    assert result.status == "completed", result.error
    assert "last step failed: " in result.answer and "Error" in result.answer
    assert "north,150.5" in result.answer
    assert "same program again" in lms.root.engine_script.requests[2]  # the repeat, called out
    # the next Turn's failure is not covered by the earlier Turn's artifact
    lms.root = scripted_lm([fenced("1/0"), fenced("1/0")])
    result = await runtime.run_turn(TurnRequest(session_id="s", task=TASK))
    assert result.status == "failed"


def test_code_first_on_llama_cpp_sends_the_grammar_and_repeat_penalty() -> None:
    engine = RecordingEngine([fenced("print(1)")])
    lm = dspy.LM("openai/scripted", engine=engine, cache=False)
    profile = EngineProfile(name="small", max_tokens=300, constrained=True, grammar=True)
    step = CodeFirst(lm=lm, control=None, interpreter=None, profile=profile)  # type: ignore[arg-type]
    assert step._ask([Message.user("task")], None) == fenced("print(1)")
    extensions = engine.configs[0].extensions
    assert extensions["grammar"] == CODE_GRAMMAR and extensions["repeat_penalty"] == 1.1
    assert engine.configs[0].temperature is None  # this LM configures none
    plain = RecordingEngine([fenced("print(1)")])
    step.lm = dspy.LM("openai/scripted", engine=plain, cache=False)
    step.profile = EngineProfile(name="small", max_tokens=300, constrained=False)
    step._ask([Message.user("task")], None)
    assert not plain.configs[0].extensions  # a hosted endpoint never gets llama.cpp knobs


def test_code_first_asks_at_the_configured_temperature_and_warmer_after_a_repeat() -> None:
    """An explicit lm15 Request carries none of the LM's defaults: without this the embedded
    server sampled every program at its own default (0.8), not ``[llm] temperature`` (0.0)."""
    engine = RecordingEngine([fenced("print(1)"), fenced("print(2)")])
    lm = dspy.LM("openai/scripted", engine=engine, cache=False, temperature=0.0)
    profile = EngineProfile(name="small", max_tokens=300)
    step = CodeFirst(lm=lm, control=None, interpreter=None, profile=profile)  # type: ignore[arg-type]
    step._ask([Message.user("task")], None)
    step._ask([Message.user("task")], 0.4)
    assert [c.temperature for c in engine.configs] == [0.0, 0.4]


def test_the_error_fed_back_is_the_programs_own_frames() -> None:
    text = (
        "ParserError: Expected 5 fields in line 2, saw 6\n\nTraceback (most recent call last):\n"
        '  File "<cell-3>", line 4, in <module>\n    df = pd.read_csv("files/app.log", sep=" ")\n'
        + "".join(f'  File "/lib/pandas/x{i}.py", line {i}, in f\n    y()\n' for i in range(40))
        + "pandas.errors.ParserError: Expected 5 fields in line 2, saw 6"
    )
    digest = error_digest(text)
    assert digest.splitlines() == [
        "ParserError: Expected 5 fields in line 2, saw 6",
        'File "<cell-3>", line 4, in <module>',
        '    df = pd.read_csv("files/app.log", sep=" ")',
        "pandas.errors.ParserError: Expected 5 fields in line 2, saw 6",
    ]


def test_extract_code_accepts_fenced_bare_and_field_replies() -> None:
    assert extract_code("Here:\n```python\nprint(1)\n```\nDone") == "print(1)"
    assert extract_code("print(2)") == "print(2)"
    assert extract_code("[[ ## code ## ]]\nprint(3)\n[[ ## completed ## ]]") == "print(3)"
    assert extract_code("```python\nprint(4)\n") == "print(4)"  # cut off at the token cap


async def test_code_first_programs_find_os_and_pandas_imported(open_runtime, lms, tmp_path) -> None:
    """A small model's program often uses os or pd unimported, and its repairs kept that
    mistake: the host imports the common modules before the first program runs."""
    runtime = await open_runtime(FLEET_ENGINE_PROFILE="small")
    await quick_session(runtime, tmp_path)
    lms.root = scripted_lm([fenced(PROGRAM.replace("import os\nimport pandas as pd\n", ""))])
    events: list[Any] = []
    result = await runtime.run_turn(TurnRequest(session_id="s", task=TASK), on_event=events.append)
    assert result.status == "completed", result.error
    assert await artifact_rows(runtime) == EXPECTED
    assert len(task_cells(events)) == 1


async def test_code_first_answer_carries_no_deprecation_warnings(open_runtime, lms, tmp_path):
    runtime = await open_runtime(FLEET_ENGINE_PROFILE="small")
    await quick_session(runtime, tmp_path)
    noisy = "import warnings\nwarnings.warn('old API', DeprecationWarning)\n" + PROGRAM
    noisy += "\nwarnings.warn('changes soon', FutureWarning)"
    lms.root = scripted_lm([fenced(noisy)])
    result = await runtime.run_turn(TurnRequest(session_id="s", task=TASK))
    assert result.status == "completed", result.error
    assert "north" in result.answer
    assert "old API" not in result.answer and "changes soon" not in result.answer


# --- self-check -------------------------------------------------------------------------------


SELF_CHECK_ON = {
    "FLEET_ENGINE_PROFILE": "small",
    "FLEET_ENGINE__SMALL_SELF_CHECK": "true",
    "FLEET_ENGINE__SMALL_EXTRA_REPAIRS": "0",  # test_small_profile_extra_repairs.py
}


async def test_self_check_ok_keeps_the_checked_program(open_runtime, lms, tmp_path) -> None:
    """``[engine] small_self_check``: after the first good program the model sees its result
    and the task once, on the cached prefix; "OK" ends the Turn with that program's answer."""
    runtime = await open_runtime(**SELF_CHECK_ON)
    await quick_session(runtime, tmp_path)
    lms.root = scripted_lm([fenced(PROGRAM), "OK"])
    events: list[Any] = []
    result = await runtime.run_turn(TurnRequest(session_id="s", task=TASK), on_event=events.append)
    assert result.status == "completed", result.error
    first, check = lms.root.engine_script.requests
    assert check.startswith(first)
    assert "north,150.5" in check[len(first) :] and f"Check it against the task: {TASK}" in check
    assert len(task_cells(events)) == 1
    assert "north,150.5" in result.answer


async def test_self_check_runs_the_corrected_program(open_runtime, lms, tmp_path) -> None:
    runtime = await open_runtime(**SELF_CHECK_ON)
    await log_session(runtime, tmp_path)
    warn = LOG_PROGRAM.replace("CONDITION", "' WARN ' in l")  # runs, wrong lines
    right = LOG_PROGRAM.replace("CONDITION", "' ERROR ' in l")
    lms.root = scripted_lm([fenced(warn), fenced(right)])
    result = await runtime.run_turn(TurnRequest(session_id="s", task=LOG_TASK))
    assert result.status == "completed", result.error
    saved = (await runtime.read_file("s", "artifacts/errors.txt")).decode()
    assert saved.count(" ERROR ") == 2 and " WARN " not in saved
    assert "2 ERROR lines" in result.answer


async def test_self_check_restores_the_checked_program_when_its_correction_fails(
    open_runtime, lms, tmp_path
) -> None:
    """A "correction" that breaks and is never repaired does not cost the good result: the
    host runs the checked program again and answers with it."""
    runtime = await open_runtime(**SELF_CHECK_ON)
    await quick_session(runtime, tmp_path)
    broken = [BROKEN.replace("amount", f"amount{i}") for i in range(4)]  # distinct failures
    lms.root = scripted_lm([fenced(PROGRAM), *map(fenced, broken)])
    result = await runtime.run_turn(TurnRequest(session_id="s", task=TASK))
    assert result.status == "completed", result.error
    assert len(lms.root.engine_script.requests) == 4  # the program, a correction, 2 repairs
    assert await artifact_rows(runtime) == EXPECTED
    assert "north" in result.answer and "150.5" in result.answer


def test_a_self_check_reply_approves_with_ok_prose_or_the_same_program() -> None:
    from fleet_core.engine.codefirst import approves

    assert approves("OK", PROGRAM) and approves("```python\nOK\n```", PROGRAM)
    assert approves("Yes, the program computes the totals per region.", PROGRAM)
    assert approves(fenced("# again\n" + PROGRAM), PROGRAM)
    assert not approves(fenced(BROKEN), PROGRAM) and not approves(BROKEN, PROGRAM)
