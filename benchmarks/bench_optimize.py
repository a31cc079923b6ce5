"""GEPA search host overhead (results in docs/benchmarks.md, section "Optimization").

A ``--gepa-budget light`` run (``FleetRuntime.optimization.run``) over a curated replay dataset of 9
approved, replay-captured Turns in 3 source groups, with scripted serving, judge and reflection
models that answer instantly; every rollout is a real Turn in a fresh disposable runtime restored
from its replay snapshot (own SQLite store, workspace, sandbox), so what is measured is the
host's cost per rollout: the runtime, the restore, the Turn, the sandbox, GEPA and cleanup.

- ``search_s_per_rollout``: the search phase's wall time divided by its rollouts, measured from
  the facade's progress reports (first search report to the last counted one). The light budget
  for 5 components is about 1,850 rollouts (30+ minutes here), so by default the run is
  **capped**: it is cancelled after ``--cap`` search rollouts (a prefix of the light run;
  ``--cap 0`` runs the whole budget, then validation too).
- Baseline in the same run: a bare Turn replay, the same task as a Turn in one long-lived
  runtime (no fresh runtime, no restore), median of ``--turns``. The ratio says what the fresh
  runtime restored from the snapshot adds.

Target: <= 0.5 s of host time per rollout.

Run: ``uv run python benchmarks/bench_optimize.py [--cap 60] [--turns 10]``
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from fleet_core.api import FleetRuntime, OptimizationProgress
from fleet_core.config import load_config
from fleet_core.engine.lm import StaticLmProvider
from fleet_core.errors import FleetError
from fleet_core.models import TurnRequest
from fleet_core.optimization.scripted_examples import TASK, add_examples, scripted_models


def provider() -> StaticLmProvider:
    root, judge, reflection = scripted_models()
    return StaticLmProvider(root, judge=judge, reflection=reflection)


async def build_dataset(runtime: FleetRuntime) -> None:
    await add_examples(runtime, {"alpha": 3, "beta": 3, "crit": 3}, critical=("crit",))


async def bare_turns(runtime: FleetRuntime, n: int) -> list[float]:
    await runtime.new_session("bare", mode="rlm")
    await runtime.write_file("bare", "files/input.txt", b"alpha 0")
    times = []
    for _ in range(n + 1):  # the first is a warm-up
        started = time.perf_counter()
        result = await runtime.run_turn(TurnRequest(session_id="bare", task=TASK))
        times.append(time.perf_counter() - started)
        assert result.status == "completed", result.error
    return times[1:]


async def main(cap: int, turns: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        env = {"FLEET_STATE_DIR": f"{tmp}/state", "FLEET_MLFLOW_DESTINATION": "off"}
        runtime = await FleetRuntime.open(
            load_config(environ=env, cwd=Path(tmp)), lm_provider=provider()
        )
        try:
            await build_dataset(runtime)
            bare = await bare_turns(runtime, turns)
            await runtime.new_session("research-1", mode="rlm")
            marks: list[tuple[float, OptimizationProgress]] = []
            cancel = threading.Event()

            def on_progress(p: OptimizationProgress) -> None:
                marks.append((time.perf_counter(), p))
                if cap and p.phase == "search" and p.done >= cap:
                    cancel.set()

            started = time.perf_counter()
            run = None
            try:
                run = await runtime.optimization.run(
                    "research-1", budget="light", on_progress=on_progress, cancel=cancel
                )
            except FleetError:
                if not cancel.is_set():
                    raise
            wall = time.perf_counter() - started
        finally:
            await runtime.close()
    search = [(t, p) for t, p in marks if p.phase == "search"]
    counted = [(t, p) for t, p in search if p.done > 0]
    first, last = search[0], counted[-1]
    per_rollout = (last[0] - first[0]) / last[1].done
    bare_median = statistics.median(bare)
    out: dict[str, Any] = {
        "light_budget_rollouts": search[0][1].total,
        "capped_at": cap or None,
        "search_rollouts_measured": last[1].done,
        "search_s_per_rollout": round(per_rollout, 3),
        "bare_turn_s_median": round(bare_median, 3),
        "ratio_rollout_to_bare_turn": round(per_rollout / bare_median, 2),
        "best_score": last[1].best_score,
        "wall_s": round(wall, 1),
        "target_s_per_rollout": 0.5,
    }
    if run is not None:
        out["all_rollouts"] = run.rollouts
        out["all_s_per_rollout"] = round(run.host_seconds / run.rollouts, 3)
    return out


if __name__ == "__main__":
    os.environ.setdefault("TQDM_DISABLE", "1")  # GEPA's and dspy's own bars: noise here
    logging.getLogger("dspy").setLevel(logging.WARNING)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cap", type=int, default=60, help="search rollouts (0: the full budget)")
    parser.add_argument("--turns", type=int, default=10, help="bare Turns for the baseline")
    args = parser.parse_args()
    with contextlib.redirect_stdout(sys.stderr):  # dspy's evaluation bars print to stdout
        result = asyncio.run(main(args.cap, args.turns))
    print(json.dumps(result, indent=2))
