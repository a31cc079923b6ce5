"""The code-first route's checks of what a program answered (docs/engine.md, the small-model
profile): a printed value that is no value (NaN, None, a log's "-") or not of the shape the
task's bracket text asks for (``@top_month[YYYY-MM]`` answered with a figure), or such a value
resent with only the shape's characters added (``/200``), a table of one row, of about one row
per input line, or whose group column repeats a value, where the task asks for a figure per
group, and a
library call's result unpacked into the wrong number of names told what it really returns. Each
came from a tune transcript (docs/benchmarks.md); each Turn runs with the scripted model and the
real local sandbox, and each test fails without its check."""

from __future__ import annotations

import csv
import io

from fleet_core.engine.inspection import (
    asks_about_variants,
    asks_per_group,
    asks_whole_rows,
    group_words,
)
from fleet_core.engine.repairs import format_problem, hand_shaped, placeholder_shape
from fleet_core.engine.rowsrewrites import parse_rows, rows_saved, saved_name
from fleet_core.engine.scripted_lm import scripted_lm
from fleet_core.engine.statprompt import result_hint, unpacked_call
from tests.engine.support import dataset_session, fenced, task_cells
from tests.engine.support import small_turn as turn

SMALL = {"FLEET_ENGINE_PROFILE": "small"}

# --- a printed value that is no value, or not of the asked shape ---------------------------------


def test_what_a_placeholder_says_its_value_looks_like() -> None:
    month = placeholder_shape("YYYY-MM")
    assert month is not None and month[1].match("2025-04") and not month[1].match("116448")
    count = placeholder_shape("N")
    assert count is not None and count[1].match("42") and not count[1].match("4.5")
    path = placeholder_shape("/path")
    assert path is not None and path[1].match("/api/orders") and not path[1].match("GET")
    yes = placeholder_shape("yes or no")
    assert yes is not None and yes[1].match("No") and not yes[1].match("True")
    assert placeholder_shape("value") is None and placeholder_shape("...") is None
    assert placeholder_shape("region") is None  # a word says nothing checkable


def test_a_value_of_the_wrong_shape_or_no_value_breaks_the_format() -> None:
    task = "print @top_month[YYYY-MM] @server_errors[N] @worst_path[/path] @mean[value]"
    good = "@top_month[2025-04] @server_errors[12] @worst_path[/login] @mean[3.25]"
    assert format_problem(task, good) is None
    assert format_problem(task, good.replace("'", "").replace("2025-04", "'2025-04'")) is None
    month = format_problem(task, good.replace("2025-04", "116448")) or ""
    assert month.startswith("@top_month[116448] is not shaped YYYY-MM")
    assert "a whole number" in (format_problem(task, good.replace("[12]", "[12.5]")) or "")
    for empty in ("nan", "None", "-", "inf"):
        said = format_problem(task, good.replace("3.25", empty)) or ""
        assert said.startswith(f"@mean[{empty}] holds no real value"), said
    assert "holds no real value" in (format_problem(task, good.replace("/login", "-")) or "")


DAYS = "day,visits\n2025-01-03,10\n2025-01-20,5\n2025-02-02,30\n2025-02-11,1\n"
MONTH_TASK = (
    "Sum the visits in files/days.csv per month and print the month with the most visits as "
    "@top_month[YYYY-MM]."
)
MONTHS = (
    "df = pd.read_csv('files/days.csv')\n"
    "df['month'] = df['day'].str[:7]\n"
    "totals = df.groupby('month')['visits'].sum()\n"
)
FIGURE = MONTHS + 'print(f"@top_month[{totals.max()}]")'  # the figure, not the month
MONTH = MONTHS + 'print(f"@top_month[{totals.idxmax()}]")'


async def test_a_figure_printed_where_the_task_asks_a_month_is_asked_again(
    open_runtime, lms, tmp_path
) -> None:
    runtime = await open_runtime(**SMALL)
    await dataset_session(runtime, tmp_path, "days.csv", DAYS)
    lms.root = scripted_lm([fenced(FIGURE), fenced(MONTH)])
    result, events = await turn(runtime, MONTH_TASK)
    assert result.status == "completed", result.error
    assert result.answer.strip() == "@top_month[2025-02]"
    follow_up = lms.root.engine_script.requests[1]
    assert "@top_month[31] is not shaped YYYY-MM, as the task's @top_month[YYYY-MM] asks" in (
        follow_up
    )
    assert task_cells(events) == [FIGURE, MONTH]


REQUESTS = "path,status\n/a,200\n/b,500\n/b,503\n/a,200\n/c,500\n"
PATH_TASK = (
    "Print the path with the most 5xx responses in files/requests.csv as @worst_path[/path]."
)
STATUS = "df = pd.read_csv('files/requests.csv')\nworst = df['status'].value_counts().idxmax()\n"
NO_PATH = STATUS + 'print(f"@worst_path[{worst}]")'
SHAPED_BY_HAND = STATUS + 'print(f"@worst_path[/{worst}]")'
WORST_PATH = (
    "df = pd.read_csv('files/requests.csv')\n"
    "worst = df[df['status'] >= 500]['path'].value_counts().idxmax()\n"
    'print(f"@worst_path[{worst}]")'
)


def test_a_value_resent_with_the_shapes_characters_added_is_found() -> None:
    assert hand_shaped("@worst_path[/200]", {"worst_path": "200"}) == {"worst_path": "200"}
    assert hand_shaped("@worst_path[/login]", {"worst_path": "200"}) == {}
    assert hand_shaped("@worst_path[200]", {"worst_path": "200"}) == {}  # said already
    assert hand_shaped("@worst_path[/200]", None) == {}


async def test_a_wrong_value_shaped_by_hand_is_asked_again(open_runtime, lms, tmp_path) -> None:
    runtime = await open_runtime(**SMALL)
    await dataset_session(runtime, tmp_path, "requests.csv", REQUESTS)
    lms.root = scripted_lm([fenced(NO_PATH), fenced(SHAPED_BY_HAND), fenced(WORST_PATH)])
    result, events = await turn(runtime, PATH_TASK)
    assert result.status == "completed", result.error
    assert result.answer.strip() == "@worst_path[/b]"
    first, second = lms.root.engine_script.requests[1:3]
    assert "@worst_path[200] is not a value starting with '/'" in first
    assert "the program computed another quantity" in first
    assert "@worst_path[/200] is the earlier 200 with the shape's characters added" in second
    assert task_cells(events) == [NO_PATH, SHAPED_BY_HAND, WORST_PATH]


PLACEHOLDER_KEPT = STATUS + 'print("@worst_path[/path]")'


async def test_a_placeholder_sent_again_is_taken_as_meant_but_not_as_a_clean_success(
    open_runtime, lms, tmp_path
) -> None:
    runtime = await open_runtime(**SMALL)
    await dataset_session(runtime, tmp_path, "requests.csv", REQUESTS)
    lms.root = scripted_lm([fenced(PLACEHOLDER_KEPT), fenced(PLACEHOLDER_KEPT)])
    result, _ = await turn(runtime, PATH_TASK)
    assert result.status == "completed", result.error
    assert "it prints no computed value in @worst_path[...]" in lms.root.engine_script.requests[1]
    outcome = result.outcome
    assert outcome is not None and outcome.kind == "partial"
    assert [r.kind for r in outcome.reasons] == ["format_unmet"]
    assert "leaves the task's @worst_path[...] without a computed value" in outcome.summary()


# --- a table of one row where the task asks for a figure per group -------------------------------

ACCESS = (
    '10.0.0.1 - - [01/Jan/2025:08:00:01 +0000] "GET /login HTTP/1.1" 200 512 "-" "curl/8"\n'
    '10.0.0.2 - - [01/Jan/2025:08:00:02 +0000] "GET /cart HTTP/1.1" 404 12 "-" "curl/8"\n'
    '10.0.0.3 - - [01/Jan/2025:08:00:03 +0000] "POST /cart HTTP/1.1" 200 98 "-" "curl/8"\n'
)
COUNT_TASK = (
    "files/access.log is a web server's access log. Count the requests per HTTP status code "
    "and save the counts to artifacts/status_counts.csv with the columns status and requests."
)
COUNTS = (
    "os.makedirs('artifacts', exist_ok=True)\n"
    "counts = collections.Counter()\n"
    "for line in open('files/access.log'):\n"
    "    counts[FIELD] += 1\n"
    "with open('artifacts/status_counts.csv', 'w', newline='') as f:\n"
    "    w = csv.writer(f)\n"
    "    w.writerow(['status', 'requests'])\n"
    "    w.writerows(sorted(counts.items()))\n"
    "print(dict(counts))"
)
WRONG_FIELD = COUNTS.replace("FIELD", "line.split('\"')[3]")  # the referrer: "-" on every line
RIGHT_FIELD = COUNTS.replace("FIELD", "line.split('\"')[2].split()[0]")


def test_which_tasks_ask_for_a_figure_per_group() -> None:
    assert asks_per_group(COUNT_TASK)
    assert asks_per_group("Compute the mean price by region and save it.")
    assert not asks_per_group("Keep the rows whose price is above 10 and save them.")
    assert not asks_per_group("Count the rows of files/a.csv.")  # a count, but of no groups


async def status_counts(runtime) -> dict[str, str]:
    data = await runtime.read_file("s", "artifacts/status_counts.csv")
    return {r["status"]: r["requests"] for r in csv.DictReader(io.StringIO(data.decode()))}


async def test_one_row_where_the_task_asks_per_group_is_doubted(open_runtime, lms, tmp_path):
    runtime = await open_runtime(**SMALL)
    await dataset_session(runtime, tmp_path, "access.log", ACCESS)
    lms.root = scripted_lm([fenced(WRONG_FIELD), fenced(RIGHT_FIELD)])
    result, _ = await turn(runtime, COUNT_TASK)
    assert result.status == "completed", result.error
    assert await status_counts(runtime) == {"200": "2", "404": "1"}
    follow_up = lms.root.engine_script.requests[1]
    assert "wrote artifacts/status_counts.csv with one row (-,3)" in follow_up
    assert "The first lines of files/access.log" in follow_up


async def test_one_row_sent_again_is_taken_as_meant(open_runtime, lms, tmp_path) -> None:
    runtime = await open_runtime(**SMALL)
    await dataset_session(runtime, tmp_path, "access.log", ACCESS)
    lms.root = scripted_lm([fenced(WRONG_FIELD), fenced(WRONG_FIELD)])
    result, events = await turn(runtime, COUNT_TASK)
    assert result.status == "completed", result.error
    assert await status_counts(runtime) == {"-": "3"} and len(task_cells(events)) == 2


# --- about one row per input line where the task asks for a figure per group --------------------

TIMED = "".join(
    f'10.0.0.{i} - - [01/Jan/2025:08:00:{i:02d} +0000] "GET /login HTTP/1.1" '
    f'{404 if i % 3 else 200} 512 "-" "curl/8" rt=0.{i:03d}\n'
    for i in range(1, 13)
)
PER_LINE_FIELD = COUNTS.replace("FIELD", "line.split()[-1]")  # rt=...: a new value every line


async def test_one_row_per_input_line_where_the_task_asks_per_group_is_doubted(
    open_runtime, lms, tmp_path
):
    runtime = await open_runtime(**SMALL)
    await dataset_session(runtime, tmp_path, "access.log", TIMED)
    lms.root = scripted_lm([fenced(PER_LINE_FIELD), fenced(RIGHT_FIELD)])
    result, _ = await turn(runtime, COUNT_TASK)
    assert result.status == "completed", result.error
    assert await status_counts(runtime) == {"200": "4", "404": "8"}
    follow_up = lms.root.engine_script.requests[1]
    assert "with 12 rows for the 12 lines of files/access.log" in follow_up
    assert "almost every line became a group of its own" in follow_up


async def test_a_few_groups_from_many_lines_are_not_doubted(open_runtime, lms, tmp_path):
    runtime = await open_runtime(**SMALL)
    await dataset_session(runtime, tmp_path, "access.log", TIMED)
    lms.root = scripted_lm([fenced(RIGHT_FIELD)])
    result, events = await turn(runtime, COUNT_TASK)
    assert result.status == "completed", result.error
    assert len(task_cells(events)) == 1 and len(lms.root.engine_script.requests) == 1


# --- a table whose group column repeats a value where the task asks one row per group ----------

ITEMS = "country,qty,price\nKenya,2,4.5\nPeru,1,10\nKenya,3,1\nPeru,2,0.5\nChad,1,2\n"
REVENUE_TASK = (
    "Compute the revenue (qty times price) per country in files/items.csv, save it to "
    "artifacts/revenue.csv with the columns country and revenue, sorted by revenue, and print "
    "the top country as @top[name]."
)
ITEM_REVENUE = (
    "os.makedirs('artifacts', exist_ok=True)\n"
    "df = pd.read_csv('files/items.csv')\n"
    "df['revenue'] = df['qty'] * df['price']\n"
    "df[['country', 'revenue']].to_csv('artifacts/revenue.csv', index=False)\n"
)
UNGROUPED = ITEM_REVENUE + "print(f\"@top[{df.groupby('country')['revenue'].sum().idxmax()}]\")"
GROUPED = (
    ITEM_REVENUE.replace(
        "df[['country', 'revenue']]",
        "df.groupby('country', as_index=False)['revenue'].sum().sort_values('revenue')",
    )
    + "print('@top[Kenya]')"
)


def test_the_words_that_name_a_tasks_group() -> None:
    assert {"country"} <= group_words(REVENUE_TASK) and "revenue" not in group_words(REVENUE_TASK)
    assert group_words("the mean per region and month, sorted by total") == {"region", "month"}
    assert group_words("Keep the rows whose price is above 10.") == set()


async def test_a_group_column_that_repeats_a_value_is_doubted(open_runtime, lms, tmp_path):
    runtime = await open_runtime(**SMALL)
    await dataset_session(runtime, tmp_path, "items.csv", ITEMS)
    lms.root = scripted_lm([fenced(UNGROUPED), fenced(GROUPED)])
    result, events = await turn(runtime, REVENUE_TASK)
    assert result.status == "completed", result.error
    saved = (await runtime.read_file("s", "artifacts/revenue.csv")).decode()
    assert saved.splitlines() == ["country,revenue", "Chad,2.0", "Peru,11.0", "Kenya,12.0"]
    follow_up = lms.root.engine_script.requests[1]
    assert "with 5 rows but 3 distinct country values (Kenya is on 2 rows)" in follow_up
    assert "saved the rows before grouping them" in follow_up
    assert task_cells(events) == [UNGROUPED, GROUPED]


QUIET_GROUPED = GROUPED.replace("\nprint('@top[Kenya]')", "")
RAISES = "raise RuntimeError('a slip')"


async def test_a_quiet_correction_that_then_fails_answers_with_what_was_printed_before(
    open_runtime, lms, tmp_path
) -> None:
    runtime = await open_runtime(**SMALL)
    await dataset_session(runtime, tmp_path, "items.csv", ITEMS)
    lms.root = scripted_lm([fenced(UNGROUPED), fenced(QUIET_GROUPED)] + [fenced(RAISES)] * 4)
    result, events = await turn(runtime, REVENUE_TASK)
    assert result.status == "completed", result.error
    assert result.outcome is not None and result.outcome.kind == "partial"
    assert result.answer.startswith("@top[Kenya]\n\nSaved artifacts/revenue.csv:\n")
    assert "Kenya,12.0" in result.answer and "Kenya,9.0" not in result.answer
    assert task_cells(events)[:2] == [UNGROUPED, QUIET_GROUPED]


async def test_one_row_per_group_is_not_doubted(open_runtime, lms, tmp_path) -> None:
    runtime = await open_runtime(**SMALL)
    await dataset_session(runtime, tmp_path, "items.csv", ITEMS)
    lms.root = scripted_lm([fenced(GROUPED)])
    result, events = await turn(runtime, REVENUE_TASK)
    assert result.status == "completed", result.error
    assert len(task_cells(events)) == 1 and len(lms.root.engine_script.requests) == 1


MORE_ITEMS = ITEMS + "Kenya,1,1\n"  # Kenya on three rows
TOP_OF = (
    "os.makedirs('artifacts', exist_ok=True)\n"
    "df = pd.read_csv('files/items.csv')\n"
    "df['revenue'] = df['qty'] * df['price']\n"
    "t = df.groupby('country', as_index=False)[COLUMNS].sum().sort_values('revenue')\n"
    "t.to_csv('artifacts/revenue.csv', index=False)\n"
    "print(f\"@top[{t.iloc[-1]['country']}]\")"
)
SUMMED_TEXT = TOP_OF.replace("COLUMNS", "['country', 'revenue']")  # joins the countries
SUMMED_FIGURE = TOP_OF.replace("COLUMNS", "['revenue']")


def test_a_label_joined_to_itself_is_a_summed_text_column() -> None:
    said = format_problem("print @top[name]", "@top[KenyaKenyaKenya]") or ""
    assert said.startswith("@top[KenyaKenyaKenya] holds 'Kenya' repeated 3 times")
    assert "a column of text was summed" in said
    for fine in ("@top[Kenya]", "@top[Hahn]", "@top[101010]", "@top[aa]"):
        assert format_problem("print @top[name]", fine) is None, fine


async def test_a_label_joined_to_itself_is_asked_again(open_runtime, lms, tmp_path) -> None:
    runtime = await open_runtime(**SMALL)
    await dataset_session(runtime, tmp_path, "items.csv", MORE_ITEMS)
    lms.root = scripted_lm([fenced(SUMMED_TEXT), fenced(SUMMED_FIGURE)])
    result, events = await turn(runtime, REVENUE_TASK)
    assert result.status == "completed", result.error
    assert result.answer.startswith("@top[Kenya]")
    said = lms.root.engine_script.requests[1]
    assert "@top[KenyaKenyaKenya] holds 'Kenya' repeated 3 times" in said
    assert task_cells(events) == [SUMMED_TEXT, SUMMED_FIGURE]


# --- a library call's result unpacked into the wrong number of names -----------------------------

XY = "x,y\n1,2.1\n2,3.9\n3,6.2\n4,7.8\n5,10.1\n"
FIT_TASK = "Fit a line of y on x in files/xy.csv and print @slope[value] @r_squared[value]."
#: Unpacked into a name that says no figure of linregress (names that do are unpacked by name
#: before the program runs: engine/fitrewrites.py).
SCIPY_FIT = (
    "from scipy.stats import linregress\n"
    "df = pd.read_csv('files/xy.csv')\n"
    "slope, intercept, quality = linregress(df['x'], df['y'])\n"
    'print(f"@slope[{slope:.3f}] @r_squared[{quality:.3f}]")'
)
HELPER_FIT = (
    "df = pd.read_csv('files/xy.csv')\n"
    "slope, intercept, r_squared, p_value = linear_fit(df['x'], df['y'])\n"
    'print(f"@slope[{slope:.3f}] @r_squared[{r_squared:.3f}]")'
)


def test_the_call_an_unpacking_failure_was_about() -> None:
    error = (
        'File "<cell-4>", line 3, in <module>\nValueError: too many values to unpack (expected 3)'
    )
    assert unpacked_call(error, SCIPY_FIT) == "linregress(df['x'], df['y'])"
    assert unpacked_call("KeyError: 'x'", SCIPY_FIT) is None
    shown = '@@fleet-result ["LinregressResult", 5, ["slope", "intercept"], ["extra"]]'
    hint = result_hint("linregress(x, y)", f"noise\n{shown}\n")
    assert hint.startswith(
        "linregress(x, y) returns a LinregressResult of 5 values, in this order: slope, "
        "intercept (and by name only: extra)."
    )
    assert "slope, intercept, r_squared, p_value = linear_fit(x, y)" in hint
    assert result_hint("f(x)", "nothing marked") == ""


async def test_a_library_result_unpacked_wrongly_is_told_what_it_returns(
    open_runtime, lms, tmp_path
) -> None:
    runtime = await open_runtime(**SMALL)
    await dataset_session(runtime, tmp_path, "xy.csv", XY)
    lms.root = scripted_lm([fenced(SCIPY_FIT), fenced(HELPER_FIT)])
    result, _ = await turn(runtime, FIT_TASK)
    assert result.status == "completed", result.error
    assert result.answer.strip() == "@slope[1.990] @r_squared[0.997]"
    repair = lms.root.engine_script.requests[1]
    assert (
        "linregress(df['x'], df['y']) returns a LinregressResult of 5 values, in this order: "
        "slope, intercept, rvalue, pvalue, stderr (and by name only: intercept_stderr)."
    ) in repair
    assert "Or use the defined helper (no import): slope, intercept, r_squared" in repair


# --- rows asked for with all their columns; rows kept twice where the task is about duplicates --

DELIVERIES = "Parcel #,Depot,Transit Time (h)\n" + "".join(
    f"P{i},{'Leeds' if i % 2 else 'Derby'},{h}\n"
    for i, h in enumerate([10, 11, 12, 12.5, 13, 14, 40, 11.5, 12.2, 1])
)
OUTLIER_TASK = (
    "In files/deliveries.csv, call a parcel an outlier when its 'Transit Time (h)' is outside "
    "the IQR fences. Save the outlier rows with all their columns to artifacts/outliers.csv and "
    "print @outliers[count]."
)
OUTLIERS = (
    "os.makedirs('artifacts', exist_ok=True)\n"
    "df = pd.read_csv('files/deliveries.csv')\n"
    "t = df['Transit Time (h)']\n"
    "q1, q3 = t.quantile([0.25, 0.75])\n"
    "mask = (t < q1 - 1.5 * (q3 - q1)) | (t > q3 + 1.5 * (q3 - q1))\n"
    "SAVED.to_csv('artifacts/outliers.csv', index=False)\n"
    "print(f'@outliers[{int(mask.sum())}]')"
)
ONE_COLUMN = OUTLIERS.replace("SAVED", "t[mask]")  # seed-79 sensor_summary: values, not rows
WHOLE_ROWS = OUTLIERS.replace("SAVED", "df[mask]")


def test_which_tasks_ask_for_whole_rows_or_are_about_duplicates() -> None:
    assert asks_whole_rows(OUTLIER_TASK)
    assert asks_whole_rows("Keep the latest row of each item and save the full rows.")
    assert not asks_whole_rows("Save the revenue per country to artifacts/r.csv.")
    assert asks_about_variants(STOCK_TASK)
    assert asks_about_variants("Remove the duplicate contacts and save the rest.")
    assert not asks_about_variants(OUTLIER_TASK)


async def test_one_column_where_the_task_asks_for_whole_rows_is_doubted(
    open_runtime, lms, tmp_path
):
    runtime = await open_runtime(**SMALL)
    await dataset_session(runtime, tmp_path, "deliveries.csv", DELIVERIES)
    lms.root = scripted_lm([fenced(ONE_COLUMN), fenced(WHOLE_ROWS)])
    result, _ = await turn(runtime, OUTLIER_TASK)
    assert result.status == "completed", result.error
    saved = (await runtime.read_file("s", "artifacts/outliers.csv")).decode()
    assert saved.splitlines() == [
        "Parcel #,Depot,Transit Time (h)",
        "P6,Derby,40.0",
        "P9,Leeds,1.0",
    ]
    follow_up = lms.root.engine_script.requests[1]
    assert "the task asks for the rows with all their columns" in follow_up
    assert "Parcel #, Depot missing" in follow_up


STOCK = "Item Code,Warehouse,Counted On,Qty\n" + "".join(
    f"{code},{house},2025-0{month}-01,{qty}\n"
    for code, house, month, qty in [
        ("AB-120", "North", 1, 10), ("ab 120", "North", 3, 7), (" AB120", "South", 2, 5),
        ("CK-300", "North", 4, 20), ("ck300", "North", 2, 99), ("MX-1", "East", 1, 3),
        ("QT-9", "East", 5, 1), ("QT 9", "South", 6, 2),
    ]
)  # fmt: skip
STOCK_TASK = (
    "files/stock.csv lists stock counts; an Item Code is not always typed the same way. Keep "
    "the latest count of each item in each Warehouse, save those rows with all their columns "
    "to artifacts/latest.csv, and print how many rows you kept and their total Qty as "
    "@rows_kept[N] @total_qty[N]."
)
LATEST = (
    "os.makedirs('artifacts', exist_ok=True)\n"
    "df = pd.read_csv('files/stock.csv')\n"
    "KEYED"
    "latest = df.sort_values('Counted On').drop_duplicates(subset=[KEY, 'Warehouse'], "
    "keep='last')\n"
    "latest[['Item Code', 'Warehouse', 'Counted On', 'Qty']].to_csv('artifacts/latest.csv', "
    "index=False)\n"
    "print(f'@rows_kept[{len(latest)}] @total_qty[{latest[\"Qty\"].sum()}]')"
)
#: The seed-79 stock_counts programs: duplicates dropped on the raw codes.
RAW_CODES = LATEST.replace("KEYED", "").replace("KEY", "'Item Code'")
KEYED_CODES = LATEST.replace(
    "KEYED",
    "df['key'] = df['Item Code'].str.replace(r'[^0-9A-Za-z]', '', regex=True).str.upper()\n",
).replace("KEY", "'key'")


async def test_rows_kept_twice_up_to_case_where_the_task_is_about_duplicates_are_doubted(
    open_runtime, lms, tmp_path
):
    runtime = await open_runtime(**SMALL)
    await dataset_session(runtime, tmp_path, "stock.csv", STOCK)
    lms.root = scripted_lm([fenced(RAW_CODES), fenced(KEYED_CODES)])
    result, _ = await turn(runtime, STOCK_TASK)
    assert result.status == "completed", result.error
    assert "@rows_kept[6] @total_qty[38]" in result.answer
    follow_up = lms.root.engine_script.requests[1]
    assert "whose Item Code differ only in case, spaces or punctuation" in follow_up
    assert "both with Warehouse North" in follow_up
    assert "group on ['key', 'Warehouse']" in follow_up  # the task keys on each Warehouse too
    # rows kept whole are no groups: 8 input lines, 5 rows is not "a group per line"
    assert "almost every line became a group of its own" not in follow_up


async def test_codes_typed_differently_in_other_warehouses_are_not_doubted(
    open_runtime, lms, tmp_path
):
    runtime = await open_runtime(**SMALL)
    await dataset_session(runtime, tmp_path, "stock.csv", STOCK)
    lms.root = scripted_lm([fenced(KEYED_CODES)])
    result, events = await turn(runtime, STOCK_TASK)
    assert result.status == "completed", result.error
    assert len(task_cells(events)) == 1 and len(lms.root.engine_script.requests) == 1


#: As the seed-80 sensor_summary programs wrote it, and sent again when doubted: the values of
#: one column saved, through a file handle.
NAMED_COLUMN = (
    "os.makedirs('artifacts', exist_ok=True)\n"
    "df = pd.read_csv('files/deliveries.csv')\n"
    "t = df['Transit Time (h)'].dropna()\n"
    "q1, q3 = t.quantile(0.25), t.quantile(0.75)\n"
    "outliers = t[(t < q1 - 1.5 * (q3 - q1)) | (t > q3 + 1.5 * (q3 - q1))]\n"
    "with open('artifacts/outliers.csv', 'w') as f:\n"
    "    outliers.to_csv(f, index=False)\n"
    "print(f'@outliers[{len(outliers)}]')"
)


def test_the_rows_a_saved_column_came_from_are_saved_in_its_place() -> None:
    path = "artifacts/outliers.csv"
    assert saved_name(NAMED_COLUMN, path) == "outliers"
    mended = rows_saved(NAMED_COLUMN, path, "outliers", "df")
    assert mended is not None
    assert mended.splitlines()[6] == "    df.loc[outliers.index].to_csv(f, index=False)"
    assert len(mended.splitlines()) == len(NAMED_COLUMN.splitlines())
    assert saved_name(NAMED_COLUMN, "artifacts/other.csv") is None
    assert saved_name(ONE_COLUMN, "artifacts/outliers.csv") is None  # not a plain name
    assert parse_rows('x\n@@fleet-rows "df"\n') == "df"
    assert parse_rows('@@fleet-rows ""') is None and parse_rows("") is None


async def test_a_column_saved_where_whole_rows_are_asked_is_saved_as_rows_by_the_host(
    open_runtime, lms, tmp_path
):
    runtime = await open_runtime(**SMALL)
    await dataset_session(runtime, tmp_path, "deliveries.csv", DELIVERIES)
    lms.root = scripted_lm([fenced(NAMED_COLUMN)])
    result, events = await turn(runtime, OUTLIER_TASK)
    assert result.status == "completed", result.error
    saved = (await runtime.read_file("s", "artifacts/outliers.csv")).decode()
    assert saved.splitlines() == [
        "Parcel #,Depot,Transit Time (h)",
        "P6,Derby,40.0",
        "P9,Leeds,1.0",
    ]
    assert len(lms.root.engine_script.requests) == 1, "mended by the host, no model call"
    assert "df.loc[outliers.index].to_csv(f, index=False)" in task_cells(events)[-1]


async def test_a_column_not_selected_from_a_table_is_left_to_the_model(open_runtime, lms, tmp_path):
    computed = NAMED_COLUMN.replace(
        "outliers = t[", "outliers = 2 * t["
    )  # new values: no rows of df hold them
    runtime = await open_runtime(**SMALL)
    await dataset_session(runtime, tmp_path, "deliveries.csv", DELIVERIES)
    lms.root = scripted_lm([fenced(computed), fenced(WHOLE_ROWS)])
    result, _ = await turn(runtime, OUTLIER_TASK)
    assert result.status == "completed", result.error
    assert "the task asks for the rows with all their columns" in lms.root.engine_script.requests[1]
