"""Group-by aggregate: the total or the average of one column per group of another."""

from __future__ import annotations

import random
import re
from collections import defaultdict
from collections.abc import Mapping
from datetime import date, timedelta
from typing import Any

from .base import TaskFamily, TaskFile, TaskInstance, Verdict, csv_text, rng_for
from .checking import check_grouped, first_problem, missing_numbers

NAME = "group_aggregate"
TOL = 0.011  # "rounded to two decimals"
HEADER = ["Ship Date", "Warehouse", "Carrier", "Weight (kg)", "Cost.GBP"]
WAREHOUSES = ("Leeds", "Bristol", "Glasgow", "Cardiff", "Belfast")
CARRIERS = ("DHL", "UPS", "FedEx", "Royal Mail")
VARIANTS = (  # (group column, value column, aggregate)
    ("Warehouse", "Cost.GBP", "sum"),
    ("Carrier", "Weight (kg)", "mean"),
    ("Warehouse", "Weight (kg)", "mean"),
    ("Carrier", "Cost.GBP", "sum"),
)


def generate(rng: random.Random) -> list[list[Any]]:
    warehouses = rng.sample(WAREHOUSES, rng.randint(3, 5))
    rows: list[list[Any]] = []
    for _ in range(rng.randint(120, 240)):
        weight = round(rng.uniform(0.5, 40.0), 1)
        cost = round(4.5 + weight * rng.uniform(0.6, 1.4), 2)
        day = date(2025, 1, 1) + timedelta(days=rng.randint(0, 180))
        rows.append([day.isoformat(), rng.choice(warehouses), rng.choice(CARRIERS), weight, cost])
    return rows


def build(seed: int, rows: list[list[Any]], group: str, value: str, agg: str) -> TaskInstance:
    g, v = HEADER.index(group), HEADER.index(value)
    buckets: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        buckets[str(row[g])].append(float(row[v]))
    truth = {
        label: round(sum(vals) if agg == "sum" else sum(vals) / len(vals), 2)
        for label, vals in sorted(buckets.items())
    }
    word = "total" if agg == "sum" else "average"
    slug = re.sub(r"[^a-z0-9]+", "_", value.lower()).strip("_")
    out = f"artifacts/{word}_{slug}_by_{group.lower()}.csv"
    task = (
        f"What is the {word} '{value}' per {group} in files/shipments.csv? Save the result to "
        f"{out} with one row per {group.lower()} (the {group.lower()} and its figure, rounded "
        f"to two decimals) and give every {group.lower()}'s figure in the answer."
    )

    def check(answer: str, files: Mapping[str, bytes]) -> Verdict:
        missing = missing_numbers(answer, truth, TOL)
        problem = first_problem(
            check_grouped(files.get(out), truth, TOL),
            f"the answer lacks the figures of {missing}" if missing else None,
        )
        return Verdict(problem is None, problem or "ok")

    reference = f"""import os
import pandas as pd
os.makedirs("artifacts", exist_ok=True)
df = pd.read_csv("files/shipments.csv")
result = df.groupby("{group}")["{value}"].{agg}().round(2).reset_index()
result.to_csv("{out}", index=False)
print(result.to_string(index=False))
"""
    return TaskInstance(
        family=NAME,
        seed=seed,
        task=task,
        files=(TaskFile("shipments.csv", csv_text(HEADER, rows)),),
        artifacts=(out,),
        truth={"aggregate": agg, "group": group, "value": value, "figures": truth},
        check=check,
        reference=reference,
    )


def make(seed: int) -> TaskInstance:
    rng = rng_for(NAME, seed)
    rows = generate(rng)
    return build(seed, rows, *rng.choice(VARIANTS))


FAMILY = TaskFamily(NAME, "group-by aggregate (total or average per group)", make)
