"""GEPA on the embedded model's code-first prompt: one measured run (issue 14's last lever).

    uv run --extra local-model python benchmarks/gepa_small.py [--max-metric-calls 6]
        [--per-task 3] [--seed 7] [--state DIR]

Builds a replay dataset from the product's own quickstart-like tasks (bench_demo.py's sales,
log and words cases on freshly generated data: three source groups), each example a Turn
recorded with a scripted correct program (its replay snapshot holds the inputs; its approved
labels hold the figures computed from the data), then runs ``FleetRuntime.optimization.run`` with no
endpoint configured: the rollouts, the judge and the reflection all run on the embedded
Qwen2.5-Coder-1.5B, whose Turns take the small profile, so GEPA's candidate components include
``codefirst``. Prints the search's dev scores, the gate's checks and the changed components.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_demo import CASES, ORACLE, oracle_provider

from fleet_core.api import FleetRuntime
from fleet_core.config import load_config
from fleet_core.evaluation.labels import LabelUpdate
from fleet_core.models import TurnRequest

TASKS = ("sales", "log", "words")


def expected(kind: str, files: dict[str, bytes]) -> list[str]:
    """The figures the labelled answer must state, read from the oracle's own artifact."""
    path = {"sales": "revenue_by_region.csv", "log": "errors.txt", "words": "top_words.csv"}[kind]
    text = files[f"artifacts/{path}"].decode()
    if kind == "log":
        return [str(len([line for line in text.splitlines() if line.strip()]))]
    rows = [line.split(",") for line in text.splitlines()[1:] if line.strip()]
    return [row[0] if kind == "words" else row[1] for row in rows]


async def record_examples(environ: dict[str, str], per_task: int, seed: int) -> int:
    count = 0
    config = load_config(environ={**environ, "FLEET_ENGINE_PROFILE": "small"}, cwd=Path.cwd())
    for kind in TASKS:
        for index in range(per_task):
            # a runtime per example: the scripted oracle answers one Turn
            runtime = await FleetRuntime.open(config, lm_provider=oracle_provider(kind))
            try:
                case = CASES[kind](random.Random(seed * 100 + index), 300)
                session = f"src-{kind}-{index}"
                await runtime.new_session(session)
                await runtime.write_file(session, f"files/{case.name}", case.content.encode())
                await runtime.set_dataset(session, f"files/{case.name}", kind)
                result = await runtime.run_turn(
                    TurnRequest(session_id=session, task=case.task, record_replay=True)
                )
                assert result.status == "completed", result.error
                files = {p: await runtime.read_file(session, p) for p in case.artifacts}
                update = LabelUpdate(
                    review_status="approved",
                    source_group=kind,
                    expected_answer=result.answer,
                    expected_values=expected(kind, files),
                    reviewer="bench-oracle",
                )
                await runtime.traces.label(result.turn_id, update)
                count += 1
            finally:
                await runtime.close()
    return count


async def main(args: argparse.Namespace) -> None:
    state = Path(args.state or tempfile.mkdtemp(prefix="gepa-small-"))
    environ = {
        **{k: v for k, v in os.environ.items() if not k.startswith("FLEET_")},
        "FLEET_STATE_DIR": str(state),
        "FLEET_TURN_TIMEOUT_SECONDS": "240",
        "FLEET_LOCAL_MODEL__DIRECTORY": args.model_dir,
    }
    started = time.perf_counter()
    examples = await record_examples(environ, args.per_task, args.seed)
    print(f"dataset: {examples} approved replay examples in {state}", flush=True)
    if args.max_metric_calls == 0:  # the dataset only (a check of this script)
        return
    runtime = await FleetRuntime.open(load_config(environ=environ, cwd=Path.cwd()))
    try:
        await runtime.new_session("target")

        def progress(p: Any) -> None:
            print(f"  {p}", flush=True)

        run = await runtime.optimization.run(
            "target", max_metric_calls=args.max_metric_calls, seed=args.seed, on_progress=progress
        )
    finally:
        await runtime.close()
    print(json.dumps(run.wire() if hasattr(run, "wire") else str(run), indent=1, default=str))
    print(f"total {time.perf_counter() - started:.0f} s; oracle programs: {sorted(ORACLE)}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-metric-calls", type=int, default=6)
    parser.add_argument("--per-task", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--state", default="")
    parser.add_argument("--model-dir", default=str(Path.cwd() / ".fleet" / "localmodel"))
    anyio.run(main, parser.parse_args())
