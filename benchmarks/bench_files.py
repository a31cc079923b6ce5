"""A Turn's fixed cost against the number of files its workspace holds (docs/benchmarks.md,
section "Many files").

A trivial Turn (scripted root LM answering at once: ``x = 1``, then SUBMIT; generated code in the
isolated LocalSandbox) in a Session whose workspace holds 0 files, and the same in a Session
holding N empty files under ``artifacts/`` that the Turn never touches, alternating, median of
the rounds; reported as the ratio N/0 measured in the same run. Also: one page of
``fleet/workspace/list`` (``FleetRuntime.workspace_page``, 500 files) against that workspace,
and the whole listing's first page before paging for comparison (every file stat'ed and hashed).

Run: ``uv run python benchmarks/bench_files.py [--rounds 5] [--files 10000]``.
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
from fleet_core.engine.scripted_lm import SwitchableLms, action, scripted_lm, submit
from fleet_core.models import TurnRequest


async def _turn(runtime: FleetRuntime, lms: SwitchableLms, session: str, task: str) -> float:
    lms.root = scripted_lm([action("x = 1"), submit("'done'")])
    started = time.perf_counter()
    result = await runtime.run_turn(TurnRequest(session_id=session, task=task))
    elapsed = time.perf_counter() - started
    assert result.status == "completed", result.error
    assert result.artifacts == [], "the Turn listed artifacts it did not touch"
    return elapsed


def _fill(root: Path, count: int) -> None:
    for index in range(count):
        folder = root / "artifacts" / f"d{index // 1000:03}"
        if index % 1000 == 0:
            folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{index:06}.txt").touch()


async def run(rounds: int, files: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        environ = {"FLEET_STATE_DIR": f"{tmp}/state", "FLEET_SANDBOX__MAX_FILES": str(files + 100)}
        config = load_config(environ=environ, cwd=Path(tmp))
        lms = SwitchableLms()
        runtime = await FleetRuntime.open(config, lm_provider=lms, trace_export="deferred")
        try:
            await runtime.new_session("empty", mode="rlm")
            await runtime.new_session("full", mode="rlm")
            _fill(runtime.workspace("full").root, files)
            samples: dict[str, list[float]] = {"empty": [], "full": []}
            for index in range(rounds + 1):  # the first round warms up
                for session in ("empty", "full") if index % 2 else ("full", "empty"):
                    elapsed = await _turn(runtime, lms, session, f"round {index}")
                    if index:
                        samples[session].append(elapsed)
            page_s = []
            for _ in range(rounds):
                started = time.perf_counter()
                page = await runtime.workspace_page("full")
                page_s.append(time.perf_counter() - started)
                assert len(page.artifacts) == 500 and page.next_cursor
            started = time.perf_counter()
            whole = await runtime.list_workspace("full")  # every file stat'ed and hashed
            whole_s = time.perf_counter() - started
            assert len(whole["artifacts"]) == files
        finally:
            await runtime.close()
    empty, full = statistics.median(samples["empty"]), statistics.median(samples["full"])
    return {
        "files": files,
        "turn_empty_s_median": round(empty, 3),
        "turn_full_s_median": round(full, 3),
        "ratio": round(full / empty, 2),
        "samples_s": {k: [round(v, 3) for v in vs] for k, vs in samples.items()},
        "workspace_page_500_s_median": round(statistics.median(page_s), 4),
        "whole_listing_s": round(whole_s, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--files", type=int, default=10_000)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(run(args.rounds, args.files)), indent=2))


if __name__ == "__main__":
    main()
