"""The general task suite (benchmarks/tasks) through the product, beside a naive baseline.

    uv run --extra local-model python benchmarks/bench_tasks.py [--half tune|heldout|both]
        [--runs 3] [--seed 1] [--families a,b] [--profile auto|small|default] [--timeout 300]
        [--out bench_tasks_report.json] [--no-baseline] [--dry-run] [--heldout-transcripts]

Each family of the chosen half (benchmarks/tasks/split.toml) runs ``--runs`` times, every run on
a fresh instance (seed ``1000 * --seed + run``: new data, and for some families a new column or
condition). Per instance, in a fresh state directory and one runtime (``FleetRuntime.open`` on
the configured model: with no endpoint configured, the embedded local model, as in
``fleet-lsp demo``), two arms run against the same model, in alternating order:

- **product**: one Session with the files attached (the first selected as the dataset), one
  Turn in the configured mode (hybrid), then the instance's checker on its answer and artifacts.
- **baseline** (naive): one prompt holding each file's first lines and the task, sent once to
  the same root model (``FleetRuntime.models().lm("root")``, its configured temperature and
  output cap); the program in the reply is run as is, once, in the product's sandbox
  (``fleet_core.sandbox.create_sandbox`` over the Session's workspace with the ``[sandbox]``
  limits: how the engine builds a Turn's sandbox) with no prelude, no repair and no host
  checks; its printed output is the answer, checked by the same checker.

Reported per half and arm: correct/total, median and max seconds, model calls, prompt tokens
(from the ``TurnResult``'s usage; the baseline's from its one response). The JSON report keeps
every run; for held-out families it keeps only the verdict's category, never the programs,
answers or the checker's details (``--heldout-transcripts`` adds them, for after tuning).
``--dry-run`` replaces the model with each instance's reference program (scripted, run in the
real sandbox by both arms): a check of this file and of the checkers, not a measurement.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from fleet_core.api import FleetRuntime
from fleet_core.config import load_config
from fleet_core.models import TurnRequest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the suite: benchmarks/tasks

from bench_demo import cell_trail  # the same bounded trail of a Turn's cells
from tasks import FAMILIES, TaskInstance, Verdict, families_of, recorded

HEAD_LINES = 8  # the baseline shows each file's first lines
HEAD_LINE_CHARS = 200
_FENCE = re.compile(r"```[ \t]*(?:python|py|python3)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)


@dataclass
class Outcome:
    """One arm's run on one instance."""

    family: str
    half: str
    arm: str  # "product" or "baseline"
    run: int
    seed: int
    status: str  # the Turn's status; the baseline's: completed, failed (program raised), ...
    correct: bool
    why: str  # the checker's verdict (held out: only its category)
    seconds: float
    model_calls: int
    prompt_tokens: int | None
    completion_tokens: int | None
    route: str | None = None
    answer_kind: str | None = None  # the TurnResult's outcome: submitted, extracted, partial, ...
    split: dict[str, float | None] = field(default_factory=dict)  # where the Turn's time went
    transcript: dict[str, Any] | None = None  # tune half (or --heldout-transcripts) only
    load: float = field(default_factory=lambda: round(os.getloadavg()[0], 2))


def category(verdict: Verdict, status: str) -> str:
    """A verdict without its details: what a held-out run may report."""
    if verdict.ok:
        return "ok"
    if status != "completed":
        return status
    if verdict.why.startswith("no artifact"):
        return "no artifact"
    return "artifact wrong" if verdict.why.startswith("artifact") else "answer wrong"


def verdict_of(
    instance: TaskInstance, status: str, answer: str, files: dict[str, bytes]
) -> Verdict:
    if status != "completed":
        return Verdict(False, status)
    try:
        return instance.check(answer, files)
    except Exception as exc:  # a checker must not end the run; count it wrong and say so
        return Verdict(False, f"checker raised {type(exc).__name__}: {exc}")


def write_sources(folder: Path, instance: TaskInstance) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    for file in instance.files:
        (folder / file.name).write_text(file.content, encoding="utf-8")
    return [folder / file.name for file in instance.files]


async def attach(runtime: FleetRuntime, session_id: str, instance: TaskInstance, src: Path) -> None:
    """A Session with the instance's files attached and the first selected as the dataset."""
    await runtime.new_session(session_id)
    for source in write_sources(src / session_id, instance):
        await runtime.attach(session_id, source)
    await runtime.set_dataset(session_id, instance.dataset)


async def artifacts(
    runtime: FleetRuntime, session_id: str, instance: TaskInstance
) -> dict[str, bytes]:
    found: dict[str, bytes] = {}
    for path in instance.artifacts:
        with contextlib.suppress(Exception):  # a missing artifact is a wrong answer
            found[path] = await runtime.read_file(session_id, path)
    return found


@dataclass
class ArmResult:
    status: str
    verdict: Verdict
    seconds: float
    model_calls: int
    prompt_tokens: int | None
    completion_tokens: int | None
    route: str | None
    transcript: dict[str, Any]
    answer_kind: str | None = None
    split: dict[str, float | None] = field(default_factory=dict)


PARTS = ("prompt", "generation", "model_other", "model_start", "sandbox", "host")


def time_split(seconds: float, usage: Any) -> dict[str, float | None]:
    """A Turn's seconds by where they went: the server's prompt processing and generation,
    other time inside model calls, getting the model (the embedded server's start), cells in the
    sandbox, and the host (the rest)."""
    model = usage.model_seconds or 0.0
    sandbox = usage.sandbox_seconds or 0.0
    start = usage.model_start_seconds or 0.0
    prompt, generation = usage.prompt_seconds, usage.generation_seconds
    known = (prompt or 0.0) + (generation or 0.0)
    return {
        "prompt": None if prompt is None else round(prompt, 2),
        "generation": None if generation is None else round(generation, 2),
        "model_other": round(max(0.0, model - known), 2),
        "model_start": round(start, 2),
        "sandbox": round(sandbox, 2),
        "host": round(max(0.0, seconds - model - sandbox - start), 2),
    }


async def run_product(
    runtime: FleetRuntime, instance: TaskInstance, src: Path, *, session_id: str = "product"
) -> ArmResult:
    await attach(runtime, session_id, instance, src)
    events: list[Any] = []
    started = time.perf_counter()
    result = await runtime.run_turn(
        TurnRequest(session_id=session_id, task=instance.task), on_event=events.append
    )
    seconds = time.perf_counter() - started
    files = await artifacts(runtime, session_id, instance)
    status = result.status
    verdict = verdict_of(instance, status, result.answer or "", files)
    if status != "completed" and result.error is not None:
        verdict = Verdict(False, f"{status}: {result.error.kind}: {result.error.message[:200]}")
    usage = result.usage
    return ArmResult(
        status=status,
        verdict=verdict,
        seconds=seconds,
        model_calls=usage.model_calls,
        prompt_tokens=usage.input_tokens,
        completion_tokens=usage.output_tokens,
        route=result.route,
        transcript={"answer": (result.answer or "")[:800], "cells": cell_trail(events)},
        answer_kind=result.outcome.kind if result.outcome is not None else None,
        split=time_split(seconds, usage),
    )


def baseline_prompt(instance: TaskInstance) -> str:
    """The naive prompt: what the program runs in, each file's first lines, the task."""
    parts = [
        "Write a complete Python 3 program for the task below. It runs in a directory holding "
        "the input files under files/; write the output files under artifacts/ (create that "
        "folder) and print the answer."
    ]
    for file in instance.files:
        lines = file.content.splitlines()[:HEAD_LINES]
        head = "\n".join(line[:HEAD_LINE_CHARS] for line in lines)
        parts.append(f"{file.path} ({len(file.content.encode())} bytes), first lines:\n{head}")
    parts.append(f"Task: {instance.task}")
    parts.append("Reply with the program in one ```python block.")
    return "\n\n".join(parts)


def extract_program(reply: str) -> str:
    """The first fenced block of a reply, else the whole reply."""
    match = _FENCE.search(reply)
    return (match.group(1) if match is not None else reply).strip()


def ask_once(lm: Any, prompt: str) -> tuple[str, int | None, int | None]:
    """One chat call at the LM's configured temperature and output cap: text, token usage."""
    from dspy.lm15 import Config, Message, Request

    kwargs = getattr(lm, "kwargs", None) or {}
    config = Config(max_tokens=kwargs.get("max_tokens"), temperature=kwargs.get("temperature"))
    request = Request(
        model=str(getattr(lm, "model", "")), messages=(Message.user(prompt),), config=config
    )
    response = lm(request)
    usage = getattr(response, "usage", None)
    return (
        str(getattr(response, "text", "") or ""),
        getattr(usage, "input_tokens", None),
        getattr(usage, "output_tokens", None),
    )


async def run_program(runtime: FleetRuntime, session_id: str, code: str, timeout: float) -> Any:
    """``code`` run once in a fresh sandbox over the Session's workspace, as the engine builds a
    Turn's (engine/spaces.py): the configured backend and its ``[sandbox]`` limits. The API has
    no call that runs one program without the engine, so this reaches ``fleet_core.sandbox``."""
    from fleet_core.sandbox import SandboxLimits, SandboxSpec, create_sandbox

    settings = runtime.config.settings.sandbox
    spec = SandboxSpec(
        session_id=session_id,
        agent_id="baseline",
        workspace=runtime.workspace(session_id).root,
        limits=SandboxLimits.from_settings(settings),
    )
    sandbox = create_sandbox(spec, settings)
    try:
        await sandbox.start()
        return await sandbox.execute(code, timeout=timeout)
    finally:
        await sandbox.destroy()


async def run_baseline(
    runtime: FleetRuntime,
    instance: TaskInstance,
    src: Path,
    *,
    timeout: float,
    session_id: str = "baseline",
) -> ArmResult:
    await attach(runtime, session_id, instance, src)
    prompt = baseline_prompt(instance)
    started = time.perf_counter()
    reply, prompt_tokens, completion_tokens = "", None, None
    status, answer, error, code = "completed", "", "", ""
    try:
        with anyio.move_on_after(timeout) as scope:
            lm = await anyio.to_thread.run_sync(runtime.models().lm, "root", abandon_on_cancel=True)
            call = partial(ask_once, lm, prompt)
            reply, prompt_tokens, completion_tokens = await anyio.to_thread.run_sync(
                call, abandon_on_cancel=True
            )
    except Exception as exc:  # the model call failed (unavailable, refused, ...)
        status, error = "model_error", f"{type(exc).__name__}: {exc}"[:600]
    if status == "completed" and scope.cancelled_caught:
        status = "timeout"
    elif status == "completed":
        code = extract_program(reply)
        remaining = max(1.0, timeout - (time.perf_counter() - started))
        try:
            result = await run_program(runtime, session_id, code, remaining)
        except Exception as exc:  # the sandbox itself failed (limits, timeout, crash)
            status, error = "sandbox_error", f"{type(exc).__name__}: {exc}"[:600]
        else:
            answer = result.stdout
            if result.error is not None:
                status = "failed"
                error = f"{result.error.type}: {result.error.message}"[:600]
    seconds = time.perf_counter() - started
    files = await artifacts(runtime, session_id, instance)
    verdict = verdict_of(instance, status, answer, files)
    if error:
        verdict = Verdict(False, f"{status}: {error[:200]}")
    return ArmResult(
        status=status,
        verdict=verdict,
        seconds=seconds,
        model_calls=1,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        route=None,
        transcript={"program": code[:3000], "answer": answer[:800], "error": error},
    )


def scripted_reference(instance: TaskInstance) -> Any:
    """--dry-run: a model that answers every call with the instance's reference program."""
    from fleet_core.engine.lm import StaticLmProvider
    from fleet_core.engine.scripted_lm import scripted_lm

    return StaticLmProvider(scripted_lm([f"```python\n{instance.reference}```"] * 12))


def environment(args: argparse.Namespace, root: Path, model_dir: Path) -> dict[str, str]:
    """The configured environment (a user's endpoint settings apply), with this run's own
    state directory, no tracing, the profile, Turn deadline, ``small_vote``,
    ``small_fresh_last`` and ``small_fresh_retry`` as asked."""
    dropped = ("FLEET_TEST_SCRIPT", "FLEET_DATABASE_URL")  # no stand-in model, no shared store
    environ = {k: v for k, v in os.environ.items() if k not in dropped}
    profile = "small" if args.dry_run and args.profile == "auto" else args.profile
    environ.update(
        {
            "FLEET_STATE_DIR": str(root / "state"),
            "FLEET_MLFLOW_DESTINATION": "off",
            "FLEET_ENGINE_PROFILE": profile,  # scripted programs are code-first replies
            "FLEET_TURN_TIMEOUT_SECONDS": str(args.timeout),
            "FLEET_LOCAL_MODEL__DIRECTORY": str(model_dir),
            "FLEET_ENGINE__SMALL_VOTE": "true" if args.vote else "false",
            "FLEET_ENGINE__SMALL_FRESH_LAST": "true" if args.fresh_last else "false",
            "FLEET_ENGINE__SMALL_FRESH_RETRY": "true" if args.fresh_retry else "false",
        }
    )
    return environ


async def run_instance(
    instance: TaskInstance, half: str, run: int, args: argparse.Namespace, model_dir: Path
) -> list[Outcome]:
    arms = ["product"] + ([] if args.no_baseline else ["baseline"])
    if run % 2 == 0:  # alternate which arm meets a cold model server first
        arms.reverse()
    keep = half == "tune" or args.heldout_transcripts
    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory(dir=args.work_dir) as tmp:
        root = Path(tmp)
        config = load_config(environ=environment(args, root, model_dir), cwd=root)
        provider = scripted_reference(instance) if args.dry_run else None
        runtime = await FleetRuntime.open(config, lm_provider=provider)
        try:
            for arm in arms:
                load = round(os.getloadavg()[0], 2)
                try:
                    session_id = f"{arm}-{instance.seed}-{uuid.uuid4().hex[:6]}"  # names no family
                    if arm == "product":
                        got = await run_product(
                            runtime, instance, root / "src", session_id=session_id
                        )
                    else:
                        got = await run_baseline(
                            runtime,
                            instance,
                            root / "src",
                            timeout=args.timeout,
                            session_id=session_id,
                        )
                except Exception as exc:  # recorded as a wrong run; the suite goes on
                    why = f"error: {type(exc).__name__}: {exc}"[:400]
                    got = ArmResult("error", Verdict(False, why), 0.0, 0, None, None, None, {})
                outcomes.append(
                    Outcome(
                        family=instance.family,
                        half=half,
                        arm=arm,
                        run=run,
                        seed=instance.seed,
                        status=got.status,
                        correct=got.verdict.ok,
                        why=got.verdict.why if keep else category(got.verdict, got.status),
                        seconds=round(got.seconds, 2),
                        model_calls=got.model_calls,
                        prompt_tokens=got.prompt_tokens,
                        completion_tokens=got.completion_tokens,
                        route=got.route,
                        answer_kind=got.answer_kind,
                        split=got.split,
                        transcript=got.transcript if keep else None,
                        load=load,
                    )
                )
        finally:
            await runtime.close()
    return outcomes


def summarize(outcomes: list[Outcome]) -> dict[str, dict[str, dict[str, Any]]]:
    """Per half and arm: correct/total, seconds (median, max), model calls, prompt tokens."""
    summary: dict[str, dict[str, dict[str, Any]]] = {}
    for half, arm in sorted({(o.half, o.arm) for o in outcomes}):
        group = [o for o in outcomes if (o.half, o.arm) == (half, arm)]
        seconds = [o.seconds for o in group]
        calls = [o.model_calls for o in group]
        tokens = [o.prompt_tokens for o in group if o.prompt_tokens is not None]
        families: dict[str, list[bool]] = {}
        for o in group:
            families.setdefault(o.family, []).append(o.correct)
        summary.setdefault(half, {})[arm] = {
            "correct": sum(o.correct for o in group),
            "total": len(group),
            "median_seconds": round(statistics.median(seconds), 1),
            "max_seconds": round(max(seconds), 1),
            "median_model_calls": statistics.median(calls),
            "model_calls": sum(calls),
            "median_prompt_tokens": statistics.median(tokens) if tokens else None,
            "prompt_tokens": sum(tokens) if tokens else None,
            "families": {f: f"{sum(v)}/{len(v)}" for f, v in families.items()},
            "answer_kinds": dict(Counter(o.answer_kind for o in group if o.answer_kind)),
            "median_split": median_split(group),
        }
    return summary


def median_split(group: list[Outcome]) -> dict[str, float]:
    """Per part of a Turn's time, the median seconds over the runs that report it, and the
    host + sandbox share of all the runs' time."""
    parts: dict[str, list[float]] = {}
    for o in group:
        for part, value in o.split.items():
            if value is not None:
                parts.setdefault(part, []).append(value)
    found = {part: round(statistics.median(values), 2) for part, values in parts.items()}
    total = sum(o.seconds for o in group if o.split)
    if total > 0:
        overhead = sum((o.split.get("host") or 0) + (o.split.get("sandbox") or 0) for o in group)
        found["host_sandbox_share"] = round(overhead / total, 4)
    return found


def table(summary: dict[str, dict[str, dict[str, Any]]]) -> str:
    lines = [
        "| half | arm | correct | median s | max s | model calls (median / total) "
        "| prompt tokens (median / total) |",
        "|---|---|---|---|---|---|---|",
    ]
    for half, arms in summary.items():
        for arm, s in arms.items():
            lines.append(
                f"| {half} | {arm} | {s['correct']}/{s['total']} | {s['median_seconds']} | "
                f"{s['max_seconds']} | {s['median_model_calls']} / {s['model_calls']} | "
                f"{s['median_prompt_tokens']} / {s['prompt_tokens']} |"
            )
    rows = [(h, a, s) for h, arms in summary.items() for a, s in arms.items()]
    splits = [row for row in rows if row[2]["median_split"]]
    if splits:
        lines += [
            "",
            "| half | arm | answers | median s: prompt / generation / other model / model start "
            "/ sandbox / host | host + sandbox share |",
            "|---|---|---|---|---|",
        ]
    for half, arm, s in splits:
        m = s["median_split"]
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(s["answer_kinds"].items())) or "-"
        parts = " / ".join(str(m.get(p, "-")) for p in PARTS)
        share = m.get("host_sandbox_share")
        lines.append(
            f"| {half} | {arm} | {kinds} | {parts} | {'-' if share is None else f'{share:.1%}'} |"
        )
    return "\n".join(lines)


def commit() -> str | None:
    with contextlib.suppress(Exception):
        done = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
            cwd=Path(__file__).resolve().parent,
        )
        return done.stdout.strip()
    return None


def chosen(args: argparse.Namespace) -> list[tuple[str, str]]:
    """(family, half) pairs to run, in split.toml's order."""
    halves = recorded()[0]
    names = families_of(args.half)
    if args.families:
        wanted = [n.strip() for n in args.families.split(",") if n.strip()]
        unknown = [n for n in wanted if n not in FAMILIES]
        outside = [n for n in wanted if n in FAMILIES and n not in names]
        if unknown or outside:
            raise SystemExit(f"unknown families {unknown}; not in --half {args.half}: {outside}")
        names = [n for n in names if n in wanted]
    return [(name, halves[name]) for name in names]


def write_report(path: str, report: dict[str, Any]) -> None:
    if path:
        Path(path).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")


async def main(args: argparse.Namespace) -> dict[str, Any]:
    model_dir = Path(args.model_dir)  # made absolute by parser()
    families, seed, rule = recorded()
    report: dict[str, Any] = {
        "suite": "benchmarks/tasks",
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": commit(),
        "args": {k: v for k, v in vars(args).items() if k not in ("work_dir",)},
        "split": {"rule": rule, "seed": seed, "families": families},
        "runs": [],
        "summary": {},
    }
    outcomes: list[Outcome] = []
    for name, half in chosen(args):
        for run in range(1, args.runs + 1):
            instance = FAMILIES[name].instance(1000 * args.seed + run)
            for outcome in await run_instance(instance, half, run, args, model_dir):
                outcomes.append(outcome)
                print(
                    f"{outcome.family} #{run} [{half}/{outcome.arm}] {outcome.status} "
                    f"correct={outcome.correct} ({outcome.why[:160]}) {outcome.seconds}s "
                    f"calls={outcome.model_calls} prompt_tokens={outcome.prompt_tokens} "
                    f"load={outcome.load}",
                    flush=True,
                )
            report["runs"] = [asdict(o) for o in outcomes]
            report["summary"] = summarize(outcomes)
            write_report(
                args.out, report
            )  # after every instance: an interrupted run keeps its part
    if outcomes:
        print(table(report["summary"]))
    return report


def parser() -> argparse.ArgumentParser:
    parsed = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parsed.add_argument("--half", choices=["tune", "heldout", "both"], default="tune")
    parsed.add_argument("--runs", type=int, default=3, help="instances per family")
    parsed.add_argument("--seed", type=int, default=1, help="run r uses instance seed 1000*seed+r")
    parsed.add_argument("--families", default="", help="a comma list within --half")
    parsed.add_argument("--profile", choices=["auto", "small", "default"], default="auto")
    parsed.add_argument("--timeout", type=int, default=300, help="each arm's deadline, seconds")
    parsed.add_argument("--out", default="bench_tasks_report.json", help="the JSON report")
    parsed.add_argument("--no-baseline", action="store_true", help="the product arm only")
    parsed.add_argument("--dry-run", action="store_true", help="scripted reference programs")
    parsed.add_argument(
        "--vote", action="store_true", help="[engine] small_vote on (two programs compared)"
    )
    parsed.add_argument(
        "--fresh-last",
        action="store_true",
        help="[engine] small_fresh_last on (the last program sampled afresh, not repaired)",
    )
    parsed.add_argument(
        "--fresh-retry",
        action="store_true",
        help="[engine] small_fresh_retry on (a fresh program after every program failed)",
    )
    parsed.add_argument(
        "--heldout-transcripts",
        action="store_true",
        help="keep held-out programs, answers and verdicts (only once tuning is over)",
    )
    parsed.add_argument(
        "--model-dir",
        default=str(Path.cwd() / ".fleet" / "localmodel"),
        help="the embedded model's directory (weights assembled once, shared by the runs)",
    )
    parsed.add_argument(
        "--work-dir",
        default=str(Path(__file__).resolve().parent),
        help="where each run's temporary state directory is made",
    )
    return parsed


if __name__ == "__main__":
    arguments = parser().parse_args()
    arguments.model_dir = str(Path(arguments.model_dir).resolve())
    anyio.run(main, arguments)
