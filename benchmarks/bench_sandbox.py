"""LocalSandbox isolated (bwrap + rlimits + cgroups) versus the same persistent CPython worker
without isolation, measured alternately in one run.

    uv run python benchmarks/bench_sandbox.py [--cold 5] [--warm 100] [--json out.json]

Figures, p50 and p95: time to interactive (construct, start, first ``40 + 2``), a warm ``6 * 7``
cell, a cell making one host-tool call, a cell receiving a 1 MiB string variable, shutdown
(``destroy``), and startup RSS (every process of the sandbox: bwrap, its reaper, the worker).
Target: isolated within 2x of unisolated on every figure.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from fleet_core.sandbox import SandboxSpec
from fleet_core.sandbox.local import LocalSandbox

MODES = ("isolated", "unisolated")
FIGURES = ("tti_ms", "warm_ms", "tool_ms", "var_1mib_ms", "shutdown_ms", "rss_mib")
ONE_MIB = "x" * (1 << 20)


def make(mode: str, root: Path) -> LocalSandbox:
    workspace = Path(tempfile.mkdtemp(dir=root))
    spec = SandboxSpec(session_id="bench", agent_id=workspace.name, workspace=workspace)
    if mode == "isolated":
        return LocalSandbox(spec, isolation_mode="bwrap")
    return LocalSandbox(spec, allow_unisolated=True, isolation_mode="none")


def tree_rss_mib(root_pid: int) -> float:
    total, stack = 0, [root_pid]
    while stack:
        pid = stack.pop()
        try:
            status = Path(f"/proc/{pid}/status").read_text()
            kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
        stack.extend(int(k) for k in kids)
    return total / 1024


async def timed(fn: Callable[[], Awaitable[Any]]) -> float:
    started = time.perf_counter()
    await fn()
    return (time.perf_counter() - started) * 1000


async def cold_session(mode: str, root: Path, samples: dict[str, list[float]]) -> None:
    started = time.perf_counter()
    sandbox = make(mode, root)
    await sandbox.start()
    result = await sandbox.execute("40 + 2")
    samples["tti_ms"].append((time.perf_counter() - started) * 1000)
    assert result.value_repr == "42"
    proc = sandbox._proc  # benchmark-only peek at the process tree
    assert proc is not None
    samples["rss_mib"].append(tree_rss_mib(proc.pid))
    samples["shutdown_ms"].append(await timed(sandbox.destroy))


async def warm_runs(sandboxes: dict[str, LocalSandbox], warm: int, out: dict[str, Any]) -> None:
    tools = {"echo": lambda value: value}
    cases: dict[str, Callable[[LocalSandbox], Awaitable[Any]]] = {
        "warm_ms": lambda sb: sb.execute("6 * 7"),
        "tool_ms": lambda sb: sb.execute("echo(1)", tools=tools),
        "var_1mib_ms": lambda sb: sb.execute("len(s)", variables={"s": ONE_MIB}),
    }
    for figure, case in cases.items():
        for _ in range(warm):
            for mode in MODES:  # interleaved, so noise hits both sides alike
                run = functools.partial(case, sandboxes[mode])
                out[mode][figure].append(await timed(run))


def summarize(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"p50": statistics.median(ordered), "p95": p95, "n": len(ordered)}


async def main(cold: int, warm: int) -> dict[str, Any]:
    samples: dict[str, Any] = {mode: {f: [] for f in FIGURES} for mode in MODES}
    with tempfile.TemporaryDirectory(prefix="bench-sbx-") as tmp:
        root = Path(tmp)
        for mode in MODES:  # warm-up: page cache, imports
            await cold_session(mode, root, {f: [] for f in FIGURES})
        for _ in range(cold):
            for mode in MODES:
                await cold_session(mode, root, samples[mode])
        sandboxes = {mode: make(mode, root) for mode in MODES}
        for sandbox in sandboxes.values():
            await sandbox.start()
        try:
            await warm_runs(sandboxes, warm, samples)
        finally:
            for sandbox in sandboxes.values():
                await sandbox.destroy()
    return {mode: {f: summarize(samples[mode][f]) for f in FIGURES} for mode in MODES}


def report(results: dict[str, Any]) -> str:
    lines = [
        "| figure | unisolated p50 / p95 | isolated p50 / p95 | ratio (p50) |",
        "|---|---|---|---|",
    ]
    for figure in FIGURES:
        iso, plain = results["isolated"][figure], results["unisolated"][figure]
        ratio = iso["p50"] / plain["p50"] if plain["p50"] else float("nan")
        lines.append(
            f"| {figure} | {plain['p50']:.3f} / {plain['p95']:.3f} | "
            f"{iso['p50']:.3f} / {iso['p95']:.3f} | {ratio:.2f} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cold", type=int, default=5)
    parser.add_argument("--warm", type=int, default=100)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    outcome = asyncio.run(main(args.cold, args.warm))
    print(report(outcome))
    if args.json:
        args.json.write_text(json.dumps(outcome, indent=2))
