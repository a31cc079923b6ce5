"""pandas slips of a small model: a legacy offset alias (``resample('M')``, ``Grouper(freq='Q')``,
...), which pandas 3 rejects with "Invalid frequency", is written with its pandas 3 name before
the program runs (engine/rewrites.py), and a ``.dt`` or ``.str`` accessor used on the other kind
of column is converted where it is used and the program run again, with no model call
(engine/repairs.py; the hint that tells how stays for a use the host cannot convert); the
scripted model, the real local sandbox."""

from __future__ import annotations

import pytest

from fleet_core.engine.repairs import (
    accessor_hint,
    converted_accessor,
    dated_grouping,
    grouped_key_kept,
    grouped_label_read,
    table_label,
)
from fleet_core.engine.rewrites import modern_frequencies, modern_frequency
from fleet_core.engine.scripted_lm import scripted_lm
from tests.engine.support import dataset_session, fenced, quick_session, task_cells
from tests.engine.support import small_turn as turn

VISITS = "Date,Visitors\n" + "".join(
    f"2024-{month:02d}-{day:02d},{month * 10 + day}\n" for month in (1, 2, 3) for day in (1, 15)
)
TASK = "Sum the Visitors of files/visits.csv per calendar month and print each month's total."
#: As the embedded model writes it (seen in a seed-14 monthly_series tune transcript: three
#: programs in a row failed on ``Grouper(freq='M')`` although the error names 'ME').
MONTHLY = (
    "df = pd.read_csv('files/visits.csv', parse_dates=['Date'])\n"
    "monthly = df.resample('M', on='Date')['Visitors'].sum()\n"
    "print(monthly.to_string())"
)


def test_legacy_offset_aliases_get_their_pandas_3_names() -> None:
    assert [modern_frequency(a) for a in ("M", "2M", "A-DEC", "Q-NOV", "H", "T", "S")] == [
        "ME",
        "2ME",
        "YE-DEC",
        "QE-NOV",
        "h",
        "min",
        "s",
    ]
    assert [modern_frequency(a) for a in ("ME", "MS", "W", "D", "W-SUN", "min", "month")] == [
        None
    ] * 7


def test_only_offset_calls_are_rewritten_and_the_lines_stay() -> None:
    code = (
        'a = df.resample("M", on="Date").sum()\n'
        "b = df.groupby(pd.Grouper(key='Date', freq='Q'))['x'].mean()\n"
        "c = df['Date'].dt.to_period('M')\n"
        "d = pd.date_range('2024-01-01', periods=3, freq='2H')\n"
        "e = s.asfreq(freq='T')\n"
        "f = df.groupby('M').sum()"
    )
    assert modern_frequencies(code).splitlines() == [
        'a = df.resample("ME", on="Date").sum()',
        "b = df.groupby(pd.Grouper(key='Date', freq='QE'))['x'].mean()",
        "c = df['Date'].dt.to_period('M')",  # a period alias: still right
        "d = pd.date_range('2024-01-01', periods=3, freq='2h')",
        "e = s.asfreq(freq='min')",
        "f = df.groupby('M').sum()",  # a column named M
    ]
    assert modern_frequencies("not python (") == "not python ("


async def test_a_monthly_resample_written_for_old_pandas_runs(open_runtime, lms, tmp_path):
    runtime = await open_runtime(FLEET_ENGINE_PROFILE="small")
    await dataset_session(runtime, tmp_path, "visits.csv", VISITS)
    lms.root = scripted_lm([fenced(MONTHLY)])
    result, events = await turn(runtime, TASK)
    assert result.status == "completed", result.error
    assert result.outcome is not None and result.outcome.kind == "submitted"
    assert "2024-01-31    36" in result.answer and "2024-03-31    76" in result.answer
    [cell] = task_cells(events)
    assert "resample('ME', on='Date')" in cell  # the task cell shows the program as it ran


# --- a .dt (or .str) accessor on the other kind of column ----------------------------------------

#: As the embedded model writes it (seed-13 and seed-15 monthly_series tune transcripts: a CSV's
#: dates read as text, then ``.dt``; one repair wrapped it in try/except and printed nothing).
TEXT_DATES = (
    "df = pd.read_csv('files/visits.csv')\n"
    "df['Month'] = df['Date'].dt.to_period('M')\n"
    "print(df.groupby('Month')['Visitors'].sum().to_string())"
)


def test_the_accessor_hint_names_the_column_on_the_failing_line() -> None:

    error = (
        'Traceback (most recent call last):\n  File "<cell-3>", line 2, in <module>\n'
        "AttributeError: Can only use .dt accessor with datetimelike values"
    )
    assert accessor_hint(error, TEXT_DATES) == (
        "The column 'Date' holds text, not dates (a CSV's dates are read as text): convert it "
        "before using .dt: df['Date'] = pd.to_datetime(df['Date'])"
    )
    strings = error.replace(".dt accessor with datetimelike", ".str accessor with string")
    assert "df['Date'].astype(str)" in accessor_hint(
        strings, TEXT_DATES.replace("].dt.to_period('M')", "].str.upper()")
    )
    assert accessor_hint("KeyError: 'Date'", TEXT_DATES) == ""


async def test_a_dt_accessor_on_text_dates_is_converted_by_the_host(
    open_runtime, lms, tmp_path
) -> None:
    """A seed-23 monthly_series tune transcript: told to convert, the repair converted but
    dropped the line that read the CSV, and the next one dropped the conversion."""
    runtime = await open_runtime(FLEET_ENGINE_PROFILE="small")
    await dataset_session(runtime, tmp_path, "visits.csv", VISITS)
    lms.root = scripted_lm([fenced(TEXT_DATES)])
    result, events = await turn(runtime, TASK)
    assert result.status == "completed", result.error
    assert "2024-01    36" in result.answer
    assert len(lms.root.engine_script.requests) == 1
    assert task_cells(events)[1] == TEXT_DATES.replace(
        "df['Date'].dt", "pd.to_datetime(df['Date']).dt"
    )


def test_which_accessor_uses_the_host_converts() -> None:
    error = (
        'File "<cell-4>", line 2, in <module>\n'
        "AttributeError: Can only use .dt accessor with datetimelike values"
    )
    code = "df = pd.read_csv('v.csv')\nm = df['Date'].dt.month + s['x'].str.len()\nprint(m)"
    assert converted_accessor(error, code) == (
        "df = pd.read_csv('v.csv')\nm = pd.to_datetime(df['Date']).dt.month + s['x'].str.len()"
        "\nprint(m)"
    )
    strings = error.replace(".dt accessor with datetimelike", ".str accessor with string")
    assert "m = df['Date'].dt.month + s['x'].astype(str).str.len()" in (
        converted_accessor(strings, code) or ""
    )
    assert converted_accessor(error, "df = 1\nm = df.Date.dt.month") is None  # no column subscript
    assert converted_accessor("KeyError: 'Date'", code) is None


# --- a grouping by month that does not name the date column -------------------------------------

#: As the embedded model wrote it (seed-50 monthly_series, a G tune transcript: three programs
#: in a row failed with "Only valid with DatetimeIndex ..., but got an instance of 'RangeIndex'").
UNKEYED = (
    "df = pd.read_csv('files/visits.csv')\n"
    "df['Date'] = pd.to_datetime(df['Date'])\n"
    "monthly = df.groupby(pd.Grouper(freq='ME'))['Visitors'].sum()\n"
    "print(monthly.to_string())"
)


async def test_a_grouping_by_month_is_told_the_date_column_by_the_host(
    open_runtime, lms, tmp_path
) -> None:
    runtime = await open_runtime(FLEET_ENGINE_PROFILE="small")
    await dataset_session(runtime, tmp_path, "visits.csv", VISITS)
    lms.root = scripted_lm([fenced(UNKEYED)])
    result, events = await turn(runtime, TASK)
    assert result.status == "completed", result.error
    assert "2024-01-31    36" in result.answer and "2024-03-31    76" in result.answer
    assert len(lms.root.engine_script.requests) == 1
    assert "pd.Grouper(freq='ME', key='Date')" in task_cells(events)[1]


def test_which_groupings_by_time_get_the_date_column() -> None:
    error = (
        'File "<cell-3>", line 1, in <module>\nTypeError: Only valid with DatetimeIndex, '
        "TimedeltaIndex or PeriodIndex, but got an instance of 'RangeIndex'"
    )
    dated = {"files/v.csv": [("Date", "date text"), ("Visitors", "int")]}
    code = "m = df.resample('ME').sum() + df.groupby(pd.Grouper(freq='ME')).sum()"
    assert dated_grouping(error, code, dated) == (
        "m = df.resample('ME', on='Date').sum() + "
        "df.groupby(pd.Grouper(freq='ME', key='Date')).sum()"
    )
    keyed = "m = df.resample('ME', on='Day').sum()"
    assert dated_grouping(error, keyed, dated) is None  # it names a column: another problem
    two = {"files/v.csv": [("Start", "date text"), ("End", "date text")]}
    assert dated_grouping(error, code, two) is None  # which of two date columns: not guessed
    assert dated_grouping("KeyError: 'Date'", code, dated) is None


#: As the embedded model wrote it (seed-67 orders_json, a tune transcript): the group key read as
#: a column after groupby put it in the index; its repair dropped the grouping, and the answer
#: was the largest single item.
GROUPED_KEY = (
    "df = pd.read_csv('files/sales.csv')\n"
    "top = df.groupby('region').sum().sort_values(by='revenue', ascending=False)"
    ".iloc[0]['region']\n"
    'print(f"@top_region[{top}]")'
)


#: The grouped row read on the next line (a seed-76 orders_json tune transcript).
GROUPED_ROW_READ_LATER = (
    "df = pd.read_csv('files/sales.csv')\n"
    "top = df.groupby('region').sum().sort_values('revenue', ascending=False).iloc[0]\n"
    "print(f\"@top_region[{top['region']}]\")"
)


@pytest.mark.parametrize("program", [GROUPED_KEY, GROUPED_ROW_READ_LATER])
async def test_a_group_key_read_as_a_column_is_kept_a_column_by_the_host(
    open_runtime, lms, tmp_path, program: str
) -> None:
    runtime = await open_runtime(FLEET_ENGINE_PROFILE="small")
    await quick_session(runtime, tmp_path)
    lms.root = scripted_lm([fenced(program)])
    result, events = await turn(
        runtime, "Which region of files/sales.csv has the most revenue? Print @top_region[name]."
    )
    assert result.status == "completed", result.error
    assert result.answer.strip() == "@top_region[south]"
    assert len(lms.root.engine_script.requests) == 1
    assert "df.groupby('region', as_index=False).sum()" in task_cells(events)[-1]


def test_only_a_grouping_by_the_missing_key_on_the_failing_line_is_changed() -> None:
    error = "File \"<cell-4>\", line 2, in <module>\nKeyError: 'region'"
    fixed = grouped_key_kept(error, GROUPED_KEY)
    assert fixed is not None
    assert fixed.splitlines()[1].startswith("top = df.groupby('region', as_index=False).sum()")
    assert grouped_key_kept(error.replace("region", "revenue"), GROUPED_KEY) is None
    assert grouped_key_kept(error.replace("line 2", "line 1"), GROUPED_KEY) is None
    assert grouped_key_kept("ValueError: x", GROUPED_KEY) is None


def test_a_group_key_read_from_an_earlier_grouped_row_is_kept_a_column() -> None:
    error = "File \"<cell-4>\", line 3, in <module>\nKeyError: 'region'"
    fixed = grouped_key_kept(error, GROUPED_ROW_READ_LATER)
    assert fixed is not None
    assert fixed.splitlines()[1].startswith("top = df.groupby('region', as_index=False).sum()")
    assert fixed.splitlines()[2] == GROUPED_ROW_READ_LATER.splitlines()[2]
    other = GROUPED_ROW_READ_LATER.replace("{top['region']}", "{df['region']}")
    assert grouped_key_kept(error, other) is None  # df was not grouped


#: A group's label looked up in the table before grouping (a seed-78 orders_json tune
#: transcript: the repair then rewrote the lookup as an iterrows loop that failed twice).
LABEL_IN_UNGROUPED = (
    "df = pd.read_csv('files/sales.csv')\n"
    "top = df.groupby('region').sum().sort_values(by='revenue', ascending=False).index[0]\n"
    "best = df.loc[top, 'revenue']\n"
    'print(f"@top_region[{top}] @top_revenue[{best}]")'
)


def test_a_group_label_looked_up_in_the_ungrouped_table_is_read_from_the_grouped_one() -> None:
    error = "File \"<cell-4>\", line 3, in <module>\nKeyError: 'south'"
    fixed = grouped_label_read(error, LABEL_IN_UNGROUPED)
    assert fixed is not None
    lines = fixed.splitlines()
    assert len(lines) == 4, "line numbers kept"
    assert lines[1] == (
        "grouped = df.groupby('region').sum().sort_values(by='revenue', ascending=False); "
        "top = grouped.index[0]"
    )
    assert lines[2] == "best = grouped.loc[top, 'revenue']"
    series = LABEL_IN_UNGROUPED.replace(".groupby('region')", ".groupby('region')['revenue']")
    series = series.replace("sort_values(by='revenue', ascending=False)", "sort_values()")
    fixed_series = grouped_label_read(error, series)
    assert fixed_series is not None and fixed_series.splitlines()[2] == "best = grouped.loc[top]"
    assert grouped_label_read(error.replace("line 3", "line 1"), LABEL_IN_UNGROUPED) is None
    assert grouped_label_read("ValueError: x", LABEL_IN_UNGROUPED) is None
    other = LABEL_IN_UNGROUPED.replace("df.loc[top", "totals.loc[top")  # not the same table
    assert grouped_label_read(error, other) is None


async def test_a_turn_reads_a_group_label_from_the_grouped_table_without_a_model_call(
    open_runtime, lms, tmp_path
) -> None:
    runtime = await open_runtime(FLEET_ENGINE_PROFILE="small")
    await quick_session(runtime, tmp_path)
    lms.root = scripted_lm([fenced(LABEL_IN_UNGROUPED)])
    result, events = await turn(
        runtime,
        "Which region of files/sales.csv has the most revenue? "
        "Print @top_region[name] @top_revenue[value].",
    )
    assert result.status == "completed", result.error
    assert result.answer.strip().startswith("@top_region[south] @top_revenue[")
    assert len(lms.root.engine_script.requests) == 1
    assert "best = grouped.loc[top, 'revenue']" in task_cells(events)[-1]


#: A one-column monthly table's idxmax() read as a date (seed-82 monthly_series: the same
#: AttributeError three times, then a KeyError).
TABLE_IDXMAX = (
    "df = pd.read_csv('files/visits.csv', parse_dates=['Date'])\n"
    "monthly = df.groupby(pd.Grouper(key='Date', freq='ME')).agg({'Visitors': 'sum'})\n"
    "top = monthly.idxmax().strftime('%Y-%m')\n"
    'print(f"@top_month[{top}]")'
)


def test_an_attribute_of_a_tables_idxmax_is_read_from_its_one_column() -> None:
    error = (
        'File "<cell-4>", line 3, in <module>\n'
        "AttributeError: 'Series' object has no attribute 'strftime'"
    )
    fixed = table_label(error, TABLE_IDXMAX)
    assert fixed is not None
    assert fixed.splitlines()[2] == "top = monthly.squeeze('columns').idxmax().strftime('%Y-%m')"
    assert table_label(error, fixed) is None  # mended once: no loop
    assert table_label(error.replace("strftime", "year"), TABLE_IDXMAX) is None
    assert table_label("ValueError: x", TABLE_IDXMAX) is None


async def test_a_turn_reads_the_top_month_of_a_one_column_table(open_runtime, lms, tmp_path):
    runtime = await open_runtime(FLEET_ENGINE_PROFILE="small")
    await dataset_session(runtime, tmp_path, "visits.csv", VISITS)
    lms.root = scripted_lm([fenced(TABLE_IDXMAX)])
    result, _ = await turn(runtime, TASK + " Print the top month as @top_month[YYYY-MM].")
    assert result.status == "completed", result.error
    assert "@top_month[2024-03]" in result.answer
    assert len(lms.root.engine_script.requests) == 1
