"""JSON Lines with nested fields: one event per line; the events of one type counted and their
mean duration taken per user plan (a nested field), with the slowest plan as tags."""

from __future__ import annotations

import json
import random
import statistics
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from .base import TaskFamily, TaskFile, TaskInstance, Verdict, rng_for
from .checking import check_grouped, check_tags, first_problem

NAME = "events_jsonl"
TOL = 0.011  # "rounded to two decimals"
PLANS = ("free", "starter", "pro", "enterprise")
KINDS = ("login", "export", "search", "upload")
OUT = "artifacts/export_by_plan.csv"


def generate(rng: random.Random) -> list[dict[str, Any]]:
    users = [(f"u{100 + i}", rng.choice(PLANS)) for i in range(rng.randint(12, 30))]
    speed = {plan: rng.uniform(0.6, 2.5) for plan in PLANS}
    events: list[dict[str, Any]] = []
    for i in range(rng.randint(120, 260)):
        user, plan = rng.choice(users)
        kind = rng.choice(KINDS)
        event: dict[str, Any] = {
            "ts": f"2025-06-{1 + i % 28:02d}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}Z",
            "type": kind,
            "user": {"id": user, "plan": plan},
        }
        if kind in ("export", "upload"):
            event["props"] = {"duration_ms": int(rng.lognormvariate(7.5, 0.5) * speed[plan])}
        elif kind == "search":
            event["props"] = {"query_len": rng.randint(1, 40)}
        events.append(event)
    return events


def build(seed: int, events: list[dict[str, Any]]) -> TaskInstance:
    durations: dict[str, list[float]] = defaultdict(list)
    for event in events:
        if event["type"] == "export":
            durations[event["user"]["plan"]].append(event["props"]["duration_ms"] / 1000)
    figures = {
        plan: (len(found), round(statistics.fmean(found), 2))
        for plan, found in sorted(durations.items())
    }
    slowest = max(figures, key=lambda plan: figures[plan][1])
    task = (
        "files/events.jsonl holds one JSON event per line, each with a type, a user object "
        "(with an id and a plan) and, for some types, a props object. For the events of type "
        "'export', compute per user plan the number of exports and their mean duration in "
        f"seconds (props.duration_ms / 1000), rounded to two decimals. Save it to {OUT} with "
        "the columns plan, exports and mean_seconds, and print the plan whose exports take "
        "longest on average as @slowest_plan[name] @mean_seconds[value]."
    )

    def check(answer: str, files: Mapping[str, bytes]) -> Verdict:
        expected = {"slowest_plan": slowest, "mean_seconds": figures[slowest][1]}
        problem = first_problem(
            check_grouped(files.get(OUT), figures, TOL), check_tags(answer, expected, TOL)
        )
        return Verdict(problem is None, problem or "ok")

    reference = f"""import json, os
import pandas as pd
os.makedirs("artifacts", exist_ok=True)
events = [json.loads(line) for line in open("files/events.jsonl") if line.strip()]
rows = [{{"plan": e["user"]["plan"], "seconds": e["props"]["duration_ms"] / 1000}}
        for e in events if e["type"] == "export"]
out = pd.DataFrame(rows).groupby("plan")["seconds"].agg(["count", "mean"]).reset_index()
out.columns = ["plan", "exports", "mean_seconds"]
out["mean_seconds"] = out["mean_seconds"].round(2)
out.to_csv("{OUT}", index=False)
top = out.loc[out["mean_seconds"].idxmax()]
print(f"@slowest_plan[{{top['plan']}}] @mean_seconds[{{top['mean_seconds']:.2f}}]")
"""
    text = "".join(json.dumps(event) + "\n" for event in events)
    return TaskInstance(
        family=NAME,
        seed=seed,
        task=task,
        files=(TaskFile("events.jsonl", text),),
        artifacts=(OUT,),
        truth={"figures": {plan: list(pair) for plan, pair in figures.items()}, "slowest": slowest},
        check=check,
        reference=reference,
    )


def make(seed: int) -> TaskInstance:
    rng = rng_for(NAME, seed)
    for _ in range(100):  # one plan clearly slowest, every plan with exports
        made = build(seed, generate(rng))
        means = sorted((pair[1] for pair in made.truth["figures"].values()), reverse=True)
        if len(means) == len(PLANS) and means[0] - means[1] > 0.1:
            return made
    raise AssertionError(f"{NAME}: no instance with one slowest plan (seed {seed})")


FAMILY = TaskFamily(NAME, "JSON Lines with nested fields, filtered and grouped", make)
