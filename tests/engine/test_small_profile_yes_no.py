"""A task's ``@name[yes or no]`` tag printed from a boolean is printed yes or no
(engine/tagrewrites.py): the scripted model, the real local sandbox."""

from __future__ import annotations

from fleet_core.engine.scripted_lm import scripted_lm
from fleet_core.engine.tagrewrites import yes_no_fields, yes_no_names
from tests.engine.support import fenced, quick_session, task_cells
from tests.engine.support import small_turn as turn

SMALL = {"FLEET_ENGINE_PROFILE": "small"}
TASK = "Is the mean revenue in files/sales.csv above 80? Print @mean[value] @above[yes or no]."
#: As the embedded model wrote it (seed-62 correlation_test, a tune transcript).
BOOLEAN = (
    "df = pd.read_csv('files/sales.csv')\n"
    "mean = df['revenue'].mean()\n"
    'print(f"@mean[{mean:.2f}] @above[{mean > 80}]")'
)


def test_the_yes_or_no_tags_of_a_task() -> None:
    task = "Print @r[value] @p_value[value] @significant[yes or no] @Large[Yes or No]."
    assert yes_no_names(task) == ["significant", "Large"]
    assert yes_no_names("Print @n[N].") == []


def test_a_boolean_field_in_a_yes_or_no_tag_is_wrapped_and_nothing_else() -> None:
    code = (
        'print(f"@r[{r}] @significant[{p < 0.05}]")\n'
        'print(f"@significant[{flag!r}]")\n'  # a conversion: left as written
        "print('@significant[{x}]'.format(x=1))\n"  # no f-string field
    )
    fixed = yes_no_fields(code, ["significant"])
    assert fixed.splitlines() == [
        'print(f"@r[{r}] @significant[{_fleet_yes_no(p < 0.05)}]")',
        'print(f"@significant[{flag!r}]")',
        "print('@significant[{x}]'.format(x=1))",
    ]
    assert yes_no_fields(fixed, ["significant"]) == fixed  # once only
    assert yes_no_fields(code, []) == code


async def test_a_boolean_answer_to_a_yes_or_no_tag_is_printed_yes_with_no_model_call(
    open_runtime, lms, tmp_path
) -> None:
    runtime = await open_runtime(**SMALL)
    await quick_session(runtime, tmp_path)
    lms.root = scripted_lm([fenced(BOOLEAN)])
    result, events = await turn(runtime, TASK)
    assert result.status == "completed", result.error
    assert result.answer.strip() == "@mean[82.20] @above[yes]"
    assert result.outcome is not None and result.outcome.kind == "submitted"
    assert len(lms.root.engine_script.requests) == 1
    assert "_fleet_yes_no(mean > 80)" in task_cells(events)[0]


async def test_a_program_that_already_prints_yes_or_no_is_unchanged_in_meaning(
    open_runtime, lms, tmp_path
) -> None:
    runtime = await open_runtime(**SMALL)
    await quick_session(runtime, tmp_path)
    worded = BOOLEAN.replace("{mean > 80}", "{answer}").replace(
        "print(", "answer = 'no' if mean <= 80 else 'yes'\nprint(", 1
    )
    lms.root = scripted_lm([fenced(worded)])
    result, _ = await turn(runtime, TASK)
    assert result.status == "completed", result.error
    assert result.answer.strip() == "@mean[82.20] @above[yes]"
