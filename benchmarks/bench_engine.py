"""Engine benchmarks (results in docs/benchmarks.md, section "Engine").

1. Host overhead per RLM iteration: a Turn whose scripted root LM answers instantly runs N trivial
   cells in our LocalSandbox. Overhead per iteration = (wall time - time inside cells) of a
   16-iteration Turn minus the same for a 2-iteration Turn, divided by 14 (fixed costs such as
   sandbox start and commit cancel out). Target: <= 10 ms per iteration.
2. spawn_agents fan-out: a cell calls spawn_agents with 4 subtasks versus 1, every scripted model
   call taking 200 ms (each child: one code step + SUBMIT). Measured: the spawn cell's duration.
   Target: 4 children <= 1.3x one child's time with 4 live children allowed.

Run: ``uv run python benchmarks/bench_engine.py [--rounds 5]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from fleet_core.api import FleetRuntime
from fleet_core.config import load_config
from fleet_core.engine.lm import StaticLmProvider
from fleet_core.engine.scripted_lm import action, scripted_lm, submit
from fleet_core.models import TurnRequest


async def _turn(runtime: FleetRuntime, session: str, task: str) -> tuple[float, list[Any], Any]:
    events: list[Any] = []
    started = time.perf_counter()
    result = await runtime.run_turn(
        TurnRequest(session_id=session, task=task), on_event=events.append
    )
    assert result.status == "completed", result.error
    return time.perf_counter() - started, events, result


def _cell_seconds(events: list[Any]) -> float:
    return sum(e.payload.get("duration_ms", 0.0) / 1000 for e in events if e.kind == "cell_output")


async def iteration_overhead(rounds: int) -> dict[str, Any]:
    samples = []
    with tempfile.TemporaryDirectory() as tmp:
        config = load_config(environ={"FLEET_STATE_DIR": f"{tmp}/state"}, cwd=Path(tmp))
        holder: dict[str, Any] = {}

        class Lms:
            def check(self, *roles: str) -> None:
                return None

            def lm(self, role: str) -> Any:
                return holder["lm"]

            def uses_embedded(self, role: str) -> bool:
                return False

        runtime = await FleetRuntime.open(config, lm_provider=Lms())
        await runtime.new_session("bench", mode="rlm")
        try:
            for _ in range(rounds + 1):  # first round is a warm-up
                measured = {}
                for n in (2, 16):
                    holder["lm"] = scripted_lm(
                        [action(f"x{i} = {i}") for i in range(n - 1)] + [submit("'done'")]
                    )
                    wall, events, _ = await _turn(runtime, "bench", f"iterate {n}")
                    measured[n] = wall - _cell_seconds(events)
                samples.append((measured[16] - measured[2]) / 14 * 1000)
        finally:
            await runtime.close()
    samples = samples[1:]
    return {
        "per_iteration_host_ms_median": round(statistics.median(samples), 2),
        "samples_ms": [round(s, 2) for s in samples],
        "target_ms": 10,
    }


def _child_script() -> list[str]:
    return [action("total = sum(range(1000))\nprint(total)"), submit_child()]


def submit_child() -> str:
    return action("SUBMIT(findings=str(total))", "Submit.")


async def fanout(rounds: int) -> dict[str, Any]:
    def lms(n: int) -> StaticLmProvider:
        root = scripted_lm(
            [
                action(
                    f"r = spawn_agents(subtasks=[f'CHILD-{{i}} sum' for i in range({n})])\n"
                    "print([x['findings'] for x in r])"
                ),
                submit("'ok'"),
            ]
        )
        rules = {f"CHILD-{i} ": _child_script() for i in range(n)}
        return StaticLmProvider(root, scripted_lm(rules=rules, latency=0.2))

    timings: dict[int, list[float]] = {1: [], 4: []}
    with tempfile.TemporaryDirectory() as tmp:
        for index in range(rounds + 1):
            for n in (1, 4):
                state = f"{tmp}/state-{index}-{n}"
                config = load_config(environ={"FLEET_STATE_DIR": state}, cwd=Path(tmp))
                runtime = await FleetRuntime.open(config, lm_provider=lms(n))
                try:
                    await runtime.new_session("fan", mode="rlm")
                    _, events, _ = await _turn(runtime, "fan", "fan out")
                finally:
                    await runtime.close()
                spawn = next(
                    e
                    for e in events
                    if e.kind == "cell_output"
                    and e.agent_id == "root"
                    and e.payload.get("phase") == "task"
                )
                if index:
                    timings[n].append(spawn.payload["duration_ms"] / 1000)
    one, four = statistics.median(timings[1]), statistics.median(timings[4])
    return {
        "one_child_s_median": round(one, 3),
        "four_children_s_median": round(four, 3),
        "ratio": round(four / one, 3),
        "target_ratio": 1.3,
        "samples": {str(k): [round(v, 3) for v in vs] for k, vs in timings.items()},
    }


async def main(rounds: int) -> None:
    report = {
        "iteration_overhead": await iteration_overhead(rounds),
        "spawn_agents_fanout": await fanout(rounds),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    asyncio.run(main(parser.parse_args().rounds))
