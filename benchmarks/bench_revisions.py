"""The CLI's start-up cost at two revisions, as same-run ratios: CPU time (user + sys) and wall
time of ``fleet-lsp --help`` and ``fleet-lsp config show``, alternating between the revisions.

Each revision is checked out into a temporary ``git worktree`` and byte-compiled; both run with
this venv, the revision's own sources first on ``PYTHONPATH``. Rounds alternate, the order flipped
every other round. CPU time is the child's own (``RUSAGE_CHILDREN``), so it moves far less than
wall time when the machine is shared; both are reported.

Run: ``uv run python benchmarks/bench_revisions.py BEFORE [AFTER=HEAD] [--rounds 15]``.
"""

from __future__ import annotations

import argparse
import compileall
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
COMMANDS = {"fleet-lsp --help": ["--help"], "fleet-lsp config show": ["config", "show"]}


def child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def checkout(revision: str, into: Path) -> Path:
    subprocess.run(
        ["git", "worktree", "add", "--detach", "-f", str(into), revision],
        cwd=REPO,
        check=True,
        capture_output=True,
    )
    for folder in ("core", "fleet_lsp"):
        compileall.compile_dir(into / folder, quiet=1)
    return into


def one_run(tree: Path, argv: list[str]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one command in ``tree``."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("FLEET_")},
        "PYTHONPATH": f"{tree / 'core'}{os.pathsep}{tree}",
    }
    cpu, started = child_cpu(), time.perf_counter()
    command = [sys.executable, "-m", "fleet_lsp", *argv]
    subprocess.run(command, env=env, cwd=tree, capture_output=True, check=True)
    return child_cpu() - cpu, time.perf_counter() - started


def measure(
    trees: dict[str, Path], rounds: int
) -> dict[tuple[str, str], list[tuple[float, float]]]:
    found: dict[tuple[str, str], list[tuple[float, float]]] = {
        (name, command): [] for name in trees for command in COMMANDS
    }
    for n in range(rounds + 1):  # round 0 warms the page cache and is dropped
        order = list(trees) if n % 2 else list(trees)[::-1]
        for name in order:
            for command, argv in COMMANDS.items():
                sample = one_run(trees[name], argv)
                if n:
                    found[(name, command)].append(sample)
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("before")
    parser.add_argument("after", nargs="?", default="HEAD")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="fleet-bench-rev-") as tmp:
        trees = {
            "before": checkout(args.before, Path(tmp) / "before"),
            "after": checkout(args.after, Path(tmp) / "after"),
        }
        try:
            found = measure(trees, args.rounds)
        finally:
            for tree in trees.values():
                subprocess.run(
                    ["git", "worktree", "remove", "-f", str(tree)], cwd=REPO, check=False
                )
    print(
        f"{args.before} -> {args.after}, {args.rounds} rounds, "
        f"load {load:.1f} -> {os.getloadavg()[0]:.1f}"
    )
    for command in COMMANDS:
        medians = {
            name: [statistics.median(s[i] for s in found[(name, command)]) for i in (0, 1)]
            for name in trees
        }
        (b_cpu, b_wall), (a_cpu, a_wall) = medians["before"], medians["after"]
        print(
            f"{command}: CPU {b_cpu * 1e3:.0f} -> {a_cpu * 1e3:.0f} ms ({a_cpu / b_cpu:.2f}x), "
            f"wall {b_wall * 1e3:.0f} -> {a_wall * 1e3:.0f} ms ({a_wall / b_wall:.2f}x)"
        )


if __name__ == "__main__":
    main()
