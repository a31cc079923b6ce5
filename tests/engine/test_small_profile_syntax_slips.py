"""A format spec written after a value outside an f-string (``json.dump({"p_value":
p_value:.4f}, f)``: a SyntaxError the embedded model resent three times in a seed-21
correlation_test tune transcript) becomes ``round(p_value, 4)`` before the program runs
(engine/rewrites.py), and a variable named after an answer tag (``@server_errors = ...``, a
SyntaxError resent three times in a seed-70 log_status tune transcript) loses its ``@``; the
scripted model, the real local sandbox."""

from __future__ import annotations

import json

from fleet_core.engine.rewrites import stray_format_specs, tag_named_variables
from fleet_core.engine.scripted_lm import scripted_lm
from tests.engine.support import dataset_session, fenced, task_cells
from tests.engine.support import small_turn as turn

SCORES = "hours,score\n1,52\n2,60\n3,58\n4,71\n5,77\n6,80\n"
TASK = (
    "Correlate hours with score in files/scores.csv and save the Pearson r and its p-value to "
    'artifacts/correlation.json as {"r": ..., "p_value": ...}.'
)
STRAY = (
    "df = pd.read_csv('files/scores.csv')\n"
    "r, p_value = correlation(df['hours'], df['score'])\n"
    "os.makedirs('artifacts', exist_ok=True)\n"
    "with open('artifacts/correlation.json', 'w') as f:\n"
    '    json.dump({"r": r:.3f, "p_value": p_value:.4f}, f)\n'
    'print(f"r = {r:.3f}, p = {p_value:.4f}")'
)


def test_a_stray_format_spec_becomes_a_rounding_only_where_the_program_does_not_parse() -> None:
    code = 'json.dump({"p": p_value:.4f, "m": res.mean:.2f, "x": d["k"]:.1f}, f)'
    assert stray_format_specs(code) == (
        'json.dump({"p": round(p_value, 4), "m": round(res.mean, 2), "x": round(d["k"], 1)}, f)'
    )
    parses = 'print(f"{r.slope:.3f}")\nx = {"a": 1}'
    assert stray_format_specs(parses) == parses
    broken = "x = (p:.2f"  # still no program: left to fail as the model wrote it
    assert stray_format_specs(broken) == broken


async def test_a_stray_format_spec_runs_as_a_rounding(open_runtime, lms, tmp_path) -> None:
    runtime = await open_runtime(FLEET_ENGINE_PROFILE="small")
    await dataset_session(runtime, tmp_path, "scores.csv", SCORES)
    lms.root = scripted_lm([fenced(STRAY)])
    result, events = await turn(runtime, TASK)
    assert result.status == "completed", result.error
    saved = json.loads(await runtime.read_file("s", "artifacts/correlation.json"))
    assert saved["r"] == 0.966 and 0 < saved["p_value"] < 0.01
    assert len(lms.root.engine_script.requests) == 1
    assert '"r": round(r, 3), "p_value": round(p_value, 4)' in task_cells(events)[0]


TAGGED = (
    "df = pd.read_csv('files/scores.csv')\n"
    "@top_score = df['score'].max()\n"
    "@hours = int(df.loc[df['score'].idxmax(), 'hours'])\n"
    'print(f"@top_score[{@top_score}] @hours[{@hours}]")'
)
TOP_TASK = "Print the top score in files/scores.csv and its hours as @top_score[N] @hours[N]."


def test_a_variable_named_after_a_tag_loses_its_at_only_where_the_program_does_not_parse():
    assert tag_named_variables(TAGGED).splitlines()[1:] == [
        "top_score = df['score'].max()",
        "hours = int(df.loc[df['score'].idxmax(), 'hours'])",
        'print(f"@top_score[{top_score}] @hours[{hours}]")',
    ]
    decorated = "@functools.cache\ndef f(x):\n    return x\nprint(f'@x[{f(1)}]')"
    assert tag_named_variables(decorated) == decorated
    broken = "@x = (1\nprint(x)"  # still no program: left to fail as the model wrote it
    assert tag_named_variables(broken) == broken


async def test_a_variable_named_after_a_tag_runs(open_runtime, lms, tmp_path) -> None:
    runtime = await open_runtime(FLEET_ENGINE_PROFILE="small")
    await dataset_session(runtime, tmp_path, "scores.csv", SCORES)
    lms.root = scripted_lm([fenced(TAGGED)])
    result, _ = await turn(runtime, TOP_TASK)
    assert result.status == "completed", result.error
    assert result.answer.strip() == "@top_score[80] @hours[6]"
    assert len(lms.root.engine_script.requests) == 1
