"""A search draws no tqdm bars: DSPy's evaluator ("Average Metric: 1 / 3 (33%)|███...") and
GEPA's engine ("GEPA Optimization") would write them to the process's stdout and stderr (over
stdio the server diverts them to its log; the CLI draws its own bars)."""

from __future__ import annotations

import pytest

from fleet_core.api import FleetRuntime

from .conftest import add_examples


async def test_search_writes_no_progress_bars(
    opt_runtime: FleetRuntime, capfd: pytest.CaptureFixture[str]
) -> None:
    await add_examples(opt_runtime, {"alpha": 3, "beta": 3, "crit": 3}, critical=("crit",))
    await opt_runtime.new_session("research-1", mode="rlm")
    capfd.readouterr()

    run = await opt_runtime.optimization.run("research-1", max_metric_calls=12)

    out, err = capfd.readouterr()
    assert run.rollouts > 12  # the search and the validation passes really ran
    for bar in ("%|", "it/s]", "GEPA Optimization"):  # tqdm's bar, its rate, GEPA's bar
        assert bar not in out and bar not in err, (bar, out[-300:], err[-300:])
