"""The latest (or earliest) row of each key is kept after sorting by the date
(engine/daterewrites.py): a program that keeps the last row of each key in file order is sorted
by the inputs' one date column first, line numbers kept, and a program that sorts is left as
it is; the scripted model, the real local sandbox."""

from __future__ import annotations

from fleet_core.engine.daterewrites import date_order, sorted_by_date
from fleet_core.engine.scripted_lm import scripted_lm
from tests.engine.support import dataset_session, fenced, task_cells
from tests.engine.support import small_turn as turn

TABLES = {"files/stock.csv": [("Item", "text"), ("Counted On", "date text"), ("Qty", "int")]}
SORTED = "(df.sort_values('Counted On', kind='stable') if 'Counted On' in df else df)"


def test_the_task_and_the_inputs_say_which_end_of_which_date_is_kept() -> None:
    assert date_order("Keep the latest count of each item.", TABLES) == ("Counted On", "last")
    assert date_order("Keep each contact's earliest signup.", TABLES) == ("Counted On", "first")
    assert date_order("Keep the first and third quartiles.", TABLES) is None
    assert date_order("The latest and the earliest count.", TABLES) is None
    two = {**TABLES, "files/b.csv": [("Shipped", "date text")]}
    assert date_order("Keep the latest count.", two) is None


def test_a_keep_in_file_order_is_sorted_by_the_date_first() -> None:
    order = ("Counted On", "last")
    code = (
        "df = pd.read_csv('files/stock.csv')\n"
        "last = df.drop_duplicates(subset=['Item'], keep='last')"
    )
    assert sorted_by_date(code, order).splitlines()[1] == (
        f"last = {SORTED}.drop_duplicates(subset=['Item'], keep='last')"
    )
    grouped = "last = df.groupby('Item').tail(1)"
    assert sorted_by_date(grouped, order) == f"last = {SORTED}.groupby('Item').tail(1)"
    assert sorted_by_date("last = df.groupby('Item').last()", order).startswith(f"last = {SORTED}")
    # the other end, a program that sorts, or no order: unchanged
    assert sorted_by_date(code, ("Counted On", "first")) == code
    ordered = code.replace("df.drop", "df.sort_values('Counted On').drop")
    assert sorted_by_date(ordered, order) == ordered
    assert sorted_by_date(code, None) == code
    bare = "t = df.copy()\nt.sort_values('Counted On')\nlast = t.drop_duplicates(keep='last')"
    assert "t.sort_values('Counted On', kind='stable')" in sorted_by_date(bare, order)  # a no-op
    inplace = bare.replace("'Counted On')", "'Counted On', inplace=True)")
    assert sorted_by_date(inplace, order) == inplace
    after = "last = t.drop_duplicates(keep='last')\nt = t.sort_values('Counted On')"
    assert "kind='stable'" in sorted_by_date(after, order)  # sorted only after the keep
    assert sorted_by_date("last = df.groupby('Item').tail(2)", order).startswith("last = df.")
    first = "first = df.drop_duplicates(subset=['Item'])"  # keep defaults to "first"
    assert sorted_by_date(first, ("Counted On", "first")) == (
        f"first = {SORTED}.drop_duplicates(subset=['Item'])"
    )


STOCK = "Item,Counted On,Qty\nA,2025-03-01,7\nB,2025-01-01,5\nA,2025-01-01,10\nB,2025-02-01,4\n"
TASK = (
    "Keep the latest count (by Counted On) of each Item in files/stock.csv and print their total "
    "Qty as @total_qty[N]."
)
#: As the seed-80 stock_counts programs wrote it: the last row in file order, not the latest.
IN_FILE_ORDER = (
    "df = pd.read_csv('files/stock.csv')\n"
    "latest = df.drop_duplicates(subset=['Item'], keep='last')\n"
    "print(f\"@total_qty[{latest['Qty'].sum()}]\")"
)


async def test_a_turn_keeps_the_latest_row_not_the_last_one_written(
    open_runtime, lms, tmp_path
) -> None:
    runtime = await open_runtime(FLEET_ENGINE_PROFILE="small")
    await dataset_session(runtime, tmp_path, "stock.csv", STOCK)
    lms.root = scripted_lm([fenced(IN_FILE_ORDER)])
    result, events = await turn(runtime, TASK)
    assert result.status == "completed", result.error
    assert result.answer.strip() == "@total_qty[11]"  # A 7 (March) + B 4 (February); not 15
    assert len(lms.root.engine_script.requests) == 1
    assert "sort_values('Counted On', kind='stable')" in task_cells(events)[-1]
