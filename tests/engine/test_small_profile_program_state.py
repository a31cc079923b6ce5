"""A failed program's repair is told what its variables held when it raised
(engine/programstate.py): the scripted model, the real local sandbox."""

from __future__ import annotations

from fleet_core.engine.programstate import STATE_CHARS, STATE_HEADING, state_block
from fleet_core.engine.scripted_lm import scripted_lm
from tests.engine.support import (
    BROKEN,
    BROKEN_AGAIN,
    EXPECTED,
    PROGRAM,
    TASK,
    artifact_rows,
    fenced,
    quick_session,
)
from tests.engine.support import (
    small_turn as turn,
)

SMALL = {"FLEET_ENGINE_PROFILE": "small"}

#: A table built empty two lines before the line that fails (the bug is not on that line).
EMPTY_TABLE = (
    "import os\n"
    "df = pd.read_csv('files/sales.csv')\n"
    "north = df[df['region'] == 'North']\n"
    "best = north.loc[north['revenue'].idxmax(), 'region']\n"
    "print(best)"
)


async def test_a_repair_is_told_the_failed_programs_variables_and_an_empty_table(
    open_runtime, lms, tmp_path
) -> None:
    runtime = await open_runtime(**SMALL)
    await quick_session(runtime, tmp_path)
    lms.root = scripted_lm([fenced(EMPTY_TABLE), fenced(PROGRAM)])
    result, _ = await turn(runtime, TASK)
    assert result.status == "completed", result.error
    assert await artifact_rows(runtime) == EXPECTED
    requests = lms.root.engine_script.requests
    repair = requests[1][len(requests[0]) :]
    assert STATE_HEADING in repair
    assert "df = DataFrame, 5 rows; columns 'region', 'revenue'; first row: " in repair
    assert "north = DataFrame EMPTY, 0 rows; columns 'region', 'revenue'" in repair
    # the prelude's names, modules and helpers are not the program's
    assert "pd =" not in repair and "correlation =" not in repair and "os =" not in repair


async def test_a_program_that_never_ran_gets_no_variables(open_runtime, lms, tmp_path) -> None:
    runtime = await open_runtime(**SMALL)
    await quick_session(runtime, tmp_path)
    lms.root = scripted_lm(
        [fenced("df = pd.read_csv('files/sales.csv'\nprint(df)"), fenced(PROGRAM)]
    )
    result, _ = await turn(runtime, TASK)
    assert result.status == "completed", result.error
    requests = lms.root.engine_script.requests
    assert "SyntaxError" in requests[1] and STATE_HEADING not in requests[1]


async def test_a_repair_sees_only_the_variables_of_the_program_that_failed(
    open_runtime, lms, tmp_path
) -> None:
    """After a program that raised, the next whole program starts from a fresh namespace, so
    the second failure's list does not show the first program's names."""
    runtime = await open_runtime(**SMALL)
    await quick_session(runtime, tmp_path)
    other = "import os\nsales = pd.read_csv('files/sales.csv')\nprint(sales['amount'].sum())"
    lms.root = scripted_lm([fenced(EMPTY_TABLE), fenced(other), fenced(PROGRAM)])
    result, _ = await turn(runtime, TASK)
    assert result.status == "completed", result.error
    requests = lms.root.engine_script.requests
    second = requests[2][len(requests[1]) :]
    assert "sales = DataFrame, 5 rows" in second
    assert "north =" not in second


def test_the_state_block_is_bounded_and_empty_without_names() -> None:
    assert state_block("\n  \n") == ""
    block = state_block("\n".join(f"name{i} = list of 3; first: {'x' * 150}" for i in range(40)))
    assert len(block) <= STATE_CHARS + 4
    assert block.startswith(STATE_HEADING) and block.endswith("...")


def test_a_huge_text_is_shown_by_its_first_characters_each_line_bounded() -> None:
    """The cell runs in the program's namespace; a 50 MB text or a list of them is shown by its
    first characters, each line bounded (run here in-process on the prelude)."""
    import contextlib
    import io

    from fleet_core.engine.codefirst import prelude
    from fleet_core.engine.programstate import LINE_CHARS, state_cell

    scope: dict[str, object] = {}
    exec(prelude(), scope)
    exec("big = 'x' * 50_000_000\nwords = ['y' * 10_000_000, 'z']\nn = 3", scope)
    shown = io.StringIO()
    with contextlib.redirect_stdout(shown):
        exec(state_cell(), scope)
    lines = shown.getvalue().splitlines()
    assert [line.split(" = ")[0] for line in lines] == ["big", "words", "n"]
    assert lines[0].startswith("big = str 'xxx") and lines[0].endswith("...")
    assert all(len(line) <= LINE_CHARS for line in lines)


async def test_a_failed_turn_says_the_last_exception_not_the_repairs_help(
    open_runtime, lms, tmp_path
) -> None:
    runtime = await open_runtime(
        **SMALL, FLEET_ENGINE__SMALL_FRESH_RETRY="false", FLEET_ENGINE__SMALL_EXTRA_REPAIRS="0"
    )
    await quick_session(runtime, tmp_path)
    lms.root = scripted_lm([fenced(BROKEN), fenced(EMPTY_TABLE), fenced(BROKEN_AGAIN)])
    result, _ = await turn(runtime, TASK)
    assert result.status == "failed"
    assert result.error is not None
    said = result.error.message
    assert said.endswith("the program failed 3 time(s); KeyError: 'Column not found: amount'")
    assert STATE_HEADING[:20] not in said and "Reply with" not in said
