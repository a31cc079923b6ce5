"""A whole program (one that reads its inputs again) that prints a figure it no longer
computes, which an earlier program of the Turn computed, gets that figure computed again from
its own data (the earlier one-line assignment put before its first use, ``rewrites.rederived``)
rather than printing the earlier program's value. Seen in a tune transcript (seed-92
``stock_counts`` with the vote): after a doubt, the correction deduplicated on a normalized key
but printed ``@rows_kept`` from the program it replaced, 62 where its own table held 43 rows.
The scripted model and the real local sandbox."""

from __future__ import annotations

from fleet_core.engine.rewrites import reads_inputs, rederived
from fleet_core.engine.scripted_lm import scripted_lm
from tests.engine.support import dataset_session, fenced
from tests.engine.support import small_turn as turn

SMALL = {"FLEET_ENGINE_PROFILE": "small"}
ORDERS = "id,Country,Amount\n1,NL,500\n2,NL,100\n3,DE,700\n"
TASK = (
    "How many orders in files/orders.csv are above 400, and what is their total Amount? "
    "Print @count[N] @total[X]."
)
#: Filters on the wrong threshold and leaves the total empty: the host asks again.
FIRST = (
    "df = pd.read_csv('files/orders.csv')\n"
    "big = df[df['Amount'] > 50]\n"
    "count = len(big)\n"
    "total = float('nan')\n"
    'print(f"@count[{count}] @total[{total}]")'
)
#: Filters right and computes the total, but no longer the count it prints.
SECOND = (
    "df = pd.read_csv('files/orders.csv')\n"
    "big = df[df['Amount'] > 400]\n"
    "total = big['Amount'].sum()\n"
    'print(f"@count[{count}] @total[{total}]")'
)


async def test_a_whole_program_computes_again_a_figure_it_took_from_an_earlier_one(
    open_runtime, lms, tmp_path
) -> None:
    runtime = await open_runtime(**SMALL)
    await dataset_session(runtime, tmp_path, "orders.csv", ORDERS)
    lms.root = scripted_lm([fenced(FIRST), fenced(SECOND)])
    result, _ = await turn(runtime, TASK)
    assert result.status == "completed", result.error
    assert result.answer.strip().splitlines()[0] == "@count[2] @total[1200]"  # not @count[3]
    assert len(lms.root.engine_script.requests) == 2


def test_the_earlier_assignment_goes_before_the_first_use_on_its_line() -> None:
    earlier = "big = df[df.a > 1]\ncount = len(big)\nlabel = 'x'"
    code = "df = pd.read_csv('files/a.csv')\nbig = df[df.a > 4]\nprint(count, label)"
    assert rederived(code, earlier).splitlines() == [
        "df = pd.read_csv('files/a.csv')",
        "big = df[df.a > 4]",
        "count = len(big); label = 'x'; print(count, label)",
    ]


def test_a_figure_is_not_rederived_when_its_inputs_are_not_bound_before_its_use() -> None:
    earlier = "big = df[df.a > 1]\ncount = len(big)"
    code = "df = pd.read_csv('files/a.csv')\nprint(count)\nbig = df"
    assert rederived(code, earlier) == code  # big is bound only after the print
    multi = "count = len(\n    big)"
    code = "df = pd.read_csv('files/a.csv')\nbig = df\nprint(count)"
    assert rederived(code, f"big = df\n{multi}") == code  # not a one-line assignment
    fragment = "print(count)"  # a fragment continuing the earlier program keeps its names
    assert rederived(fragment, earlier) == fragment
    own = "df = pd.read_csv('files/a.csv')\nbig = df\ncount = 1\nprint(count)"
    assert rederived(own, earlier) == own  # it computes the figure itself
    inside = "df = pd.read_csv('files/a.csv')\nbig = df\nif True:\n    print(count)"
    assert rederived(inside, earlier) == inside  # an indented use: left as it is


def test_a_program_reads_its_inputs_when_it_reads_a_file() -> None:
    assert reads_inputs("df = pd.read_csv('files/a.csv')\nprint(len(df))")
    assert reads_inputs("with open('files/a.log') as f:\n    lines = f.readlines()")
    assert reads_inputs("rows = [json.loads(l) for l in open('files/e.jsonl')]")
    assert not reads_inputs("open('artifacts/a.txt', 'w').write('x')")  # a write
    assert not reads_inputs("df.to_csv('artifacts/a.csv', index=False)")  # a fragment
    assert not reads_inputs("df = pd.read_csv(")  # does not parse: left as it is
