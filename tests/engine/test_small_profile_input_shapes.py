"""The inputs' structure in the code-first first prompt (engine/inputshape.py): a JSON or JSON
Lines input's reader (``json.loads`` per line for JSON Lines, which the system prompt once
steered to ``json.load``), record count and every key with its types and how many records lack
it; a table's row count and its columns' missing values as pandas reads them. Turns run with
the scripted model and the real local sandbox; the structure is read in a host cell there, and
the program's names are left as they were."""

from __future__ import annotations

import json
from pathlib import Path

from fleet_core.engine.codefirst import SYSTEM
from fleet_core.engine.inputshape import (
    MAX_CHARS,
    input_structures,
    json_structure,
    table_structure,
)
from fleet_core.engine.scripted_lm import scripted_lm
from tests.engine.support import dataset_session, fenced, task_cells
from tests.engine.support import small_turn as turn

SMALL = {"FLEET_ENGINE_PROFILE": "small"}

EVENTS = "".join(
    json.dumps(
        {"user": f"u{i % 3}", "kind": "click" if i % 2 else "view"} | ({"ms": i} if i % 4 else {})
    )
    + "\n"
    for i in range(12)
)
EVENTS_TASK = "files/events.jsonl holds one event a line. Print how many are clicks as @clicks[N]."
BY_LINES = (
    "records = [json.loads(line) for line in open('files/events.jsonl') if line.strip()]\n"
    "clicks = sum(1 for r in records if r['kind'] == 'click')\n"
    'print(f"@clicks[{clicks}]")'
)


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_json_lines_are_read_a_line_at_a_time_and_a_missing_key_is_counted(tmp_path) -> None:
    shown = json_structure(write(tmp_path, "events.jsonl", EVENTS))
    assert "[json.loads(line) for line in open(" in shown
    assert "JSON Lines, one value a line: 12 values" in shown
    assert "'user': str, 'kind': str, 'ms': int (in 9 of 12)" in shown


def test_nested_objects_and_lists_of_objects_show_their_own_keys(tmp_path) -> None:
    orders = [
        {"id": 1, "customer": {"country": "Peru"}, "items": [{"sku": "a", "qty": 2}]},
        {"id": 2, "customer": {"country": None}, "items": [], "note": "rush"},
    ]
    shown = json_structure(write(tmp_path, "orders.json", json.dumps(orders)))
    assert "data = json.load(open(" in shown and "a JSON list of 2 items" in shown
    assert "'customer': object with {'country': str or null}" in shown
    assert "'items': list of objects with {'sku': str, 'qty': int}" in shown
    assert "'note': str (in 1 of 2)" in shown


def test_a_long_json_lines_file_says_how_much_of_it_was_read(tmp_path, monkeypatch) -> None:
    from fleet_core.engine import inputshape

    monkeypatch.setattr(inputshape, "MAX_RECORDS", 5)
    shown = json_structure(write(tmp_path, "events.jsonl", EVENTS))
    assert "JSON Lines, one value a line: its first 5 lines read" in shown


def test_lines_that_are_not_json_are_counted_and_a_broken_file_is_said(tmp_path) -> None:
    shown = json_structure(write(tmp_path, "mixed.jsonl", EVENTS + "not json\n"))
    assert "(1 more line is not JSON: skip such lines)" in shown
    broken = json_structure(write(tmp_path, "broken.json", "{oops"))
    assert "not readable as JSON (JSONDecodeError" in broken


def test_a_wide_record_is_bounded_and_a_text_input_is_left_out(tmp_path) -> None:
    wide = [{f"column_{i}_{'x' * 40}": i for i in range(200)}]
    shown = json_structure(write(tmp_path, "wide.json", json.dumps(wide)))
    assert len(shown) <= MAX_CHARS and "200 keys, the first 24: {" in shown
    log = write(tmp_path, "app.log", "a b c\n")
    assert input_structures([log]) == ""


def test_a_tables_rows_and_missing_values_are_counted_as_pandas_reads_them(tmp_path) -> None:
    table = "id,Price ($),note\n1,2.5,\n2,NA,ok\n3,,n/a\n4,1.0,fine\n"
    shown = table_structure(write(tmp_path, "t.csv", table))
    assert shown.endswith(
        ": 4 rows; missing values (as pandas reads them) in 'Price ($)' 2, 'note' 2"
    )
    semicolons = table_structure(write(tmp_path, "s.csv", "a;b\n1;2\n3;4\n"))
    assert semicolons.endswith(": 2 rows, no missing values")
    assert "t.csv: 4 rows" in input_structures([str(tmp_path / "t.csv")])


def test_the_system_prompt_reads_json_lines_line_by_line() -> None:
    assert "a .jsonl file with json.loads on each line" in SYSTEM


async def test_a_json_lines_inputs_structure_reaches_the_first_prompt(
    open_runtime, lms, tmp_path
) -> None:
    runtime = await open_runtime(**SMALL)
    await dataset_session(runtime, tmp_path, "events.jsonl", EVENTS)
    lms.root = scripted_lm([fenced(BY_LINES)])
    result, events = await turn(runtime, EVENTS_TASK)
    assert result.status == "completed", result.error
    assert result.answer.strip() == "@clicks[6]"
    prompt = lms.root.engine_script.requests[0]
    assert (
        "files/events.jsonl: read it with records = [json.loads(line) for line in "
        "open('files/events.jsonl') if line.strip()]" in prompt
    )
    assert "'ms': int (in 9 of 12)" in prompt
    assert prompt.index("'ms': int") < prompt.rindex("Task: ")
    assert not any("_fleet_shape" in cell for cell in task_cells(events))


async def test_the_structure_cell_leaves_the_programs_names_alone(
    open_runtime, lms, tmp_path
) -> None:
    """The host cell runs the module in a namespace of its own: a program that uses a name
    the module defines (``json_structure``) finds it undefined, as it would without the cell."""
    runtime = await open_runtime(**SMALL)
    await dataset_session(runtime, tmp_path, "events.jsonl", EVENTS)
    probe = "print(f\"@clicks[{'json_structure' in globals() or '_fleet_shape' in globals()}]\")"
    lms.root = scripted_lm([fenced(probe)])
    result, _ = await turn(runtime, EVENTS_TASK)
    assert result.answer.strip().startswith("@clicks[False]")


async def test_a_tables_missing_values_reach_the_first_prompt(open_runtime, lms, tmp_path) -> None:
    runtime = await open_runtime(**SMALL)
    await dataset_session(runtime, tmp_path, "prices.csv", "item,price\na,2.5\nb,\nc,4.0\n")
    program = (
        "df = pd.read_csv('files/prices.csv')\nprint(f\"@missing[{df['price'].isna().sum()}]\")"
    )
    lms.root = scripted_lm([fenced(program)])
    result, _ = await turn(runtime, "How many prices are missing in files/prices.csv? @missing[N]")
    assert result.answer.strip() == "@missing[1]"  # what the prompt said pandas would read
    prompt = lms.root.engine_script.requests[0]
    shown = "files/prices.csv: 3 rows; missing values (as pandas reads them) in 'price' 1"
    assert shown in prompt
    assert prompt.index("Columns of files/prices.csv") < prompt.index(shown)


def test_the_missing_cells_are_pandas_own_defaults() -> None:
    from pandas._libs.parsers import STR_NA_VALUES

    from fleet_core.engine.inputshape import PANDAS_NA

    assert set(STR_NA_VALUES) == PANDAS_NA


def test_a_json_input_read_with_a_table_reader_is_named_with_its_reader() -> None:
    from fleet_core.engine.textinputs import table_reader

    inputs = ["files/orders.json", "files/events.jsonl", "files/sales.csv"]
    said = table_reader("df = pd.read_csv('files/orders.json')", {}, inputs)
    assert said is not None and "files/orders.json is JSON, not a table" in said
    assert "data = json.load(open('files/orders.json'))" in said
    lines = table_reader('pd.read_table("files/events.jsonl")', {}, inputs)
    assert lines is not None and "[json.loads(line) for line in open(" in lines
    assert table_reader("pd.read_csv('files/sales.csv')", {}, inputs) is None
    assert table_reader("pd.read_json('files/orders.json')", {}, inputs) is None
    assert table_reader("pd.read_csv('files/other.json')", {}, inputs) is None  # not an input


async def test_a_program_reading_json_as_a_table_is_not_run(open_runtime, lms, tmp_path) -> None:
    """Seed-88 ``orders_json`` (tune): after a doubt, three repairs read the orders with
    ``pd.read_csv`` (a ParserError each time, or a dtype error); such a program is stopped
    before it runs and the model is shown the file's reader."""
    runtime = await open_runtime(**SMALL)
    await dataset_session(runtime, tmp_path, "events.jsonl", EVENTS)
    as_table = "df = pd.read_csv('files/events.jsonl')\nprint(f\"@clicks[{len(df)}]\")"
    lms.root = scripted_lm([fenced(as_table), fenced(BY_LINES)])
    result, events = await turn(runtime, EVENTS_TASK)
    assert result.status == "completed", result.error
    assert result.answer.strip() == "@clicks[6]"
    told = lms.root.engine_script.requests[1]
    assert (
        "it reads files/events.jsonl with pandas.read_csv, but files/events.jsonl is JSON" in told
    )
    assert not any("read_csv" in cell for cell in task_cells(events))  # never run
