"""Slips the host mends with no model call: a name written in another case than the one the
program bound (``repairs.case_renamed``), an aggregation that failed on a date or text column
(``repairs.numeric_only_added``). The scripted model and the real local sandbox."""

from __future__ import annotations

from fleet_core.engine.repairs import case_renamed
from fleet_core.engine.scripted_lm import scripted_lm
from tests.engine.support import dataset_session, fenced
from tests.engine.support import small_turn as turn

SMALL = {"FLEET_ENGINE_PROFILE": "small"}
ORDERS = "id,Country,Amount\n1,NL,500\n2,NL,100\n3,DE,700\n"
TASK = "How many orders from NL in files/orders.csv are above 400? Print @count[N]."
#: As the embedded model wrote it (seed-89 filter_rows, tune), resent unchanged three times.
SLIP = (
    "df = pd.read_csv('files/orders.csv')\n"
    "netherlands = df[df['Country'] == 'NL']\n"
    "big = Netherlands[netherlands['Amount'] > 400]\n"
    'print(f"@count[{len(big)}]")'
)


async def test_a_name_in_the_wrong_case_is_mended_by_the_host(open_runtime, lms, tmp_path):
    runtime = await open_runtime(**SMALL)
    await dataset_session(runtime, tmp_path, "orders.csv", ORDERS)
    lms.root = scripted_lm([fenced(SLIP)])
    result, _ = await turn(runtime, TASK)
    assert result.status == "completed", result.error
    assert result.answer.strip() == "@count[1]"
    assert len(lms.root.engine_script.requests) == 1


def test_only_one_bound_name_differing_in_case_is_taken() -> None:
    error = "NameError: name 'Total' is not defined"
    assert case_renamed("total = 1\nprint(Total)", error) == "total = 1\nprint(total)"
    assert case_renamed("total = 1\nTOTAL = 2\nprint(Total)", error) is None  # two meant
    assert case_renamed("print(Total)", error) is None  # nothing bound
    assert case_renamed("total = 1\nprint(Total)", "KeyError: 'Total'") is None


TRAFFIC = "Date,Page Views,Source\n2023-01-02,10,ads\n2023-01-20,5,seo\n2023-02-03,7,ads\n"
#: As the embedded model wrote it (seed-89 monthly_series, tune): the date column and a text
#: column are still in the table that is summed; its three repairs never found it.
BY_MONTH = (
    "df = pd.read_csv('files/traffic.csv')\n"
    "df['Date'] = pd.to_datetime(df['Date'])\n"
    "monthly = df.groupby(df['Date'].dt.to_period('M')).sum()\n"
    "top = monthly['Page Views'].idxmax()\n"
    'print(f"@top_month[{top}]")'
)


async def test_an_aggregation_over_dates_or_text_is_told_numeric_only(
    open_runtime, lms, tmp_path
) -> None:
    runtime = await open_runtime(**SMALL)
    await dataset_session(runtime, tmp_path, "traffic.csv", TRAFFIC)
    lms.root = scripted_lm([fenced(BY_MONTH)])
    result, _ = await turn(runtime, "Which month of files/traffic.csv had the most page views?")
    assert result.status == "completed", result.error
    assert result.answer.strip() == "@top_month[2023-01]"
    assert len(lms.root.engine_script.requests) == 1


def test_numeric_only_is_added_only_to_the_failing_lines_bare_aggregates() -> None:
    from fleet_core.engine.repairs import numeric_only_added

    code = "a = 1\nm = df.groupby(k).mean()\nprint(m.sum())"
    error = (
        'Traceback:\n  File "<cell-3>", line 2, in <module>\n'
        "TypeError: dtype 'str' does not support operation 'mean'"
    )
    assert numeric_only_added(error, code) == (
        "a = 1\nm = df.groupby(k).mean(numeric_only=True)\nprint(m.sum())"
    )
    assert numeric_only_added(error.replace("TypeError: dtype", "ValueError: dtype"), code) is None
