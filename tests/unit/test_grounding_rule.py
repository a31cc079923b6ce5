"""The grounded-SUBMIT rule (engine/grounding.py): which figures count, what counts as observed,
the typed-precision rule and the per-namespace rejection count."""

from __future__ import annotations

import time
from decimal import Decimal

import pytest

from fleet_core.engine.grounding import (
    MAX_EVENT_FIGURES,
    Grounding,
    figures_in_code,
    figures_in_text,
)


def _texts(text: str) -> list[str]:
    return [f.text for f in figures_in_text(text) if not f.ignored]


def _ungrounded(observed: list[str], code: str, payload: dict[str, object]) -> list[str]:
    grounding = Grounding()
    for text in observed:
        grounding.observe(text)
    return grounding.ungrounded_figures(code, payload)


def _submit(answer: str) -> tuple[str, dict[str, object]]:
    """A cell that types ``answer`` as a literal and submits it."""
    return f"SUBMIT(answer={answer!r}, learned_skill_note='')", {
        "answer": answer,
        "learned_skill_note": "",
    }


# --- what a figure is --------------------------------------------------------------------------


def test_figures_with_thousands_separators_currency_decimals_and_percent() -> None:
    found = {f.text: f for f in figures_in_text("Revenue $1,234,567.50 rose 12.5% to 98 000")}
    assert found["$1,234,567.50"].value == Decimal("1234567.50")
    assert found["$1,234,567.50"].decimals == 2
    assert found["12.5%"].percent and found["12.5%"].value == Decimal("12.5")
    assert "98" in found and "000" in found  # a space is no thousands separator


def test_names_versions_and_hex_digits_are_not_figures() -> None:
    assert _texts("col_2024 x15 v1.2.3 sha a81d3e6c55 Q4") == []


def test_small_integers_are_indices_but_small_decimals_and_percentages_are_figures() -> None:
    assert _texts("step 3 of 7, row 0") == []
    assert _texts("3.0 and 7%") == ["3.0", "7%"]
    assert _texts("10 rows") == ["10"]


def test_years_are_figures() -> None:
    assert _texts("in 2023 and 1999") == ["2023", "1999"]


def test_sign_is_ignored() -> None:
    assert [f.value for f in figures_in_text("-5.25 and +12")] == [Decimal("5.25"), Decimal("12")]


def test_bad_thousands_grouping_reads_as_separate_numbers() -> None:
    assert _texts("1,2345 and 12,34") == ["2345", "12", "34"]


def test_code_literals_keep_their_typed_precision() -> None:
    found = {f.text: f for f in figures_in_code("x = 1_000.50\ny = 0x1F\nz = 1e5\nflag = True\n")}
    assert found["1_000.50"].value == Decimal("1000.50") and found["1_000.50"].decimals == 2
    assert found["0x1F"].value == 31
    assert found["1e5"].value == 100000
    assert set(found) == {"1_000.50", "0x1F", "1e5"}  # a bool is not a figure


def test_code_figures_inside_strings_and_fstrings() -> None:
    code = "SUBMIT(answer=f'Total {t} is 1,234.5 ({share}% of 20,000)')"
    assert [f.text for f in figures_in_code(code) if not f.ignored] == ["1,234.5", "20,000"]


def test_code_that_does_not_parse_has_no_figures() -> None:
    assert figures_in_code("SUBMIT(answer='1234'") == []


# --- observed vs typed -------------------------------------------------------------------------


def test_typed_figure_never_observed_is_ungrounded() -> None:
    code, payload = _submit("The total is 1234.5")
    assert _ungrounded(["nothing numeric here"], code, payload) == ["1234.5"]


def test_typed_figure_that_was_printed_is_grounded() -> None:
    code, payload = _submit("The total is 1234.5")
    assert _ungrounded(["total=1234.5\n"], code, payload) == []


def test_exact_match_across_formats() -> None:
    code, payload = _submit("Revenue was $1,234,567")
    assert _ungrounded(["1234567"], code, payload) == []


def test_rounding_at_the_typed_precision() -> None:
    observed = ["pi = 3.14159", "mean 1234.6"]
    assert _ungrounded(observed, *_submit("pi is about 3.14")) == []
    assert _ungrounded(observed, *_submit("pi is about 3.142")) == []  # 3.14159 rounds to it
    assert _ungrounded(observed, *_submit("mean 1235")) == []
    assert _ungrounded(observed, *_submit("pi is about 3.141")) == ["3.141"]  # wrong rounding
    assert _ungrounded(observed, *_submit("pi is 3.14160")) == ["3.14160"]  # invented digits


def test_trailing_zeros_are_typed_precision() -> None:
    assert _ungrounded(["12.5"], *_submit("12.50")) == []
    assert _ungrounded(["12.49"], *_submit("12.50")) == ["12.50"]


def test_percentages_match_observed_ratios_and_the_reverse() -> None:
    assert _ungrounded(["share 0.125"], *_submit("a 12.5% share")) == []
    assert _ungrounded(["share 12.5%"], *_submit("a share of 0.125")) == []
    assert _ungrounded(["share 0.13"], *_submit("a 12.5% share")) == ["12.5%"]


def test_figures_only_computed_are_not_checked() -> None:
    code = "SUBMIT(answer=f'The total is {total}', learned_skill_note='')"
    assert _ungrounded([], code, {"answer": "The total is 98765", "learned_skill_note": ""}) == []


def test_literal_in_code_but_not_in_payload_is_not_checked() -> None:
    code = "total = 98765 * 2\nSUBMIT(answer=str(total))"
    assert _ungrounded([], code, {"answer": "197530"}) == []


def test_numeric_literal_submitted_as_a_value_is_checked() -> None:
    assert _ungrounded([], "SUBMIT(answer=4821.75)", {"answer": 4821.75}) == ["4821.75"]


def test_small_integers_and_non_figure_literals_are_ignored() -> None:
    code, payload = _submit("Step 3: see column x2024 and item 7 of version 1.2.3")
    assert _ungrounded([], code, payload) == []


def test_years_must_be_observed_like_any_figure() -> None:
    assert _ungrounded([], *_submit("Sales peaked in 2019")) == ["2019"]
    assert _ungrounded(["date 2019-03-01"], *_submit("Sales peaked in 2019")) == []


def test_learned_note_is_not_checked() -> None:
    code = "SUBMIT(answer='done', learned_skill_note='the file had 4821 rows')"
    assert (
        _ungrounded([], code, {"answer": "done", "learned_skill_note": "the file had 4821 rows"})
        == []
    )


def test_inputs_count_as_observed_and_are_scanned_once() -> None:
    grounding = Grounding()
    grounding.observe_inputs({"task": "Is 15% of 2,400 equal to 360?", "memory_summary": ""})
    grounding.observe_inputs({"task": "Is 15% of 2,400 equal to 360?", "memory_summary": ""})
    assert grounding.ungrounded_figures(*_submit("Yes: 15% of 2,400 is 360")) == []


def test_observed_values_may_be_any_repr() -> None:
    grounding = Grounding()
    grounding.observe({"north": 1520.25, "rows": [1, 234]})
    assert grounding.ungrounded_figures(*_submit("north 1,520.25 over 234 rows")) == []


def test_observed_figures_are_bounded() -> None:
    grounding = Grounding(max_observed=3)
    grounding.observe("11 12 13 14 15")
    assert grounding.observed_count == 3
    assert grounding.ungrounded_figures(*_submit("14")) == ["14"]


# --- rejections per namespace ------------------------------------------------------------------


def test_first_two_ungrounded_submissions_are_rejected_then_accepted_and_flagged() -> None:
    grounding = Grounding()
    code, payload = _submit("The total is 1234.5")
    verdicts = [grounding.check(code, payload) for _ in range(3)]
    assert [v.rejected for v in verdicts] == [True, True, False]
    assert [v.figures for v in verdicts] == [["1234.5"]] * 3
    assert "1 of 2" in verdicts[0].explanation() and "1234.5" in verdicts[0].explanation()


def test_a_grounded_submission_does_not_count() -> None:
    grounding = Grounding()
    grounding.observe("1234.5")
    verdict = grounding.check(*_submit("The total is 1234.5"))
    assert verdict.grounded and not verdict.rejected and grounding.ungrounded == 0


@pytest.mark.parametrize("count", [MAX_EVENT_FIGURES + 5])
def test_reported_figures_are_bounded(count: int) -> None:
    answer = " ".join(str(1000 + i) for i in range(count))
    verdict = Grounding().check(*_submit(answer))
    assert len(verdict.figures) == MAX_EVENT_FIGURES


def test_observed_comma_runs_count_both_ways() -> None:
    assert _ungrounded(["row: a,1,234"], *_submit("1,234 in total")) == []
    assert _ungrounded(["row: a,1,234"], *_submit("the second value is 234")) == []


def test_a_long_cell_is_read_in_linear_time() -> None:
    # A cell that types its data (one literal a line) and submits: each literal's source text
    # must not cost a pass over the whole cell (5,000 lines took 13 s that way).
    lines = [f"    {1000 + i}.5," for i in range(5_000)]
    code = "data = [\n" + "\n".join(lines) + "\n]\nSUBMIT(answer='é ' + str(sum(data)))"
    started = time.perf_counter()
    found = figures_in_code(code)
    assert time.perf_counter() - started < 1.5
    assert len(found) == 5_000 and found[0].text == "1000.5" and found[0].decimals == 1
    assert found[-1].text == "5999.5"
