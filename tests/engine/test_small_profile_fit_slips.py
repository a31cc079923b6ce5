"""scipy's ``linregress`` as the embedded model uses it (engine/fitrewrites.py): its result
unpacked into three names (``slope, intercept, r_squared = linregress(x, y)``: it has five
figures) gets them by name, and r taken for r squared (``r_squared = fit.rvalue``,
``f"@r_squared[{fit.rvalue:.3f}]"``) is squared, before the program runs; the scripted model,
the real local sandbox."""

from __future__ import annotations

import pytest

from fleet_core.engine.fitrewrites import fit_by_name, squared_r
from fleet_core.engine.scripted_lm import scripted_lm
from tests.engine.support import dataset_session, fenced, task_cells
from tests.engine.support import small_turn as turn

XY = "x,y\n1,2.0\n2,4.5\n3,5.0\n4,9.0\n5,8.5\n6,13.0\n"
TASK = "Fit a line of y on x in files/xy.csv and print @slope[value] @r_squared[value]."
ANSWER = "@slope[2.029] @r_squared[0.929]"
#: As the embedded model wrote them: the first program of the seed-18 and seed-19 linear_fit
#: tune instances (ValueError: too many values to unpack), and their repairs (r_squared 0.395
#: and 0.525 for r squared 0.156 and 0.276).
THREE_NAMES = (
    "from scipy.stats import linregress\n"
    "df = pd.read_csv('files/xy.csv')\n"
    "slope, intercept, r_squared = linregress(df['x'], df['y'])\n"
    'print(f"@slope[{slope:.3f}] @r_squared[{r_squared:.3f}]")'
)
RVALUE_ASSIGNED = (
    "from scipy.stats import linregress\n"
    "df = pd.read_csv('files/xy.csv')\n"
    "fit = linregress(df['x'], df['y'])\n"
    "r_squared = fit.rvalue\n"
    'print(f"@slope[{fit.slope:.3f}] @r_squared[{r_squared:.3f}]")'
)
RVALUE_PRINTED = (
    "from scipy.stats import linregress\n"
    "df = pd.read_csv('files/xy.csv')\n"
    "r = linregress(df['x'], df['y'])\n"
    'print(f"@slope[{r.slope:.3f}] @r_squared[{r.rvalue:.3f}]")'
)


def test_a_bare_r_under_an_r_squared_name_or_label_is_squared() -> None:
    code = (
        "r_squared = fit.rvalue\n"
        "d = {'r2': res.rvalue, 'slope': res.slope}\n"
        "R_sq = r_value\n"
        "save(rsquared=fit.rvalue)\n"
        'print(f"@r_squared[{fit.rvalue:.3f}] R^2 = {r_value} @r[{fit.rvalue}]")'
    )
    assert squared_r(code).splitlines() == [
        "r_squared = (fit.rvalue) ** 2",
        "d = {'r2': (res.rvalue) ** 2, 'slope': res.slope}",
        "R_sq = (r_value) ** 2",
        "save(rsquared=(fit.rvalue) ** 2)",
        'print(f"@r_squared[{(fit.rvalue) ** 2:.3f}] R^2 = {(r_value) ** 2} @r[{fit.rvalue}]")',
    ]


def test_r_squared_already_squared_or_a_plain_r_stays() -> None:
    code = (
        "r_squared = fit.rvalue ** 2\nr = fit.rvalue\nr2 = r2_score(y, p)\nr_value = fit.rvalue\n"
        'print(f"author2[{fit.rvalue}] @r[{r_value}]")'
    )
    assert squared_r(code) == code
    assert squared_r("r2 = (") == "r2 = ("  # a program that does not parse is left to fail


@pytest.mark.parametrize(
    "names",
    ["slope, intercept, r_squared", "m, b", "slope, intercept, r_value, p_value, std_err"],
)
def test_a_fit_unpacked_into_known_names_is_unpacked_by_name(names: str) -> None:
    code = f"{names} = stats.linregress(x, y)  # fit"
    wanted = tuple(n.strip() for n in names.split(","))
    assert (
        fit_by_name(code)
        == f"{names} = _fleet_fit_by_name(stats.linregress(x, y), {wanted!r})  # fit"
    )


def test_a_fit_unpacked_into_other_names_or_kept_whole_stays() -> None:
    for code in ("a, b, c = linregress(x, y)", "fit = linregress(x, y)", "s, i = other(x, y)"):
        assert fit_by_name(code) == code


@pytest.mark.parametrize("program", [THREE_NAMES, RVALUE_ASSIGNED, RVALUE_PRINTED])
async def test_a_fit_as_the_model_writes_it_is_answered_right(
    open_runtime, lms, tmp_path, program: str
) -> None:
    runtime = await open_runtime(FLEET_ENGINE_PROFILE="small")
    await dataset_session(runtime, tmp_path, "xy.csv", XY)
    lms.root = scripted_lm([fenced(program)])
    result, events = await turn(runtime, TASK)
    assert result.status == "completed", result.error
    assert result.answer.strip() == ANSWER
    assert len(task_cells(events)) == 1 and len(lms.root.engine_script.requests) == 1
