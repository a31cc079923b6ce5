"""``fleet-lsp turn`` wall time against the Turn's own duration, in the same run.

Each round runs the quickstart (scripted models through the ``FLEET_TEST_SCRIPT`` hook, pandas in
the real sandbox) as a user would: ``fleet-lsp turn TASK --session s --attach sales.csv --json``
in a fresh state dir, with local MLflow tracing on and with tracing off, alternating. The CLI's
overhead is the wall time minus the Turn's own ``durationSeconds`` (process start, imports, store
and migrations, attach, printing, exit). Target: overhead ≤ 1.5 s with tracing on (the trace is
queued in the Turn's commit; the CLI never waits for MLflow).

Run: ``uv run python benchmarks/bench_cli.py [--rounds 5]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_lsp import QUICKSTART, REPO, SALES, quickstart_script


def one_turn(root: Path, script: Path, destination: str, n: int) -> tuple[float, float]:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("FLEET_")},
        "FLEET_STATE_DIR": str(root / f"cli-{destination}-{n}"),
        "FLEET_TEST_SCRIPT": str(script),
        "FLEET_MLFLOW_DESTINATION": destination,
    }
    argv = [sys.executable, "-m", "fleet_lsp", "turn", QUICKSTART, "--session", "bench"]
    argv += ["--attach", str(SALES), "--json"]
    started = time.perf_counter()
    out = subprocess.run(argv, env=env, cwd=REPO, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    if out.returncode != 0:
        raise RuntimeError(f"fleet-lsp turn failed ({out.returncode}): {out.stderr[-2000:]}")
    result = json.loads(out.stdout)
    if result["status"] != "completed":
        raise RuntimeError(f"the quickstart Turn {result['status']}: {result.get('error')}")
    return wall, float(result["durationSeconds"])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fleet-bench-cli-") as tmp:
        root = Path(tmp)
        script = quickstart_script(root / "quickstart.json")
        one_turn(root, script, "off", -1)  # warm the page cache
        found: dict[str, list[tuple[float, float]]] = {"off": [], "local": []}
        for n in range(args.rounds):
            for destination in ("off", "local"):
                found[destination].append(one_turn(root, script, destination, n))
        for destination, runs in found.items():
            wall = statistics.median(w for w, _ in runs)
            turn = statistics.median(d for _, d in runs)
            overhead = statistics.median(w - d for w, d in runs)
            target = " (target <= 1.5 s)" if destination == "local" else ""
            print(
                f"fleet-lsp turn, tracing {destination}: wall {wall:.2f} s, Turn {turn:.2f} s, "
                f"overhead {overhead:.2f} s{target}"
            )


if __name__ == "__main__":
    main()
