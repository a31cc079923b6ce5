"""A coefficient of determination taken as the correlation itself (``r_squared = fit.rvalue``:
scipy's ``linregress`` gives r, not r squared) is squared before the program runs
(engine/rewrites.py); the scripted model, the real local sandbox."""

from __future__ import annotations

from fleet_core.engine.rewrites import squared_r
from fleet_core.engine.scripted_lm import scripted_lm
from tests.engine.support import dataset_session, fenced, task_cells
from tests.engine.support import small_turn as turn

XY = "x,y\n1,2.0\n2,4.5\n3,5.0\n4,9.0\n5,8.5\n6,13.0\n"
TASK = "Fit a line of y on x in files/xy.csv and print @slope[value] @r_squared[value]."
#: As the embedded model wrote it (a seed-18 linear_fit tune transcript: r_squared 0.395 for
#: an r squared of 0.156).
RVALUE_FIT = (
    "from scipy.stats import linregress\n"
    "df = pd.read_csv('files/xy.csv')\n"
    "fit = linregress(df['x'], df['y'])\n"
    "r_squared = fit.rvalue\n"
    'print(f"@slope[{fit.slope:.3f}] @r_squared[{r_squared:.3f}]")'
)


def test_a_bare_r_under_an_r_squared_name_is_squared() -> None:
    code = (
        "r_squared = fit.rvalue\n"
        "d = {'r2': res.rvalue, 'slope': res.slope}\n"
        "R_sq = r_value\n"
        "save(rsquared=fit.rvalue)"
    )
    assert squared_r(code).splitlines() == [
        "r_squared = (fit.rvalue) ** 2",
        "d = {'r2': (res.rvalue) ** 2, 'slope': res.slope}",
        "R_sq = (r_value) ** 2",
        "save(rsquared=(fit.rvalue) ** 2)",
    ]


def test_r_squared_already_squared_or_a_plain_r_stays() -> None:
    code = "r_squared = fit.rvalue ** 2\nr = fit.rvalue\nr2 = r2_score(y, p)\nr_value = fit.rvalue"
    assert squared_r(code) == code
    assert squared_r("r2 = (") == "r2 = ("  # a program that does not parse is left to fail


async def test_r_squared_from_rvalue_is_answered_squared(open_runtime, lms, tmp_path) -> None:
    runtime = await open_runtime(FLEET_ENGINE_PROFILE="small")
    await dataset_session(runtime, tmp_path, "xy.csv", XY)
    lms.root = scripted_lm([fenced(RVALUE_FIT)])
    result, events = await turn(runtime, TASK)
    assert result.status == "completed", result.error
    assert "@r_squared[0.929]" in result.answer and "@slope[2.029]" in result.answer
    [cell] = task_cells(events)
    assert "r_squared = (fit.rvalue) ** 2" in cell  # the task cell shows the program as it ran
