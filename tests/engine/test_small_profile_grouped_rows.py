"""The grouped table saved where a program saved the rows before grouping them
(engine/grouprewrites.py): only when a table in the program's namespace is grouped by the
artifact's group column and aggregates its rows; otherwise the doubt goes to the model. The
scripted model and the real local sandbox."""

from __future__ import annotations

from fleet_core.engine.grouprewrites import grouped_saved, parse_grouped
from fleet_core.engine.scripted_lm import scripted_lm
from tests.engine.support import dataset_session, fenced
from tests.engine.support import small_turn as turn

SMALL = {"FLEET_ENGINE_PROFILE": "small"}
SALES = "order,country,revenue\n1,Peru,10.5\n2,Chile,4\n3,Peru,2.25\n4,Chile,1\n5,Cuba,7\n"
OUT = "artifacts/revenue_by_country.csv"
TASK = (
    "Compute the revenue per country in files/sales.csv, save it to "
    f"{OUT} with the columns country and revenue, and print the country with the most "
    "revenue as @top_country[name]."
)
READ = "df = pd.read_csv('files/sales.csv')[['country', 'revenue']]\n"
TOP = "top = grouped.sort_values('revenue', ascending=False).index[0]\n"
PRINT = 'print(f"@top_country[{top}]")'
ROWS_SAVED = (
    READ
    + "grouped = df.groupby('country').sum()\n"
    + TOP
    + f"df.to_csv('{OUT}', index=False)\n"
    + PRINT
)
GROUPED_FILE = "country,revenue\nChile,5.0\nCuba,7.0\nPeru,12.75"


async def artifact(runtime) -> str:
    text = (await runtime.read_file("s", OUT)).decode()
    return "\n".join(sorted(text.strip().splitlines()[1:]))


async def test_the_grouped_table_is_saved_in_place_of_the_rows(open_runtime, lms, tmp_path):
    runtime = await open_runtime(**SMALL)
    await dataset_session(runtime, tmp_path, "sales.csv", SALES)
    lms.root = scripted_lm([fenced(ROWS_SAVED)])
    result, _ = await turn(runtime, TASK)
    assert result.status == "completed", result.error
    assert result.answer.startswith("@top_country[Peru]")
    assert len(lms.root.engine_script.requests) == 1  # mended by the host, no model call
    assert await artifact(runtime) == "\n".join(sorted(GROUPED_FILE.splitlines()[1:]))


async def test_a_continuation_that_saved_the_rows_is_mended_too(open_runtime, lms, tmp_path):
    """Seed-88 ``orders_json`` (tune): the program printed the tags, the next step wrote
    ``df.to_csv(...)``: the rows before grouping."""
    runtime = await open_runtime(**SMALL)
    await dataset_session(runtime, tmp_path, "sales.csv", SALES)
    first = READ + "grouped = df.groupby('country').sum()\n" + TOP + PRINT
    step = f"df.to_csv('{OUT}', index=False)"
    lms.root = scripted_lm([fenced(first), fenced(step)])
    result, _ = await turn(runtime, TASK)
    assert result.status == "completed", result.error
    assert len(lms.root.engine_script.requests) == 2
    assert await artifact(runtime) == "\n".join(sorted(GROUPED_FILE.splitlines()[1:]))


async def test_without_a_grouped_table_the_doubt_goes_to_the_model(open_runtime, lms, tmp_path):
    runtime = await open_runtime(**SMALL)
    await dataset_session(runtime, tmp_path, "sales.csv", SALES)
    # a table of the right labels that is not an aggregate of the saved rows is no proof
    wrong = ROWS_SAVED.replace(
        "grouped = df.groupby('country').sum()\n",
        "grouped = df.groupby('country').sum() * 2\n",
    )
    fixed = READ + "grouped = df.groupby('country', as_index=False).sum()\n"
    fixed += f"grouped.to_csv('{OUT}', index=False)\n" + 'print("@top_country[Peru]")'
    lms.root = scripted_lm([fenced(wrong), fenced(fixed)])
    result, _ = await turn(runtime, TASK)
    assert result.status == "completed", result.error
    requests = lms.root.engine_script.requests
    assert len(requests) == 2
    assert "the program saved the rows before grouping them" in requests[1]


def test_the_saved_name_is_replaced_by_the_grouped_tables_columns() -> None:
    code = f"x = 1\ndf.to_csv('{OUT}', index=False)\nprint(x)"
    mended = grouped_saved(code, OUT, "df", "grouped", ["country", "revenue"], ("country",))
    assert mended is not None
    lines = mended.splitlines()
    assert len(lines) == 3 and lines[0] == "x = 1" and lines[2] == "print(x)"
    assert lines[1].startswith("(grouped.reset_index() if grouped.index.names == ['country']")
    assert lines[1].endswith("[['country', 'revenue']].to_csv('" + OUT + "', index=False)")
    assert parse_grouped('@@fleet-grouped {"name": "g", "columns": ["a"]}') == ("g", ["a"])
    assert parse_grouped("@@fleet-grouped {}") is None
