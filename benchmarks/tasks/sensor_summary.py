"""Quartiles and outliers: a column's first and third quartiles, its IQR fences and the rows
outside them (missing values left out)."""

from __future__ import annotations

import random
import statistics
from collections.abc import Mapping
from typing import Any

from .base import TaskFamily, TaskFile, TaskInstance, Verdict, csv_text, rng_for
from .checking import check_ids, check_tags, first_problem

NAME = "sensor_summary"
TOL = 0.011  # "rounded to two decimals"
HEADER = ["Parcel #", "Depot", "Distance km", "Transit Time (h)", "Weight kg"]
DEPOTS = ("Leeds", "Bristol", "Cardiff", "Derby", "Exeter")
COLUMN = "Transit Time (h)"
OUT = "artifacts/transit_outliers.csv"


def generate(rng: random.Random) -> list[list[Any]]:
    rows: list[list[Any]] = []
    typical = rng.uniform(18, 40)
    for i in range(rng.randint(80, 180)):
        distance = round(rng.uniform(5, 600), 1)
        hours: float | str = round(max(1.0, rng.gauss(typical, typical / 5)), 1)
        if rng.random() < 0.04:  # a parcel held at a depot, or scanned twice the same hour
            hours = round(typical * rng.uniform(2.2, 4.0), 1) if rng.random() < 0.7 else 0.2
        if rng.random() < 0.07:
            hours = rng.choice(["", "NA"])  # not delivered yet, or not scanned
        weight = round(rng.lognormvariate(1.0, 0.6), 2)
        rows.append([f"P{40001 + i}", rng.choice(DEPOTS), distance, hours, weight])
    return rows


def quartiles(values: list[float]) -> tuple[float, float]:
    """Q1 and Q3 by linear interpolation between the order statistics (numpy and pandas'
    default, ``statistics.quantiles``'s "inclusive" method)."""
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q3


def build(seed: int, rows: list[list[Any]]) -> TaskInstance:
    index = HEADER.index(COLUMN)
    known = [(str(row[0]), float(row[index])) for row in rows if row[index] not in ("", "NA")]
    q1, q3 = quartiles([hours for _, hours in known])
    low, high = q1 - 1.5 * (q3 - q1), q3 + 1.5 * (q3 - q1)
    outliers = sorted(parcel for parcel, hours in known if hours < low or hours > high)
    truth = {"q1": round(q1, 2), "q3": round(q3, 2), "outliers": len(outliers)}
    task = (
        f"In files/deliveries.csv, look at the '{COLUMN}' column (leave out the parcels without "
        "a transit time). Compute its first and third quartiles (linear interpolation, as "
        "pandas' quantile does) and the IQR, and call a parcel an outlier when its transit "
        "time is below Q1 - 1.5*IQR or above Q3 + 1.5*IQR. Save the outlier rows with all their "
        f"columns to {OUT}, and print @q1[value] @q3[value] @outliers[count], the quartiles "
        "rounded to two decimals."
    )
    every = {str(row[0]) for row in rows}

    def check(answer: str, files: Mapping[str, bytes]) -> Verdict:
        problem = check_ids(files.get(OUT), outliers, every, "parcels")
        problem = first_problem(problem, check_tags(answer, truth, TOL))
        return Verdict(problem is None, problem or "ok")

    reference = f"""import os
import pandas as pd
os.makedirs("artifacts", exist_ok=True)
df = pd.read_csv("files/deliveries.csv")
known = df.dropna(subset=["{COLUMN}"])
q1, q3 = known["{COLUMN}"].quantile(0.25), known["{COLUMN}"].quantile(0.75)
iqr = q3 - q1
out = known[(known["{COLUMN}"] < q1 - 1.5 * iqr) | (known["{COLUMN}"] > q3 + 1.5 * iqr)]
out.to_csv("{OUT}", index=False)
print(f"@q1[{{q1:.2f}}] @q3[{{q3:.2f}}] @outliers[{{len(out)}}]")
"""
    return TaskInstance(
        family=NAME,
        seed=seed,
        task=task,
        files=(TaskFile("deliveries.csv", csv_text(HEADER, rows)),),
        artifacts=(OUT,),
        truth={**truth, "outlier_parcels": outliers},
        check=check,
        reference=reference,
    )


def make(seed: int) -> TaskInstance:
    rng = rng_for(NAME, seed)
    for _ in range(100):  # at least two outliers, so "no outliers" is never right
        made = build(seed, generate(rng))
        if made.truth["outliers"] >= 2:
            return made
    raise AssertionError(f"{NAME}: no instance with outliers (seed {seed})")


FAMILY = TaskFamily(NAME, "quartiles and IQR outliers of a column with gaps", make)
