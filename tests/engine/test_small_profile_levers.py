"""The code-first route's levers of issue 22 (docs/engine.md#the-small-model-profile): no
program cut by the output cap, column names exactly, no hidden error, different help for a
failure seen again, the statistics helpers, the answer's stated format. Each Turn runs with the
scripted model and the real local sandbox; each test fails without its lever."""

from __future__ import annotations

import json
import time

import dspy
import pytest
from dspy.lm15 import Message

from fleet_core.engine.codefirst import CUT_RETRIES, CodeFirst, first_prompt
from fleet_core.engine.profile import EngineProfile
from fleet_core.engine.repairs import (
    asked_column,
    column_hint,
    csv_columns,
    format_problem,
    guarded_print,
    hidden_error,
    looks_cut,
    nearest_columns,
    printed_index,
    respelled,
    restored_read,
)
from fleet_core.engine.scripted_lm import scripted_lm
from tests.engine.support import (
    BARE_TOTALS,
    BROKEN,
    BROKEN_AGAIN,
    EXPECTED,
    LABELLED_TOTALS,
    PROGRAM,
    TASK,
    RecordingEngine,
    artifact_rows,
    capped_lm,
    dataset_session,
    fenced,
    quick_session,
    recording_lm,
    task_cells,
)
from tests.engine.support import (
    small_turn as turn,
)

SMALL = {"FLEET_ENGINE_PROFILE": "small"}
#: The quickstart program made longer than 300 tokens (4 chars each) by its opening comments.
LONG = "\n".join(f"# step {i}: restating what the task asks, at length" for i in range(40))
LONG_PROGRAM = LONG + "\n" + PROGRAM  # ~2,300 characters: cut at 300 tokens, fits in 900


# --- 1. no program is cut by the output cap ------------------------------------------------------


async def test_a_cut_reply_is_asked_again_with_more_room_and_never_run(
    open_runtime, lms, tmp_path
) -> None:
    runtime = await open_runtime(**SMALL)
    await quick_session(runtime, tmp_path)
    lms.root = capped_lm([fenced(LONG_PROGRAM), fenced(LONG_PROGRAM)])
    result, events = await turn(runtime, TASK)
    assert result.status == "completed", result.error
    assert result.outcome is not None and result.outcome.kind == "submitted"
    assert await artifact_rows(runtime) == EXPECTED
    assert [c.max_tokens for c in lms.root.engine_script.configs] == [300, 900]
    assert len(task_cells(events)) == 1  # the cut program never ran
    assert result.usage.sandbox_errors == 0


async def test_a_cut_resend_is_never_the_same_failed_program(open_runtime, lms, tmp_path) -> None:
    """Every call is cut even with the most room: none of them runs, the model is asked for a
    shorter program, and the same cut program sent again is not "a repeated failed program"."""
    runtime = await open_runtime(**SMALL)
    await quick_session(runtime, tmp_path)
    huge = LONG_PROGRAM * 3  # ~7,000 characters: more than 1,200 tokens
    calls = 1 + CUT_RETRIES
    lms.root = capped_lm([fenced(huge)] * (2 * calls) + [fenced(PROGRAM)])
    result, events = await turn(runtime, TASK)
    assert result.status == "completed", result.error
    assert await artifact_rows(runtime) == EXPECTED
    assert task_cells(events) == [PROGRAM]  # only the whole program ran
    requests = lms.root.engine_script.requests
    assert len(requests) == 2 * calls + 1
    assert "cut off" in requests[calls] and "cut off" in requests[2 * calls]
    assert not any("same program again" in r for r in requests)


async def test_a_cut_reply_is_recognized_when_the_server_says_stop(open_runtime, lms, tmp_path):
    """A server that misreports why it stopped: the whole budget used, an unterminated fence."""
    runtime = await open_runtime(**SMALL)
    await quick_session(runtime, tmp_path)
    lms.root = capped_lm([fenced(LONG_PROGRAM)] * 2, cut_reason="stop")
    result, events = await turn(runtime, TASK)
    assert result.status == "completed", result.error
    assert len(task_cells(events)) == 1


def test_what_looks_cut() -> None:
    code = "import pandas as pd\ndf = pd.read_csv('files/a.csv')\nprint(df['x'].sum("
    assert looks_cut("```python\n" + code, code, finish_reason="length", budget=300)
    near = "```python\n" + "# c\n" * 300 + code  # ~1,250 characters, unterminated
    assert looks_cut(near, near, finish_reason=None, budget=300)
    assert looks_cut(near, near, finish_reason="stop", budget=300, output_tokens=300)
    # a short reply with a broken last line is a real error, for the repair
    assert not looks_cut(f"```python\n{code}\n```", code, finish_reason="stop", budget=300)
    whole = "print(1)"
    assert not looks_cut(f"```python\n{whole}\n```", whole, finish_reason="stop", budget=300)


def test_each_calls_budget_is_sized_from_the_context_left() -> None:
    engine = RecordingEngine([fenced("print(1)")] * 3)
    lm = dspy.LM("openai/scripted", engine=engine, cache=False)
    profile = EngineProfile(name="small", max_tokens=300, context_tokens=1_050)
    step = CodeFirst(lm=lm, control=None, interpreter=None, profile=profile)  # type: ignore[arg-type]
    step._ask([Message.user("task")], None)
    step._ask([Message.user("x" * 2_100)], None)  # ~700 prompt tokens of 1,050
    assert engine.configs[0].max_tokens == 300
    assert 64 <= engine.configs[1].max_tokens < 300
    # a chat that leaves too little room drops its oldest program and error, keeps the inputs
    chat = [Message.user("inputs"), Message.assistant("a" * 1_200), Message.user("e" * 900)]
    chat += [Message.assistant("print(2)"), Message.user("error 2")]
    step._fit(chat)
    assert [m.text for m in chat] == ["inputs", "print(2)", "error 2"]


# --- 2. column names exactly ---------------------------------------------------------------------

WIND = "Station, WINDSPEED,Temp (C),num. calls abandoned \nA,3.5,12,4\nB,4.0,,7\nC,2.5,9,1\n"
WIND_TASK = "What is the mean ' WINDSPEED' in files/wind.csv? Print it rounded to two decimals."
WIND_GOOD = "df = pd.read_csv('files/wind.csv')\nprint(round(df[' WINDSPEED'].mean(), 2))"


def test_the_columns_are_read_exactly_with_their_dtypes() -> None:
    assert csv_columns(WIND) == [
        ("Station", "text"),
        (" WINDSPEED", "float"),
        ("Temp (C)", "int with blanks"),
        ("num. calls abandoned ", "int"),
    ]


async def test_the_prompt_shows_the_columns_exactly_quoted_with_dtypes(
    open_runtime, lms, tmp_path
) -> None:
    runtime = await open_runtime(**SMALL)
    await dataset_session(runtime, tmp_path, "wind.csv", WIND)
    lms.root = scripted_lm([fenced(WIND_GOOD)])
    result, _ = await turn(runtime, WIND_TASK)
    assert result.status == "completed", result.error
    assert result.answer.strip() == "3.33"
    prompt = lms.root.engine_script.requests[0]
    assert (
        "Columns of files/wind.csv (exact names, dtype): 'Station' (text), ' WINDSPEED' "
        "(float), 'Temp (C)' (int with blanks), 'num. calls abandoned ' (int)" in prompt
    )


async def test_a_key_error_repair_lists_the_nearest_real_columns(
    open_runtime, lms, tmp_path
) -> None:
    runtime = await open_runtime(**SMALL)
    await dataset_session(runtime, tmp_path, "wind.csv", WIND)
    wrong = WIND_GOOD.replace("' WINDSPEED'", "'wind_speed_kmh'")  # not the same name
    lms.root = scripted_lm([fenced(wrong), fenced(WIND_GOOD)])
    result, _ = await turn(runtime, WIND_TASK)
    assert result.status == "completed", result.error
    repair = lms.root.engine_script.requests[1]
    assert (
        "There is no column 'wind_speed_kmh'. The real columns nearest to it: ' WINDSPEED'"
        in repair
    )


async def test_a_column_misspelled_by_case_or_spaces_is_respelled_without_a_model_call(
    open_runtime, lms, tmp_path
) -> None:
    """A seed-19 monthly_series tune transcript: ``KeyError: 'page_views'`` for 'Page Views';
    the repair fixed the name and dropped the line that made the month column."""
    runtime = await open_runtime(**SMALL)
    await dataset_session(runtime, tmp_path, "wind.csv", WIND)
    wrong = WIND_GOOD.replace("' WINDSPEED'", "'windspeed'")
    lms.root = scripted_lm([fenced(wrong)])
    result, events = await turn(runtime, WIND_TASK)
    assert result.status == "completed", result.error
    assert result.answer.strip() == "3.33"
    assert len(lms.root.engine_script.requests) == 1
    assert task_cells(events) == [wrong, WIND_GOOD]  # the program, then as the host respelled it


#: A seed-23 and a seed-40 monthly_series tune transcript: the repair of the first program
#: dropped the line that read the CSV (NameError: name 'df' is not defined).
RAISES = "df = pd.read_csv('files/wind.csv')\nprint(int(df['Station'][0]))"  # ValueError
NO_READ = "print(round(df[' WINDSPEED'].mean(), 2))"


async def test_a_repair_that_dropped_its_input_read_gets_it_back_without_a_model_call(
    open_runtime, lms, tmp_path
) -> None:
    runtime = await open_runtime(**SMALL)
    await dataset_session(runtime, tmp_path, "wind.csv", WIND)
    lms.root = scripted_lm([fenced(RAISES), fenced(NO_READ)])
    result, events = await turn(runtime, WIND_TASK)
    assert result.status == "completed", result.error
    assert result.answer.strip() == "3.33"
    assert len(lms.root.engine_script.requests) == 2  # the program, its repair: no third call
    assert task_cells(events)[-1] == f"df = pd.read_csv('files/wind.csv'); {NO_READ}"


def test_which_dropped_reads_are_restored() -> None:
    error = "File \"<cell-5>\", line 2, in <module>\nNameError: name 'df' is not defined"
    code = "import os\ndf['x'] = 1\n"
    earlier = ["df = pd.read_csv('a.csv', sep=';')\ndf = df.dropna()", "print(1)"]
    assert restored_read(error, code, earlier) == (
        "import os\ndf = pd.read_csv('a.csv', sep=';'); df['x'] = 1"
    )
    assert restored_read(error, code, ["df = df2.copy()"]) is None  # not a read of a file
    assert restored_read(error, code, ["df = pd.read_csv(path)"]) is None  # not a literal path
    assert restored_read(error, "if True:\n    df['x'] = 1", earlier) is None  # in a block
    assert restored_read("KeyError: 'df'", code, earlier) is None


def test_which_misspelled_columns_are_respelled() -> None:
    tables = {
        "files/a.csv": [("Page Views", "int"), ("Total ($)", "float"), ("Total (€)", "float")]
    }
    code = "t = df.groupby('m')['page_views'].sum()\nprint(t['page_views'], 'page_views x')"
    assert respelled(code, "KeyError: 'page_views'", tables) == (
        "t = df.groupby('m')['Page Views'].sum()\nprint(t['Page Views'], 'page_views x')"
    )
    assert respelled(code, "KeyError: 'total'", tables) is None  # two real columns could be meant
    assert respelled(code, "KeyError: 'Page Views'", tables) is None  # a real one: another problem
    assert respelled(code, "KeyError: 'views'", tables) is None  # not the same name
    assert respelled("df['pageviews'", "KeyError: 'pageviews'", tables) is None  # no parse


def test_the_column_a_failure_asks_for_and_the_nearest_real_ones() -> None:
    assert asked_column("KeyError: 'diameter'") == "diameter"
    assert asked_column("KeyError: \"None of [Index(['Diam'], dtype='object')] are in the") == (
        "Diam"
    )
    assert asked_column("Column 'Weight' does not exist") == "Weight"
    assert asked_column("KeyError: 'Column not found: amount'") == "amount"
    assert asked_column("ZeroDivisionError: division by zero") is None
    columns = ["Diameter", "Weight (g)", "Shell weight", "Rings"]
    assert nearest_columns("diameter", columns)[0] == "Diameter"
    assert nearest_columns("weight", columns)[:2] == ["Weight (g)", "Shell weight"]
    tables = {"files/a.csv": [(c, "float") for c in columns]}
    assert column_hint("KeyError: 'Rings'", tables) == ""  # it exists: another problem
    two = {**tables, "files/b.csv": [("Segment", "text"), ("customer_id", "int")]}
    assert column_hint("KeyError: 'Segment'", two).startswith(
        "The column 'Segment' is in files/b.csv, not in the table that line reads: merge"
    )
    assert "'Diameter'" in column_hint("KeyError: 'diam'", tables)


def test_a_column_of_the_other_table_is_told_the_merge_on_the_agreeing_key() -> None:
    invoices = [("InvoiceID", "int"), ("CustomerID", "int"), ("Total ($)", "float")]
    customers = [("customer_id", "int"), ("Segment", "text")]
    two = {"files/invoices.csv": invoices, "files/customers.csv": customers}
    assert column_hint("KeyError: 'Segment'", two).endswith(
        "merge the tables first:\nmerged = pd.read_csv('files/invoices.csv')"
        ".merge(pd.read_csv('files/customers.csv'), left_on='CustomerID', "
        "right_on='customer_id')\nthen take every column from merged."
    )
    unkeyed = {**two, "files/customers.csv": [("cid", "int"), ("Segment", "text")]}
    assert column_hint("KeyError: 'Segment'", unkeyed).endswith(
        "(pd.merge with left_on/right_on for the key columns)."
    )


# --- 3. a repair may not hide the error ----------------------------------------------------------

GUARDED = (
    "df = pd.read_csv('files/wind.csv')\n"
    "if 'windspeed' in df.columns:\n"
    "    print(round(df['windspeed'].mean(), 2))\n"
    "else:\n"
    "    print('The column windspeed does not exist in the data.')\n"
    "print('Done with the wind data, the mean was computed above.')"
)
CAUGHT = (
    "df = pd.read_csv('files/wind.csv')\n"
    "try:\n    print(round(df['wind'].mean(), 2))\n"
    "except Exception as e:\n    print(f'Error: {e}')"
)


async def test_a_guarded_print_or_a_caught_error_is_not_a_success(
    open_runtime, lms, tmp_path
) -> None:
    runtime = await open_runtime(**SMALL)
    await dataset_session(runtime, tmp_path, "wind.csv", WIND)
    lms.root = scripted_lm([fenced(GUARDED), fenced(CAUGHT), fenced(WIND_GOOD)])
    result, events = await turn(runtime, WIND_TASK)
    assert result.status == "completed", result.error
    assert result.answer.strip() == "3.33"
    assert len(task_cells(events)) == 3
    _, second, third = lms.root.engine_script.requests
    assert "printed an error instead of the answer" in second
    assert "does not exist" in second and "' WINDSPEED'" in second  # and the real column
    assert "printed an error instead of the answer: Error: 'wind'" in third


async def test_a_hidden_error_never_becomes_the_answer(open_runtime, lms, tmp_path) -> None:
    runtime = await open_runtime(**SMALL, FLEET_ENGINE__SMALL_REPAIRS="1")
    await dataset_session(runtime, tmp_path, "wind.csv", WIND)
    lms.root = scripted_lm([fenced(GUARDED), fenced(CAUGHT)])
    result, _ = await turn(runtime, WIND_TASK)
    assert result.status == "failed"
    assert "does not exist" not in (result.answer or "")


def test_what_hides_an_error() -> None:
    assert guarded_print(GUARDED, "The column windspeed does not exist in the data.\nDone")
    assert guarded_print(GUARDED, "3.33\nDone with the wind data") is None  # the guard held
    assert hidden_error(CAUGHT, "Error: 'wind'") == "Error: 'wind'"
    assert hidden_error("print(3.33)", "3.33") is None
    honest = "if n:\n    print('dropped', n)\nelse:\n    print('No missing values; 0 errors')"
    assert guarded_print(honest, "No missing values; 0 errors") is None


# --- 4. a failure seen again gets different help ----------------------------------------------


async def test_a_failure_seen_again_gets_the_line_then_the_inputs_shape(
    open_runtime, lms, tmp_path
) -> None:
    runtime = await open_runtime(**SMALL)
    await quick_session(runtime, tmp_path)
    lms.root = scripted_lm([fenced(BROKEN), fenced(BROKEN), fenced(BROKEN_AGAIN), fenced(PROGRAM)])
    result, events = await turn(runtime, TASK)
    assert result.status == "completed", result.error
    assert len(task_cells(events)) == 3  # the repeat never ran
    requests = lms.root.engine_script.requests
    first, repeat, again = (requests[i][len(requests[i - 1]) :] for i in (1, 2, 3))
    assert "KeyError" in first and "The line that fails" not in first
    assert "same program again" in repeat
    assert "The line that fails is line 4: totals = df.groupby(" in repeat
    assert "What the input files really hold:" in again
    assert "files/sales.csv: 5 rows" in again and "'revenue': float64" in again
    assert len({first, repeat, again}) == 3


async def test_a_third_failure_seen_again_is_told_a_simpler_plan(open_runtime, lms, tmp_path):
    runtime = await open_runtime(**SMALL, FLEET_ENGINE__SMALL_REPAIRS="3")
    await quick_session(runtime, tmp_path)
    third = BROKEN.replace("totals", "t")
    lms.root = scripted_lm([fenced(p) for p in (BROKEN, BROKEN, BROKEN_AGAIN, third, PROGRAM)])
    result, _ = await turn(runtime, TASK)
    assert result.status == "completed", result.error
    requests = lms.root.engine_script.requests
    assert "Start again with a simpler plan" in requests[4][len(requests[3]) :]


# --- 5. statistics helpers ----------------------------------------------------------------------

STUDY = "hours,score\n" + "".join(
    f"{h},{s}\n" for h, s in [(1, 52), (2, 55), (3, 61), (4, 60), (5, 68), (6, 71), (7, 70)]
)
STATS_TASK = "Is score correlated with hours in files/study.csv? Print @r[value] @p_value[value]."
STATS_PROGRAM = (
    "df = pd.read_csv('files/study.csv')\n"
    "c = correlation(df['hours'], df['score'])\n"
    "print(f\"@r[{c['r']:.3f}] @p_value[{c['p_value']:.4f}]\")"
)


async def test_the_statistics_helpers_are_defined_for_the_program(
    open_runtime, lms, tmp_path
) -> None:
    from scipy import stats

    runtime = await open_runtime(**SMALL)
    await dataset_session(runtime, tmp_path, "study.csv", STUDY)
    lms.root = scripted_lm([fenced(STATS_PROGRAM)])
    result, _ = await turn(runtime, STATS_TASK)
    assert result.status == "completed", result.error
    expected = stats.pearsonr([1, 2, 3, 4, 5, 6, 7], [52, 55, 61, 60, 68, 71, 70])
    assert result.answer.strip() == f"@r[{expected.statistic:.3f}] @p_value[{expected.pvalue:.4f}]"
    prompt = lms.root.engine_script.requests[0]
    assert "r, p_value = correlation(x, y, method='pearson'|'spearman')" in prompt
    lms.root = scripted_lm([fenced("print(6 * 7)")])
    await turn(runtime, "Print six times seven.")
    assert "Helpers already defined" not in lms.root.engine_script.requests[0]  # no statistics


async def test_a_helpers_result_unpacks_in_its_documented_order(
    open_runtime, lms, tmp_path
) -> None:
    """``r, p = correlation(x, y)`` (the unpacking the model wrote in the first tune run, where
    the helper refused it with a TypeError and three repairs did not recover) runs and answers
    at once; scipy's names (``.statistic``, ``.pvalue``) read the same figures."""
    from scipy import stats

    runtime = await open_runtime(**SMALL)
    await dataset_session(runtime, tmp_path, "study.csv", STUDY)
    unpacked = (
        "df = pd.read_csv('files/study.csv')\n"
        "r, p_value = correlation(df['hours'], df['score'])\n"
        "c = correlation(df['hours'], df['score'])\n"
        "assert (c.statistic, c.pvalue, c.p_value, c['r']) == (r, p_value, p_value, r)\n"
        'print(f"@r[{r:.3f}] @p_value[{p_value:.4f}]")'
    )
    lms.root = scripted_lm([fenced(unpacked)])
    result, events = await turn(runtime, STATS_TASK)
    assert result.status == "completed", result.error
    expected = stats.pearsonr([1, 2, 3, 4, 5, 6, 7], [52, 55, 61, 60, 68, 71, 70])
    assert result.answer.strip() == f"@r[{expected.statistic:.3f}] @p_value[{expected.pvalue:.4f}]"
    assert len(lms.root.engine_script.requests) == 1 and len(task_cells(events)) == 1


def test_the_statistics_helpers_agree_with_scipy() -> None:
    import math

    from scipy import stats

    from fleet_core.engine.stathelpers import (
        correlation,
        linear_fit,
        normality,
        regression_metrics,
        ttest,
    )

    x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, float("nan")]
    y = [2.1, 3.9, 6.2, 7.8, 10.1, 12.2, 13.8, 16.1, 3.0]
    pearson = stats.pearsonr(x[:8], y[:8])
    got = correlation(x, y)
    assert got["n"] == 8 and math.isclose(got["r"], pearson.statistic)
    assert math.isclose(got["p_value"], pearson.pvalue)
    fit = stats.linregress(x[:8], y[:8])
    line = linear_fit(x, y)
    assert math.isclose(line["slope"], fit.slope) and math.isclose(line["intercept"], fit.intercept)
    assert math.isclose(line["r_squared"], fit.rvalue**2)
    a, b = [5.1, 4.9, 5.6, 5.8, 6.0, 5.2], [6.4, 6.9, 7.1, 6.6, 7.3, 6.8]
    student = stats.ttest_ind(a, b)
    t = ttest(a, b)
    assert math.isclose(t["p_value"], student.pvalue) and t["significant"] is True
    assert math.isclose(
        ttest(a, b, equal_var=False)["p_value"], stats.ttest_ind(a, b, equal_var=False).pvalue
    )
    assert math.isclose(ttest(a, mu=5.0)["p_value"], stats.ttest_1samp(a, 5.0).pvalue)
    shapiro = stats.shapiro(a)
    assert dict(normality(a)) == {
        "statistic": float(shapiro.statistic),
        "p_value": float(shapiro.pvalue),
        "normal": shapiro.pvalue >= 0.05,
        "test": "shapiro",
    }
    # each result unpacks in its documented order, and its parts are named as well
    r, p = got
    assert (r, p) == (got.r, got.p_value) == (got.statistic, got.pvalue)
    assert got.n == 8 and dict(got) == {"r": r, "p_value": p, "n": 8}
    t_stat, t_p = t
    assert (t_stat, t_p) == (student.statistic, student.pvalue) and t.significant is True
    slope, intercept, r_squared, p_slope = line
    assert (slope, intercept, r_squared, p_slope) == (*line[:3], fit.pvalue)
    assert json.loads(json.dumps(got)) == [r, p]
    with pytest.raises(KeyError, match="this result holds 'r', 'p_value', 'n'"):
        got["rho"]
    metrics = regression_metrics([3.0, 5.0, 7.0], [2.5, 5.0, 7.5])
    assert math.isclose(metrics["mse"], 0.5 / 3) and math.isclose(metrics["mae"], 1 / 3)
    assert math.isclose(metrics["r_squared"], 1 - 0.5 / 8)


# --- 6. the answer's stated format ---------------------------------------------------------------

TOTAL_TASK = "What is the total revenue in files/sales.csv? Print it as @total[value]."
TOTAL_PLAIN = "df = pd.read_csv('files/sales.csv')\nprint('total:', df['revenue'].sum())"
TOTAL_TAGGED = "df = pd.read_csv('files/sales.csv')\nprint(f\"@total[{df['revenue'].sum()}]\")"


async def test_an_answer_in_another_format_than_the_tasks_is_asked_again(
    open_runtime, lms, tmp_path
) -> None:
    runtime = await open_runtime(**SMALL)
    await quick_session(runtime, tmp_path)
    lms.root = scripted_lm([fenced(TOTAL_PLAIN), fenced(TOTAL_TAGGED)])
    result, _ = await turn(runtime, TOTAL_TASK)
    assert result.status == "completed", result.error
    assert result.answer.strip() == "@total[411.0]"
    first, second = lms.root.engine_script.requests
    assert 'The answer format: end the program with print(f"@total[{total}]")' in first
    follow_up = second[len(first) :]
    assert 'it does not print the task\'s format: end it with print(f"@total[{total}]")' in (
        follow_up
    )
    assert "printed:\ntotal: 411.0\n" in follow_up  # the next step sees the first one's output


async def test_the_same_program_after_a_format_doubt_is_taken_as_meant(
    open_runtime, lms, tmp_path
) -> None:
    runtime = await open_runtime(**SMALL)
    await quick_session(runtime, tmp_path)
    lms.root = scripted_lm([fenced(TOTAL_PLAIN), fenced(TOTAL_PLAIN)])
    result, events = await turn(runtime, TOTAL_TASK)
    assert result.status == "completed", result.error
    assert result.answer.strip() == "total: 411.0" and len(task_cells(events)) == 2


async def test_a_table_printed_with_its_index_is_asked_without(open_runtime, lms, tmp_path):
    runtime = await open_runtime(**SMALL)
    await quick_session(runtime, tmp_path)
    indexed = PROGRAM.replace("print(totals.to_string(index=False))", "print(totals)")
    lms.root = scripted_lm([fenced(indexed), fenced(PROGRAM)])
    result, _ = await turn(runtime, TASK)
    assert result.status == "completed", result.error
    assert "index column" in lms.root.engine_script.requests[1]
    assert not printed_index(result.answer) and "north    150.5" in result.answer


def test_what_breaks_the_format() -> None:
    task = "print @r[value] @p_value[value] @significant[yes or no]"
    assert format_problem(task, "@r[0.41] @p_value[0.0123] @significant[yes]") is None
    assert format_problem(task, "r = 0.41") == (
        "it does not print the task's format: end it with "
        'print(f"@r[{r}] @p_value[{p_value}] @significant[{significant}]")'
    )
    assert "no computed value in @significant" in (
        format_problem(task, "@r[0.41] @p_value[0.01] @significant[yes or no]") or ""
    )
    copied = format_problem("print @worst_path[/path]", "@worst_path[/path]/api/orders")
    assert copied is not None and copied.startswith(
        "it prints no computed value in @worst_path[...]"  # the task's own text, copied
    )
    assert format_problem("print @worst_path[/path]", "@worst_path[/api/orders]") is None
    assert printed_index("  region  revenue\n0   east     10.0\n1  north    150.5")
    assert not printed_index("region  revenue\n  east     10.0\n north    150.5")


def test_the_first_prompt_ends_with_the_answer_format() -> None:
    from fleet_core.engine.context import TurnInputs

    inputs = TurnInputs(
        task=TOTAL_TASK,
        mode="hybrid",
        workspace_manifest="",
        skills_catalog="",
        memory_summary="",
        session_history="",
    )
    prompt = first_prompt(inputs)
    assert prompt.endswith(
        'with print(f"@total[{total}]"), each variable holding the computed '
        "value (nothing else inside the brackets: no name, no unit, no dict), rounded as the "
        "task says."
    )
    assert json.dumps(prompt)  # plain text


def test_the_profile_knows_the_embedded_models_context_window() -> None:
    from fleet_core.config import EngineSettings
    from fleet_core.engine.profile import CONTEXT_TOKENS, PROGRAM_TOKENS, resolve_profile

    auto = EngineSettings()
    assert resolve_profile(auto, embedded_root=True, context_tokens=4_096).context_tokens == 4_096
    hosted = resolve_profile(EngineSettings(profile="small"), embedded_root=False)
    assert hosted.context_tokens == CONTEXT_TOKENS and hosted.program_tokens == PROGRAM_TOKENS
    wide = resolve_profile(
        EngineSettings(profile="small", small_max_tokens=2_000), embedded_root=True
    )
    assert wide.program_tokens == 2_000  # a re-ask never has less room than the first ask


# --- 7a. where two cheap attempts disagree, the host decides ([engine] small_vote) ---------------

VOTE = {**SMALL, "FLEET_ENGINE__SMALL_VOTE": "true"}
MEANS = PROGRAM.replace("['revenue'].sum()", "['revenue'].mean()")  # plausible, wrong figures
MAXES = PROGRAM.replace("['revenue'].sum()", "['revenue'].max()")


async def test_two_disagreeing_programs_are_decided_by_a_third(open_runtime, lms, tmp_path):
    """The first (greedy) program's figures are wrong; an independently sampled second one
    disagrees, a third agrees with the second, and its answer and artifact stand."""
    runtime = await open_runtime(**VOTE)
    await quick_session(runtime, tmp_path)
    lms.root = recording_lm([fenced(MEANS), fenced(PROGRAM), fenced(PROGRAM)])
    result, events = await turn(runtime, TASK)
    assert result.status == "completed", result.error
    assert await artifact_rows(runtime) == EXPECTED
    assert "150.5" in result.answer and "75.25" not in result.answer
    assert task_cells(events) == [MEANS, PROGRAM, PROGRAM]
    first, second, third = lms.root.engine_script.requests
    assert second == first and third == first  # sampled from the first prompt alone
    assert [c.temperature for c in lms.root.engine_script.configs][1:] == [0.7, 0.7]
    assert result.usage.model_calls == 3  # every vote call is accounted


async def test_two_agreeing_programs_need_no_third(open_runtime, lms, tmp_path) -> None:
    runtime = await open_runtime(**VOTE)
    await quick_session(runtime, tmp_path)
    reworded = PROGRAM.replace("totals", "by_region")  # another program, the same figures
    lms.root = scripted_lm([fenced(PROGRAM), fenced(reworded)])
    result, events = await turn(runtime, TASK)
    assert result.status == "completed", result.error
    assert len(lms.root.engine_script.requests) == 2 and len(task_cells(events)) == 2
    assert await artifact_rows(runtime) == EXPECTED


async def test_without_a_majority_the_first_program_stands_with_its_artifact(
    open_runtime, lms, tmp_path
) -> None:
    runtime = await open_runtime(**VOTE)
    await quick_session(runtime, tmp_path)
    lms.root = scripted_lm([fenced(PROGRAM), fenced(MEANS), fenced(MAXES)])
    result, events = await turn(runtime, TASK)
    assert result.status == "completed", result.error
    assert "150.5" in result.answer and await artifact_rows(runtime) == EXPECTED  # restored
    assert task_cells(events) == [PROGRAM, MEANS, MAXES, PROGRAM]


async def test_the_vote_is_off_by_default(open_runtime, lms, tmp_path) -> None:
    runtime = await open_runtime(**SMALL)
    await quick_session(runtime, tmp_path)
    lms.root = scripted_lm([fenced(MEANS)])
    result, _ = await turn(runtime, TASK)
    assert result.status == "completed" and len(lms.root.engine_script.requests) == 1


def test_when_two_answers_agree() -> None:
    from fleet_core.engine.repairs import figures, same_answer, same_number

    assert figures("north 150.5, total 1,348.5 on 2024-01") == ["150.5", "1348.5", "2024", "01"]
    assert same_number("0.41", "0.4123") and not same_number("0.41", "0.42")
    tagged = "Print @r[value] @p_value[value] @significant[yes or no]."
    assert same_answer(
        tagged,
        "@r[0.41] @p_value[0.01] @significant[Yes]",
        "@r[0.4123] @p_value[0.012] @significant[yes] and more 7",
    )
    assert not same_answer(
        tagged,
        "@r[0.41] @p_value[0.01] @significant[yes]",
        "@r[0.41] @p_value[0.01] @significant[no]",
    )
    assert same_answer("totals", "east 10.0\nnorth 150.5", "north 150.50\neast 10")
    assert not same_answer("totals", "east 10.0\nnorth 150.5", "east 10.0\nnorth 75.25")
    assert not same_answer("totals", "east 10.0", "east 10.0\nnorth 150.5")


def test_a_vote_step_is_begun_only_within_the_budget() -> None:
    from fleet_core.engine.control import TurnControl

    control = TurnControl(max_units=2, timeout_seconds=None)
    step = CodeFirst(lm=None, control=control, interpreter=None, profile=EngineProfile())  # type: ignore[arg-type]
    assert step._affordable(2)
    control.charge(1, "generation")
    assert step._affordable(1) and not step._affordable(2)
    # and only when the deadline leaves 1.5 times this run's pace per call
    now = [0.0]
    timed = TurnControl(max_units=9, timeout_seconds=10, clock=lambda: now[0])
    paced = CodeFirst(lm=None, control=timed, interpreter=None, profile=EngineProfile())  # type: ignore[arg-type]
    paced._started, paced._calls = time.monotonic() - 4.0, 1  # 4 s a call so far
    assert paced._affordable(1) and not paced._affordable(2)  # 10 s left: 6 s, not 12 s
    now[0] = 5.0
    assert not paced._affordable(1)


# --- 7b. a program that ran but left work undone is continued -----------------------------------

UNWRITTEN = PROGRAM.replace("totals.to_csv('artifacts/revenue_by_region.csv', index=False)\n", "")
FINISH = (
    "os.makedirs('artifacts', exist_ok=True)\n"
    "totals.to_csv('artifacts/revenue_by_region.csv', index=False)"
)


async def test_a_program_that_did_not_write_the_artifact_is_continued(
    open_runtime, lms, tmp_path
) -> None:
    """The next step sees the first one's output and continues in the same session (it uses
    the first program's ``totals``); run alone, as a repair would run it, it fails."""
    runtime = await open_runtime(**SMALL)
    await quick_session(runtime, tmp_path)
    lms.root = scripted_lm([fenced(UNWRITTEN), fenced(FINISH)])
    result, events = await turn(runtime, TASK)
    assert result.status == "completed", result.error
    assert result.outcome is not None and result.outcome.kind == "submitted"
    assert await artifact_rows(runtime) == EXPECTED
    assert task_cells(events) == [UNWRITTEN, FINISH]
    first, second = lms.root.engine_script.requests
    step = second[len(first) :]
    assert "It is not finished: it did not write artifacts/revenue_by_region.csv" in step
    assert "printed:\nregion  revenue" in step and "Its variables are still defined" in step
    assert "north    150.5" in result.answer


TWO_TAGS = (
    "What are the total revenue and the row count of files/sales.csv? "
    "Print @total[value] @rows[value]."
)
ONE_TAG = (
    "df = pd.read_csv('files/sales.csv')\ntotal = df['revenue'].sum()\nprint(f'@total[{total}]')"
)


async def test_a_program_that_printed_some_of_the_tags_is_continued(open_runtime, lms, tmp_path):
    runtime = await open_runtime(**SMALL)
    await quick_session(runtime, tmp_path)
    lms.root = scripted_lm([fenced(ONE_TAG), fenced("print(f'@rows[{len(df)}]')")])
    result, _ = await turn(runtime, TWO_TAGS)
    assert result.status == "completed", result.error
    assert result.answer.strip() == "@total[411.0]\n@rows[5]"
    assert (
        'it does not print @rows[...]: print(f"@rows[{rows}]")'
        in (lms.root.engine_script.requests[1])
    )


async def test_a_complete_program_is_not_continued(open_runtime, lms, tmp_path) -> None:
    runtime = await open_runtime(**SMALL)
    await quick_session(runtime, tmp_path)
    both = ONE_TAG + "\nprint(f'@rows[{len(df)}]')"
    lms.root = scripted_lm([fenced(both)])
    result, events = await turn(runtime, TWO_TAGS)
    assert result.status == "completed", result.error
    assert len(lms.root.engine_script.requests) == 1 and task_cells(events) == [both]


# --- 8. a repaired program starts from a fresh namespace ------------------------------------------


async def test_a_repair_does_not_read_a_failed_programs_variables(
    open_runtime, lms, tmp_path
) -> None:
    """Seen on the embedded model (join_tables, seed 8): a repair filtered a variable it no
    longer defined, which still held the failed program's value, and failed on it three times
    with a misleading KeyError. A whole program starts from the prelude's names: the repair
    fails with a NameError naming the variable, imported modules stay, and the fixed program
    answers."""
    runtime = await open_runtime(**SMALL)
    await quick_session(runtime, tmp_path)
    first = (
        "import numpy as np\ndf = pd.read_csv('files/sales.csv')\n"
        "totals = df.groupby('region', as_index=False)['revenue'].sum()\nraise ValueError('x')"
    )
    stale = "print(totals.to_string(index=False))"  # uses the failed program's variable
    modules = "print(np.__name__, pd.__name__, callable(correlation))"  # imports, helpers kept
    lms.root = scripted_lm([fenced(first), fenced(stale), fenced(modules), fenced(PROGRAM)])
    result, _ = await turn(runtime, TASK)
    assert result.status == "completed", result.error
    requests = lms.root.engine_script.requests
    assert "NameError: name 'totals' is not defined" in requests[2][len(requests[1]) :]
    assert "numpy pandas True" not in requests[2]  # the third program had not run yet
    assert "numpy pandas True" in requests[3][len(requests[2]) :]
    assert await artifact_rows(runtime) == EXPECTED


async def test_a_continuation_keeps_the_programs_variables(open_runtime, lms, tmp_path) -> None:
    """A continuation step is not a new program: it still sees the first step's names, and
    a grouped result it writes with index=False keeps its labels (seen on the embedded model:
    monthly_series, seed 8, lost its months that way)."""
    runtime = await open_runtime(**SMALL)
    await quick_session(runtime, tmp_path)
    grouped = PROGRAM.replace("as_index=False)", ")").replace("to_string(index=False)", "sum()")
    first = grouped.replace("totals.to_csv(", "pass  # totals.to_csv(")
    rest = "totals.to_csv('artifacts/revenue_by_region.csv', index=False)"
    lms.root = scripted_lm([fenced(first), fenced(rest)])
    result, _ = await turn(runtime, TASK)
    assert result.status == "completed", result.error
    assert len(lms.root.engine_script.requests) == 2
    assert await artifact_rows(runtime) == EXPECTED


async def test_a_program_after_one_that_ran_to_its_end_keeps_its_names(
    open_runtime, lms, tmp_path
) -> None:
    """Only a program that raised leaves a half-made state: after a doubt (the program ran to
    its end; seen on the embedded model: monthly_series, seed 8) the next program may use what
    it computed, as the model expects."""
    runtime = await open_runtime(**SMALL)
    await quick_session(runtime, tmp_path)
    doubted = PROGRAM.replace("print(", "best = 'best-of-the-doubted-program'\nprint(").replace(
        LABELLED_TOTALS, BARE_TOTALS
    )
    fixed = PROGRAM + "\nprint(best)"
    lms.root = scripted_lm([fenced(doubted), fenced(fixed)])
    result, _ = await turn(runtime, TASK)
    assert result.status == "completed", result.error
    assert "as one column of numbers" in lms.root.engine_script.requests[1]
    assert "best-of-the-doubted-program" in result.answer
    assert await artifact_rows(runtime) == EXPECTED
