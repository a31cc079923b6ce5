"""The small-model profile's artifact checks (engine/inspection.py, codefirst.py): which files a
task names, what a program left in them, and the doubts the host says once (a missing, empty,
copied, unlabelled or misshapen artifact); with the scripted model and the real local sandbox."""

from __future__ import annotations

import json
from typing import Any

import pytest

from fleet_core.engine.profile import json_template_keys, named_artifacts
from fleet_core.engine.scripted_lm import scripted_lm
from fleet_core.models import TurnRequest
from tests.engine.support import (
    BARE_TOTALS,
    EXPECTED,
    LABELLED_TOTALS,
    LOG,
    LOG_PROGRAM,
    LOG_TASK,
    PROGRAM,
    TASK,
    artifact_rows,
    dataset_session,
    fenced,
    log_session,
    quick_session,
    task_cells,
)

# --- the artifacts a task names ---------------------------------------------------------------


def test_json_template_keys_come_from_the_one_template_a_task_spells() -> None:
    task = 'Save it as {"item": ..., "quantity": ...} to artifacts/top.json.'
    assert json_template_keys(task) == ["item", "quantity"]
    assert json_template_keys("Save the totals to artifacts/top.json.") == []
    assert json_template_keys('Either {"a": 1} or {"b": 2}') == []  # ambiguous: none required


def test_named_artifacts() -> None:
    assert named_artifacts(TASK) == ["artifacts/revenue_by_region.csv"]
    assert named_artifacts("write artifacts/a.json and artifacts/../x.txt") == ["artifacts/a.json"]


def test_an_inspection_without_its_report_counts_every_artifact_unwritten() -> None:
    """A cell whose output lacks the marked line (or holds another file list) is not trusted."""
    from fleet_core.engine.inspection import MARK, parse_inspection

    targets = ["artifacts/a.csv"]
    assert [r.written for r in parse_inspection("noise", targets)] == [False]
    other = MARK + json.dumps([{"path": "artifacts/b.csv", "sha256": "0" * 64}])
    assert [r.path for r in parse_inspection(other, targets)] == targets
    assert not parse_inspection(other, targets)[0].written
    broken = MARK + "[{"
    assert not parse_inspection(broken, targets)[0].written
    good = MARK + json.dumps([{"path": "artifacts/a.csv", "sha256": "0" * 64, "head": "x"}])
    assert parse_inspection("printed\n" + good, targets)[0].head == "x"


# --- checks and doubts ------------------------------------------------------------------------


async def test_code_first_missing_artifact_is_repaired(open_runtime, lms, tmp_path) -> None:
    runtime = await open_runtime(FLEET_ENGINE_PROFILE="small")
    await quick_session(runtime, tmp_path)
    lms.root = scripted_lm([fenced("print('done')"), fenced(PROGRAM)])
    result = await runtime.run_turn(TurnRequest(session_id="s", task=TASK))
    assert result.status == "completed", result.error
    assert "did not write artifacts/revenue_by_region.csv" in lms.root.engine_script.requests[1]


async def test_code_first_checks_a_programs_artifacts_in_one_host_cell(
    open_runtime, lms, tmp_path
) -> None:
    """A program that succeeds at once costs the prelude, the inputs' structure (a CSV dataset:
    its rows and missing values), one check before it and one after."""
    runtime = await open_runtime(FLEET_ENGINE_PROFILE="small")
    await quick_session(runtime, tmp_path)
    lms.root = scripted_lm([fenced(PROGRAM)])
    events: list[Any] = []
    result = await runtime.run_turn(TurnRequest(session_id="s", task=TASK), on_event=events.append)
    assert result.status == "completed", result.error
    host = [
        e.data.code for e in events if e.kind == "code_cell" and e.data.code.startswith("(host:")
    ]
    assert host == [
        "(host: prelude)",
        "(host: input structure)",
        "(host: artifact check)",
        "(host: artifact check)",
    ]
    assert "north,150.5" in result.answer


ORDERS = (
    '[{"id": 1, "lines": [{"item": "gizmo", "qty": 3}, {"item": "flange", "qty": 2}]}, '
    '{"id": 2, "lines": [{"item": "gizmo", "qty": 4}]}]'
)


ORDERS_TASK = (
    "Find the item with the largest total quantity in files/orders.json and save it as "
    '{"item": ..., "quantity": ...} to artifacts/top_item.json.'
)


TOP_ITEM = (
    "import collections, json, os\nos.makedirs('artifacts', exist_ok=True)\n"
    "c = collections.Counter()\n"
    "for o in json.load(open('files/orders.json')):\n"
    "    for line in o['lines']:\n        c[line['item']] += line['qty']\n"
    "top = c.most_common(1)[0]\n"
    "json.dump(RESULT, open('artifacts/top_item.json', 'w'))\nprint(top)"
)


async def test_code_first_sends_back_a_json_artifact_that_misses_the_tasks_keys(
    open_runtime, lms, tmp_path
) -> None:
    """The program ran and wrote the artifact, but as a list where the task spelled out an
    object: the host names the keys in one repair, and the fixed program answers."""
    runtime = await open_runtime(FLEET_ENGINE_PROFILE="small")
    await dataset_session(runtime, tmp_path, "orders.json", ORDERS)
    as_list = TOP_ITEM.replace("RESULT", "top")
    as_object = TOP_ITEM.replace("RESULT", "{'item': top[0], 'quantity': top[1]}")
    lms.root = scripted_lm([fenced(as_list), fenced(as_object)])
    events: list[Any] = []
    result = await runtime.run_turn(
        TurnRequest(session_id="s", task=ORDERS_TASK), on_event=events.append
    )
    assert result.status == "completed", result.error
    repair = lms.root.engine_script.requests[1]
    assert 'wrote artifacts/top_item.json as ["gizmo", 7]' in repair
    assert 'one JSON object with the keys "item", "quantity"' in repair
    saved = json.loads(await runtime.read_file("s", "artifacts/top_item.json"))
    assert saved == {"item": "gizmo", "quantity": 7}
    assert len(task_cells(events)) == 2


async def test_code_first_fails_rather_than_answer_with_a_misshapen_artifact(
    open_runtime, lms, tmp_path
) -> None:
    """Seen on the embedded model: every repair left the JSON artifact without the task's keys;
    the Turn fails naming the problem instead of answering from that file."""
    runtime = await open_runtime(
        FLEET_ENGINE_PROFILE="small", FLEET_ENGINE__SMALL_EXTRA_REPAIRS="0"
    )
    await dataset_session(runtime, tmp_path, "orders.json", ORDERS)
    as_list = [TOP_ITEM.replace("RESULT", "top") + f"  # try {i}" for i in range(4)]
    lms.root = scripted_lm([fenced(program) for program in as_list])
    result = await runtime.run_turn(TurnRequest(session_id="s", task=ORDERS_TASK))
    assert result.status == "failed"
    assert result.error is not None
    assert 'the task asks for one JSON object with the keys "item", "quantity"' in (
        result.error.message
    )


async def test_code_first_names_a_csv_that_lost_its_labels_once(
    open_runtime, lms, tmp_path
) -> None:
    """``Series.to_csv(index=False)`` writes the totals without their regions (seen in 5 of 20
    embedded runs): the host says so; the same program again is run and accepted as meant (it
    is not a failed program, so it is not refused as a repeat)."""
    runtime = await open_runtime(FLEET_ENGINE_PROFILE="small")
    await quick_session(runtime, tmp_path)
    unlabelled = PROGRAM.replace(LABELLED_TOTALS, BARE_TOTALS)
    lms.root = scripted_lm([fenced(unlabelled), fenced(PROGRAM)])
    result = await runtime.run_turn(TurnRequest(session_id="s", task=TASK))
    assert result.status == "completed", result.error
    hint = lms.root.engine_script.requests[1]
    assert "wrote artifacts/revenue_by_region.csv as one column of numbers ('revenue')" in hint
    assert await artifact_rows(runtime) == EXPECTED

    lms.root = scripted_lm([fenced(unlabelled), fenced(unlabelled)])
    events: list[Any] = []
    again = await runtime.run_turn(TurnRequest(session_id="s", task=TASK), on_event=events.append)
    assert again.status == "completed", again.error
    assert len(lms.root.engine_script.requests) == 2
    assert len(task_cells(events)) == 2  # both ran: the repeat was not refused
    assert "revenue" in again.answer


@pytest.mark.parametrize(
    ("condition", "doubt"),
    [
        ("l.startswith('ERROR')", "wrote artifacts/errors.txt empty"),
        ("l.strip()", "wrote artifacts/errors.txt with every line of files/app.log unchanged"),
    ],
)
async def test_code_first_doubts_an_empty_or_copied_artifact_once(
    open_runtime, lms, tmp_path, condition: str, doubt: str
) -> None:
    """A filter that keeps no line (the log's lines start with a timestamp) or every line ran
    and wrote the named file (seen on the embedded model): the host names what it wrote and
    points at the input's first lines; the corrected program answers."""
    runtime = await open_runtime(FLEET_ENGINE_PROFILE="small")
    await log_session(runtime, tmp_path)
    wrong = LOG_PROGRAM.replace("CONDITION", condition)
    right = LOG_PROGRAM.replace("CONDITION", "' ERROR ' in l")
    lms.root = scripted_lm([fenced(wrong), fenced(right)])
    result = await runtime.run_turn(TurnRequest(session_id="s", task=LOG_TASK))
    assert result.status == "completed", result.error
    told = lms.root.engine_script.requests[1]
    assert doubt in told
    assert "The first lines of files/app.log:\n2026-01-01T10:00:00 INFO svc=api" in told
    saved = (await runtime.read_file("s", "artifacts/errors.txt")).decode()
    assert saved.splitlines() == [line for line in LOG.splitlines() if " ERROR " in line]
    assert "2 ERROR lines" in result.answer


async def test_code_first_doubts_a_csv_with_its_header_and_no_rows(
    open_runtime, lms, tmp_path
) -> None:
    """A table built empty (seen on the embedded model: ``pd.DataFrame(counter, columns=...)``)
    written as a header alone is doubted like an empty file; the corrected program answers."""
    runtime = await open_runtime(FLEET_ENGINE_PROFILE="small")
    await quick_session(runtime, tmp_path)
    empty = PROGRAM.replace("totals = df.groupby(", "totals = df[df['region'] == 'North'].groupby(")
    lms.root = scripted_lm([fenced(empty), fenced(PROGRAM)])
    result = await runtime.run_turn(TurnRequest(session_id="s", task=TASK))
    assert result.status == "completed", result.error
    told = lms.root.engine_script.requests[1]
    assert "wrote artifacts/revenue_by_region.csv with its header (region,revenue) and no rows" in (
        told
    )
    assert "The first lines of files/sales.csv:\nregion,revenue" in told
    assert await artifact_rows(runtime) == EXPECTED


async def test_code_first_doubts_a_new_program_that_leaves_the_same_file(
    open_runtime, lms, tmp_path
) -> None:
    """A changed program whose file is still one unlabelled column (seen on the embedded model:
    ``series.reset_index(inplace=False)`` unassigned) is told again; it did not mean it."""
    runtime = await open_runtime(FLEET_ENGINE_PROFILE="small")
    await quick_session(runtime, tmp_path)
    unlabelled = PROGRAM.replace(LABELLED_TOTALS, BARE_TOTALS)
    unassigned = unlabelled.replace("os.makedirs(", "totals.reset_index()\nos.makedirs(")
    lms.root = scripted_lm([fenced(unlabelled), fenced(unassigned), fenced(PROGRAM)])
    result = await runtime.run_turn(TurnRequest(session_id="s", task=TASK))
    assert result.status == "completed", result.error
    first, second, third = lms.root.engine_script.requests
    assert "table = series.reset_index()" in second[len(first) :]
    assert "as one column of numbers" in third[len(second) :]
    assert await artifact_rows(runtime) == EXPECTED


async def test_code_first_accepts_a_doubted_artifact_sent_again(open_runtime, lms, tmp_path):
    """A doubt is said once: the same program again is taken as meant (an empty file may be
    the right answer)."""
    runtime = await open_runtime(FLEET_ENGINE_PROFILE="small")
    await log_session(runtime, tmp_path)
    empty = LOG_PROGRAM.replace("CONDITION", "' CRITICAL ' in l")
    lms.root = scripted_lm([fenced(empty), fenced(empty)])
    result = await runtime.run_turn(TurnRequest(session_id="s", task=LOG_TASK))
    assert result.status == "completed", result.error
    assert "0 ERROR lines" in result.answer
    assert "Saved artifacts/errors.txt (empty)." in result.answer


async def test_code_first_doubts_each_named_file_once(open_runtime, lms, tmp_path) -> None:
    """Two named CSVs: a doubt about the first does not use up the second's (the check used to
    mark every named CSV questioned as soon as one was)."""
    runtime = await open_runtime(FLEET_ENGINE_PROFILE="small")
    await quick_session(runtime, tmp_path)
    task = "Save revenue by region to artifacts/a.csv and artifacts/b.csv."
    labelled, unlabelled = LABELLED_TOTALS, BARE_TOTALS
    program = (
        "df = pd.read_csv('files/sales.csv')\nos.makedirs('artifacts', exist_ok=True)\n"
        "A.to_csv('artifacts/a.csv', index=False)\nB.to_csv('artifacts/b.csv', index=False)\n"
        "print(df.groupby('region')['revenue'].sum())"
    )
    first = program.replace("A.", unlabelled + ".").replace("B.", labelled + ".")
    second = program.replace("A.", labelled + ".").replace("B.", unlabelled + ".")
    fixed = program.replace("A.", labelled + ".").replace("B.", labelled + ".")
    lms.root = scripted_lm([fenced(first), fenced(second), fenced(fixed)])
    result = await runtime.run_turn(TurnRequest(session_id="s", task=task))
    assert result.status == "completed", result.error
    requests = lms.root.engine_script.requests
    assert len(requests) == 3
    assert "wrote artifacts/a.csv as one column" in requests[1]
    assert "wrote artifacts/b.csv as one column" in requests[2][len(requests[1]) :]
    saved = (await runtime.read_file("s", "artifacts/b.csv")).decode()
    assert saved.startswith("region,revenue")
