"""Code-first levers from the tune half's transcripts (docs/benchmarks.md, runs of 2026-12-06):
a text log shown as named fields (an access log: the prelude's ``log_fields``) or split into
fields and never read as a table, the statistics helpers shown
only as the task needs them, never imported, and their results unpacked as documented, a
program's own ``raise`` not taken for a failing step, and a grouped result's labels kept when
it is written with ``index=False``. Each Turn runs with the scripted model
and the real local sandbox; each test fails without its lever."""

from __future__ import annotations

from typing import Any

from fleet_core.engine.rewrites import drop_helper_imports, keep_index_labels, unshadowed_helpers
from fleet_core.engine.scripted_lm import scripted_lm
from fleet_core.engine.statprompt import helpers_for, stats_help, unpacked_by_name
from fleet_core.engine.textinputs import line_fields, table_reader
from tests.engine.support import dataset_session, fenced, quick_session, task_cells
from tests.engine.support import small_turn as turn

SMALL = {"FLEET_ENGINE_PROFILE": "small"}

ACCESS_LOG = (
    '10.0.3.7 - - [04/Mar/2025:08:00:12 +0000] "GET /login HTTP/1.1" 200 5120 "-" '
    '"Mozilla/5.0 (X11; Linux x86_64)" rt=0.120\n'
    '10.0.1.9 - - [04/Mar/2025:08:00:40 +0000] "POST /api/v1/cart HTTP/1.1" 502 88 "-" '
    '"curl/8.5.0" rt=1.900\n'
    '10.0.2.4 - - [04/Mar/2025:08:01:02 +0000] "GET /api/v1/cart?page=2 HTTP/1.1" 503 12 "-" '
    '"curl/8.5.0" rt=2.010\n'
)
LOG_TASK = (
    "files/access.log is a web server's access log. Print the number of 5xx responses as "
    "@server_errors[N]."
)
AS_TABLE = (
    "df = pd.read_csv('files/access.log', sep=' ', names=['ip', 'agent', 'status'])\n"
    "print(f\"@server_errors[{(df['status'] >= 500).sum()}]\")"
)
BY_LINES = (
    "errors = 0\n"
    "for line in open('files/access.log'):\n"
    "    status = int(line.split('\"')[2].split()[0])\n"
    "    if status >= 500:\n"
    "        errors += 1\n"
    'print(f"@server_errors[{errors}]")'
)

BY_FIELDS = (
    "fields = [log_fields(line) for line in open('files/access.log')]\n"
    "errors = sum(1 for f in fields if f and f['status'] >= 500)\n"
    'print(f"@server_errors[{errors}]")'
)
PLAIN_LOG = "2025-03-04 08:00:12 ERROR disk full\n2025-03-04 08:00:13 INFO retry\n"
COUNT_ERRORS = (
    "errors = sum(1 for line in open('files/app.log') if line.split()[2] == 'ERROR')\n"
    'print(f"@errors[{errors}]")'
)

ADS = "week,TV Spend ($k),Units Sold\n1,10,120\n2,20,190\n3,30,310\n4,40,390\n5,50,510\n"
FIT_TASK = (
    "Fit a least-squares straight line that predicts 'Units Sold' from 'TV Spend ($k)' in "
    "files/ads.csv and print @slope[value] rounded to three decimals."
)
FIT_GOOD = (
    "df = pd.read_csv('files/ads.csv')\n"
    "slope, intercept, r_squared, p_value = linear_fit(df['TV Spend ($k)'], df['Units Sold'])\n"
    'print(f"@slope[{slope:.3f}]")'
)
SLOPE = "@slope[9.800]"


# --- a text log: shown split into fields, never read as a table --------------------------------


async def test_an_access_logs_first_line_is_shown_as_named_fields(open_runtime, lms, tmp_path):
    runtime = await open_runtime(**SMALL)
    await dataset_session(runtime, tmp_path, "access.log", ACCESS_LOG)
    lms.root = scripted_lm([fenced(BY_FIELDS)])
    result, _ = await turn(runtime, LOG_TASK)
    assert result.status == "completed", result.error
    assert result.answer.strip() == "@server_errors[2]"  # log_fields is defined in the sandbox
    prompt = lms.root.engine_script.requests[0]
    assert "files/access.log is text, not a table: read it line by line with open()" in prompt
    assert "It is a web server access log (the common or combined log format)" in prompt
    assert (
        "{'ip': '10.0.3.7', 'user': '-', 'time': '04/Mar/2025:08:00:12 +0000', 'method': 'GET', "
        "'path': '/login', 'query': '', 'protocol': 'HTTP/1.1', 'status': 200, 'size': 5120, "
        "'referrer': '-', 'agent': 'Mozilla/5.0 (X11; Linux x86_64)', 'rt': 0.12}" in prompt
    )
    assert "line.split()" not in prompt


async def test_an_access_log_is_suggested_as_one_table_and_that_table_answers(
    open_runtime, lms, tmp_path
):
    """Seed-60 and seed-52 log_status (tune): counts built by status alone, then asked for the
    path (``KeyError: 'path'``) in every repair; the prompt now suggests one table of every
    line's fields, and the line it shows runs as written."""
    runtime = await open_runtime(**SMALL)
    await dataset_session(runtime, tmp_path, "access.log", ACCESS_LOG)
    suggested = "rows = pd.DataFrame([f for line in open(path) if (f := log_fields(line))])"
    program = (
        "path = 'files/access.log'\n"
        f"{suggested}\n"
        "worst = rows[rows['status'] >= 500]['path'].value_counts().idxmax()\n"
        "print(f\"@server_errors[{(rows['status'] >= 500).sum()}] @worst_path[{worst}]\")"
    )
    lms.root = scripted_lm([fenced(program)])
    result, _ = await turn(runtime, LOG_TASK)
    assert result.status == "completed", result.error
    assert suggested in lms.root.engine_script.requests[0]
    assert result.answer.strip().startswith("@server_errors[2] @worst_path[/")


#: As the embedded model wrote it (seed-50 log_status, a G tune transcript): its own
#: log_fields, splitting on whitespace, in place of the helper.
OWN_FIELDS = (
    "def log_fields(line):\n"
    "    fields = line.split()\n"
    "    return {'status': int(fields[7])}\n" + BY_FIELDS
)


async def test_a_programs_own_log_fields_does_not_replace_the_helper(
    open_runtime, lms, tmp_path
) -> None:
    runtime = await open_runtime(**SMALL)
    await dataset_session(runtime, tmp_path, "access.log", ACCESS_LOG)
    lms.root = scripted_lm([fenced(OWN_FIELDS)])
    result, events = await turn(runtime, LOG_TASK)
    assert result.status == "completed", result.error
    assert result.answer.strip() == "@server_errors[2]"
    assert task_cells(events)[0].startswith("def _own_log_fields(line):")


def test_which_definitions_of_a_helpers_name_are_renamed() -> None:
    code = "def log_fields(line):\n    pass\ndef correlation(df, a, b):\n    pass\nx = 1"
    assert unshadowed_helpers(code) == (
        "def _own_log_fields(line):\n    pass\ndef correlation(df, a, b):\n    pass\nx = 1"
    )  # another shape than the helper's (x, y): the program's calls are meant for its own
    nested = "if True:\n    def log_fields(line):\n        pass"
    assert unshadowed_helpers(nested) == nested
    spaced = "@cache\ndef  log_fields (line):\n    pass"  # the name found where the node is
    assert unshadowed_helpers(spaced) == "@cache\ndef  _own_log_fields (line):\n    pass"


async def test_a_text_of_no_known_format_is_shown_split_into_its_fields(
    open_runtime, lms, tmp_path
) -> None:
    runtime = await open_runtime(**SMALL)
    await dataset_session(runtime, tmp_path, "app.log", PLAIN_LOG)
    lms.root = scripted_lm([fenced(COUNT_ERRORS)])
    result, _ = await turn(runtime, "Count the ERROR lines of files/app.log; print @errors[N].")
    assert result.status == "completed", result.error
    assert result.answer.strip() == "@errors[1]"
    prompt = lms.root.engine_script.requests[0]
    assert "line.split() -> [0] '2025-03-04', [1] '08:00:12', [2] 'ERROR'" in prompt


async def test_a_program_reading_a_log_as_a_table_is_not_run_and_told_to_read_lines(
    open_runtime, lms, tmp_path
) -> None:
    runtime = await open_runtime(**SMALL)
    await dataset_session(runtime, tmp_path, "access.log", ACCESS_LOG)
    lms.root = scripted_lm([fenced(AS_TABLE), fenced(BY_LINES)])
    result, events = await turn(runtime, LOG_TASK)
    assert result.status == "completed", result.error
    assert result.outcome is not None and result.outcome.kind == "submitted"
    assert result.answer.strip() == "@server_errors[2]"
    assert task_cells(events) == [BY_LINES]  # the table reading never ran
    told = lms.root.engine_script.requests[1]
    assert "it reads files/access.log with pandas.read_csv, but files/access.log is a text" in told
    assert "take each line's fields as shown here:\nIt is a web server access log" in told
    assert "'status': 200" in told


async def test_a_table_reading_sent_again_is_a_repeated_failed_program(
    open_runtime, lms, tmp_path
) -> None:
    runtime = await open_runtime(**SMALL)
    await dataset_session(runtime, tmp_path, "access.log", ACCESS_LOG)
    lms.root = scripted_lm([fenced(AS_TABLE), fenced(AS_TABLE), fenced(BY_LINES)])
    result, events = await turn(runtime, LOG_TASK)
    assert result.status == "completed", result.error
    assert task_cells(events) == [BY_LINES]
    assert "You sent the same program again" in lms.root.engine_script.requests[2]


def test_which_readings_of_a_text_file_are_caught() -> None:
    texts = {"files/access.log": '1.2.3.4 - "GET / HTTP/1.1" 200'}
    assert table_reader("pd.read_csv('files/access.log', sep=' ')", texts) is not None
    assert table_reader('df = pandas.read_table(r"./files/access.log")', texts) is not None
    assert table_reader("pd.read_fwf( 'files/access.log' )", texts) is not None
    assert table_reader("pd.read_csv('files/orders.csv')", texts) is None
    assert table_reader("lines = open('files/access.log').readlines()", texts) is None
    assert "line.split('\"')" not in line_fields("a b c")  # no quotes: whitespace fields only


# --- the statistics helpers --------------------------------------------------------------------


def test_only_the_helpers_the_task_calls_for_are_shown() -> None:
    assert helpers_for(FIT_TASK) == ["linear_fit"]
    assert helpers_for("Is 'score' normally distributed (Shapiro-Wilk)?") == ["normality"]
    assert helpers_for("Report the Pearson correlation and its p-value.") == ["correlation"]
    assert helpers_for("Give the p-value.") == [  # statistics, no helper named: all of them
        "normality",
        "ttest",
        "correlation",
        "linear_fit",
        "regression_metrics",
    ]
    assert helpers_for("Sum the revenue per region.") == []
    shown = stats_help(FIT_TASK)
    assert "linear_fit(x, y)" in shown and "normality" not in shown and "ttest" not in shown


async def test_an_import_of_a_helper_is_dropped_before_the_program_runs(
    open_runtime, lms, tmp_path
) -> None:
    """``from scipy.stats import normality`` (the first line of a tune transcript's program)
    would raise ImportError: the helpers are defined, not importable."""
    runtime = await open_runtime(**SMALL)
    await dataset_session(runtime, tmp_path, "ads.csv", ADS)
    importing = "from scipy.stats import linregress, normality\n" + FIT_GOOD
    lms.root = scripted_lm([fenced(importing)])
    result, events = await turn(runtime, FIT_TASK)
    assert result.status == "completed", result.error
    assert result.answer.strip() == SLOPE
    assert len(lms.root.engine_script.requests) == 1
    assert task_cells(events)[0].startswith("from scipy.stats import linregress\n")


def test_what_dropping_a_helper_import_leaves() -> None:
    assert drop_helper_imports("from scipy.stats import normality\nx = 1") == (
        "pass  # (host: a helper is already defined, not imported)\nx = 1"
    )
    block = "if True:\n    from stats import ttest as t\n"
    assert drop_helper_imports(block).splitlines()[1].startswith("    pass  # (host:")
    assert drop_helper_imports("import scipy.stats\nprint(1)") == "import scipy.stats\nprint(1)"
    assert drop_helper_imports("from x import (\n") == "from x import (\n"  # no parse: as is


async def test_a_helper_unpacked_into_too_few_names_is_told_its_signature(
    open_runtime, lms, tmp_path
) -> None:
    runtime = await open_runtime(**SMALL)
    await dataset_session(runtime, tmp_path, "ads.csv", ADS)
    # names that are not all its figures: the host cannot read them by name, the model is told
    three = FIT_GOOD.replace("r_squared, p_value =", "quality =")
    lms.root = scripted_lm([fenced(three), fenced(FIT_GOOD)])
    result, _ = await turn(runtime, FIT_TASK)
    assert result.status == "completed", result.error
    assert result.answer.strip() == SLOPE
    repair = lms.root.engine_script.requests[1]
    assert "too many values to unpack" in repair
    assert (
        "linear_fit() returns, in this order: slope, intercept, r_squared, p_value = "
        "linear_fit(x, y)." in repair
    )


async def test_a_program_failing_on_its_own_raise_is_told_the_task_did_not_ask_for_it(
    open_runtime, lms, tmp_path
) -> None:
    runtime = await open_runtime(**SMALL)
    await dataset_session(runtime, tmp_path, "ads.csv", ADS)
    checking = (
        "df = pd.read_csv('files/ads.csv')\n"
        "if normality(df['TV Spend ($k)']).p_value < 0.99:\n"
        "    raise ValueError('The data is not normally distributed')\n" + FIT_GOOD
    )
    lms.root = scripted_lm([fenced(checking), fenced(FIT_GOOD)])
    result, _ = await turn(runtime, FIT_TASK)
    assert result.status == "completed", result.error
    repair = lms.root.engine_script.requests[1]
    assert (
        "That error is raised by the program itself (line 3: raise ValueError('The data is "
        "not normally distributed')). The task does not ask for that check" in repair
    )


# --- a grouped result's labels kept -------------------------------------------------------------

CUSTOMERS = "customer_id,Segment\nC1,Retail\nC2,Corporate\nC3,Retail\n"
INVOICES = "Invoice,CustomerID,Total ($)\n1,C1,10.5\n2,C2,20\n3,C3,4.5\n4,C2,1\n"
JOIN_TASK = (
    "Join files/invoices.csv to files/customers.csv and save the total 'Total ($)' per Segment "
    "to artifacts/segment_totals.csv."
)
JOIN_PROGRAM = (
    "customers = pd.read_csv('files/customers.csv')\n"
    "invoices = pd.read_csv('files/invoices.csv')\n"
    "merged = customers.merge(invoices, left_on='customer_id', right_on='CustomerID')\n"
    "totals = merged.groupby('Segment')['Total ($)'].sum().round(2)\n"
    "os.makedirs('artifacts', exist_ok=True)\n"
    "totals.to_csv('artifacts/segment_totals.csv', index=False)\n"
    "print(totals.to_string())"
)


async def join_session(open_runtime: Any, tmp_path: Any) -> Any:
    """A small-profile runtime whose Session holds the invoices (its dataset) and customers."""
    runtime = await open_runtime(**SMALL)
    await dataset_session(runtime, tmp_path, "invoices.csv", INVOICES)
    source = tmp_path / "customers.csv"
    source.write_text(CUSTOMERS)
    await runtime.attach("s", source)
    return runtime


async def test_a_grouped_result_written_with_index_false_keeps_its_labels(
    open_runtime, lms, tmp_path
) -> None:
    """The join_tables transcript: right figures, but the Segment labels lost by
    ``Series.to_csv(index=False)``; the host keeps them, with no repair call."""
    runtime = await join_session(open_runtime, tmp_path)
    lms.root = scripted_lm([fenced(JOIN_PROGRAM)])
    result, events = await turn(runtime, JOIN_TASK)
    assert result.status == "completed", result.error
    assert result.outcome is not None and result.outcome.kind == "submitted"
    written = (await runtime.read_file("s", "artifacts/segment_totals.csv")).decode()
    assert written.splitlines() == ["Segment,Total ($)", "Corporate,21.0", "Retail,15.0"]
    assert len(lms.root.engine_script.requests) == 1
    assert "_fleet_keep_labels(totals).to_csv(" in task_cells(events)[0]


#: As the embedded model wrote it (a seed-18 join_tables tune transcript: four programs in a row
#: grouped the invoices by Segment, a column of the customers, told only "merge the tables first").
UNJOINED = (
    "invoices = pd.read_csv('files/invoices.csv')\n"
    "totals = invoices.groupby('Segment')['Total ($)'].sum().round(2)\n"
    "print(totals.to_string())"
)


async def test_a_column_of_the_other_table_is_told_the_exact_merge(
    open_runtime, lms, tmp_path
) -> None:
    runtime = await join_session(open_runtime, tmp_path)
    lms.root = scripted_lm([fenced(UNJOINED), fenced(JOIN_PROGRAM)])
    result, _ = await turn(runtime, JOIN_TASK)
    assert result.status == "completed", result.error
    repair = lms.root.engine_script.requests[1]
    assert (
        "merged = pd.read_csv('files/invoices.csv').merge(pd.read_csv('files/customers.csv'), "
        "left_on='CustomerID', right_on='customer_id')" in repair
    )


def test_which_writes_keep_their_labels() -> None:
    grouped = "t = df.groupby('g')['x'].sum()\n"
    assert keep_index_labels(grouped + "t.to_csv('a.csv', index=False)") == (
        grouped + "_fleet_keep_labels(t).to_csv('a.csv', index=False)"
    )
    for unlabelled in (
        "t = df.groupby('g', as_index=False)['x'].sum()\n",
        "t = df.groupby('g')['x'].sum().reset_index()\n",
        "t = pd.read_csv('a.csv')\n",
        "",
    ):
        written = unlabelled + "t.to_csv('a.csv', index=False)"
        assert keep_index_labels(written) == written
    chained = "df.groupby('é')['x'].sum().to_csv(p, index=False)  # é"
    assert keep_index_labels(chained) == (
        "_fleet_keep_labels(df.groupby('é')['x'].sum()).to_csv(p, index=False)  # é"
    )
    kept = grouped + "t.to_csv('a.csv')"  # the index is written anyway
    assert keep_index_labels(kept) == kept
    other = grouped + "t.to_json('a.json', index=False)"
    assert keep_index_labels(other) == other


def test_a_continuation_step_keeps_the_labels_of_a_result_an_earlier_step_grouped() -> None:
    """Seen on the embedded model (monthly_series, seed 8): the first step grouped, the
    continuation wrote the Series with index=False and lost the months."""
    step = "t.to_csv('a.csv', index=False)"
    grouped = "t = df.groupby('g')['x'].sum()"
    assert keep_index_labels(step, context=grouped) == (
        "_fleet_keep_labels(t).to_csv('a.csv', index=False)"
    )
    assert keep_index_labels(step, context=grouped + "\nt = t.reset_index()") == step
    assert keep_index_labels(grouped + "\nt = t.reset_index()\n" + step, context=grouped) == (
        grouped + "\nt = t.reset_index()\n" + step  # the step's own assignment wins
    )
    assert keep_index_labels(step, context="def (") == step  # an unparsable context: as is


def test_the_label_keeper_resets_only_a_named_index() -> None:
    import pandas as pd

    from fleet_core.engine.rewrites import KEEP_LABELS_SOURCE

    space: dict[str, Any] = {}
    exec(KEEP_LABELS_SOURCE, space)
    keep = space["_fleet_keep_labels"]
    grouped = pd.DataFrame({"g": ["a", "b", "a"], "v": [1, 2, 3]}).groupby("g")["v"].sum()
    assert list(keep(grouped).columns) == ["g", "v"]
    plain = pd.DataFrame({"v": [1, 2]})
    assert keep(plain) is plain  # a RangeIndex holds no labels
    clash = pd.DataFrame({"g": [1]}, index=pd.Index(["x"], name="g"))
    assert keep(clash) is clash  # reset_index would fail: left as written
    assert keep("not a table") == "not a table"


COUNT_TASK = (
    "Count the rows of files/sales.csv per region, save the counts to "
    "artifacts/region_counts.csv and print @regions[N], the number of regions."
)


async def test_a_program_after_a_format_doubt_keeps_the_labels_of_a_result_made_before(
    open_runtime, lms, tmp_path
) -> None:
    """Seed-61 log_status (tune): after a format doubt the next program wrote
    ``status_counts.to_csv(..., index=False)``, a value_counts result the doubted program made,
    and the statuses were lost; the namespace is kept after a doubt, so the keeper reads it."""
    runtime = await open_runtime(**SMALL)
    await quick_session(runtime, tmp_path)
    counted = "df = pd.read_csv('files/sales.csv')\ncounts = df['region'].value_counts()\n"
    untagged = counted + "counts.to_csv('artifacts/region_counts.csv')\nprint(len(counts))"
    tagged = (
        "counts.to_csv('artifacts/region_counts.csv', index=False)\n"
        'print(f"@regions[{len(counts)}]")'
    )
    lms.root = scripted_lm([fenced(untagged), fenced(tagged)])
    result, events = await turn(runtime, COUNT_TASK)
    assert result.status == "completed", result.error
    assert result.answer.strip().startswith("@regions[3]")
    assert task_cells(events)[1].startswith("_fleet_keep_labels(counts).to_csv(")
    written = (await runtime.read_file("s", "artifacts/region_counts.csv")).decode()
    assert written.splitlines()[0] == "region,count"


def test_the_iqr_fences_helper_agrees_with_pandas_and_is_shown_for_outliers() -> None:
    import pandas as pd

    from fleet_core.engine.stathelpers import iqr_fences

    values = [10.0, 11.0, None, 12.0, 12.5, 13.0, 14.0, 40.0, float("nan"), 1.0]
    series = pd.Series(values, dtype="float64")
    q1, q3, iqr, low, high = iqr_fences(series)
    assert (q1, q3) == (series.quantile(0.25), series.quantile(0.75)) == (10.75, 13.25)
    assert (iqr, low, high) == (2.5, 7.0, 17.0)
    assert iqr_fences(series, k=3).high == 20.75
    task = "Save the outlier rows outside the IQR fences of 'Transit Time (h)'."
    assert helpers_for(task) == ["iqr_fences"]
    assert "q1, q3, iqr, low, high = iqr_fences(x, k=1.5)" in stats_help(task)
    assert "iqr_fences" not in stats_help("Give the p-value.")  # not among the general ones


#: A helper's figures unpacked into three names of its four (seed-83 linear_fit: the same
#: "too many values to unpack" three times, the hint with the signature notwithstanding).
THREE_OF_FOUR = (
    "df = pd.read_csv('files/ads.csv')\n"
    "slope, intercept, r_squared = linear_fit(df['TV Spend ($k)'], df['Units Sold'])\n"
    'print(f"@slope[{slope:.3f}] @intercept[{intercept:.3f}] @r_squared[{r_squared:.3f}]")'
)


def test_a_helpers_figures_unpacked_into_fewer_names_are_read_by_name() -> None:
    error = (
        'File "<cell-3>", line 2, in <module>\nValueError: too many values to unpack (expected 3)'
    )
    fixed = unpacked_by_name(error, THREE_OF_FOUR)
    assert fixed is not None and len(fixed.splitlines()) == 3
    assert fixed.splitlines()[1] == (
        "_fit = linear_fit(df['TV Spend ($k)'], df['Units Sold']); "
        "slope, intercept, r_squared = _fit.slope, _fit.intercept, _fit.r_squared"
    )
    other = THREE_OF_FOUR.replace("r_squared =", "fit_quality =")  # not one of its figures
    assert unpacked_by_name(error, other) is None
    assert unpacked_by_name("KeyError: 'x'", THREE_OF_FOUR) is None


async def test_a_turn_reads_a_helpers_figures_by_name_without_a_model_call(
    open_runtime, lms, tmp_path
) -> None:
    from scipy import stats

    runtime = await open_runtime(FLEET_ENGINE_PROFILE="small")
    await dataset_session(runtime, tmp_path, "ads.csv", ADS)
    lms.root = scripted_lm([fenced(THREE_OF_FOUR)])  # ADS: weeks 1-5, spend 10-50
    result, _ = await turn(
        runtime, "Fit Units Sold on TV Spend ($k) in files/ads.csv by least squares."
    )
    assert result.status == "completed", result.error
    fit = stats.linregress([10, 20, 30, 40, 50], [120, 190, 310, 390, 510])
    assert f"@slope[{fit.slope:.3f}] @intercept[{fit.intercept:.3f}]" in result.answer
    assert len(lms.root.engine_script.requests) == 1
