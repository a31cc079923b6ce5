"""Descriptive statistics of one numeric column: count, mean, median, sample std, min, max."""

from __future__ import annotations

import random
import re
import statistics
from collections.abc import Mapping
from typing import Any

from .base import TaskFamily, TaskFile, TaskInstance, Verdict, csv_text, rng_for
from .checking import check_json_fields, check_tags, first_problem

NAME = "describe_column"
TOL = 0.011  # "rounded to two decimals"
HEADER = ["timestamp", "Station ID", "Temp (°C)", "Rel. Humidity (%)", "PM2.5"]
STATIONS = ("ST-01", "ST-02", "ST-07", "ST-11")
COLUMNS = ("Temp (°C)", "Rel. Humidity (%)", "PM2.5")
STATS = ("count", "mean", "median", "std", "min", "max")


def generate(rng: random.Random) -> list[list[Any]]:
    rows: list[list[Any]] = []
    base_temp = rng.uniform(4, 24)
    for i in range(rng.randint(60, 150)):
        stamp = f"2025-{rng.randint(3, 9):02d}-{rng.randint(1, 28):02d}T{i % 24:02d}:00:00Z"
        temp = round(rng.gauss(base_temp, 4.5), 1)
        humidity = round(min(100.0, max(5.0, rng.gauss(62, 14))), 1)
        pm = round(rng.lognormvariate(2.4, 0.5), 1)
        rows.append([stamp, rng.choice(STATIONS), temp, humidity, pm])
    return rows


def build(seed: int, rows: list[list[Any]], column: str) -> TaskInstance:
    values = [float(row[HEADER.index(column)]) for row in rows]
    truth: dict[str, float] = {
        "count": len(values),
        "mean": round(statistics.fmean(values), 2),
        "median": round(statistics.median(values), 2),
        "std": round(statistics.stdev(values), 2),  # the sample standard deviation (n - 1)
        "min": min(values),
        "max": max(values),
    }
    slug = re.sub(r"[^a-z0-9]+", "_", column.lower()).strip("_")
    out = f"artifacts/{slug}_stats.json"
    form = " ".join(f"@{name}[value]" for name in STATS)
    task = (
        f"Give me descriptive statistics of the '{column}' column in files/sensor_log.csv: "
        "count, mean, median, standard deviation (the sample one), minimum and maximum. Save "
        f"them to {out} as one JSON object with the keys {', '.join(STATS)}, and print them "
        f"as {form}, rounded to two decimals."
    )

    def check(answer: str, files: Mapping[str, bytes]) -> Verdict:
        problem = first_problem(
            check_json_fields(files.get(out), truth, TOL), check_tags(answer, truth, TOL)
        )
        return Verdict(problem is None, problem or "ok")

    reference = f"""import json, os
import pandas as pd
os.makedirs("artifacts", exist_ok=True)
col = pd.read_csv("files/sensor_log.csv")["{column}"]
stats = {{"count": int(col.count()), "mean": round(col.mean(), 2),
         "median": round(col.median(), 2), "std": round(col.std(), 2),
         "min": round(col.min(), 2), "max": round(col.max(), 2)}}
with open("{out}", "w") as f:
    json.dump(stats, f)
print(" ".join(f"@{{k}}[{{v}}]" for k, v in stats.items()))
"""
    return TaskInstance(
        family=NAME,
        seed=seed,
        task=task,
        files=(TaskFile("sensor_log.csv", csv_text(HEADER, rows)),),
        artifacts=(out,),
        truth={"column": column, **truth},
        check=check,
        reference=reference,
    )


def make(seed: int) -> TaskInstance:
    rng = rng_for(NAME, seed)
    rows = generate(rng)
    return build(seed, rows, rng.choice(COLUMNS))


FAMILY = TaskFamily(NAME, "descriptive statistics of a column", make)
