"""A small linear regression: least-squares slope, intercept, R² and one prediction."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from .base import TaskFamily, TaskFile, TaskInstance, Verdict, csv_text, rng_for
from .checking import check_json_fields, check_tags, first_problem

NAME = "linear_fit"
TOL = {"slope": 0.0015, "intercept": 0.0015, "r_squared": 0.0015, "predicted_units": 0.06}
REL = 1e-4  # and a relative part, for intercepts in the thousands
HEADER = ["Week", "TV Spend ($k)", "Radio Spend ($k)", "Units Sold"]
PREDICTORS = ("TV Spend ($k)", "Radio Spend ($k)")
OUT = "artifacts/fit.json"


def generate(rng: random.Random) -> list[list[Any]]:
    base, tv, radio = rng.uniform(200, 1500), rng.uniform(2, 12), rng.uniform(1, 20)
    rows = []
    for week in range(1, rng.randint(20, 52) + 1):
        tv_spend = round(rng.uniform(5, 120), 1)
        radio_spend = round(rng.uniform(0, 40), 1)
        units = round(base + tv * tv_spend + radio * radio_spend + rng.gauss(0, 120))
        rows.append([f"2025-W{week:02d}", tv_spend, radio_spend, units])
    return rows


def least_squares(xs: list[float], ys: list[float]) -> tuple[float, float, float]:
    """Slope, intercept and R² of the ordinary least-squares line, from the sums."""
    n = len(xs)
    mean_x, mean_y = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mean_x) ** 2 for x in xs)
    sxy = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True))
    slope = sxy / sxx
    intercept = mean_y - slope * mean_x
    residual = sum((y - intercept - slope * x) ** 2 for x, y in zip(xs, ys, strict=True))
    total = sum((y - mean_y) ** 2 for y in ys)
    return slope, intercept, 1 - residual / total


def build(seed: int, rows: list[list[Any]], predictor: str, at: float) -> TaskInstance:
    xs = [float(r[HEADER.index(predictor)]) for r in rows]
    ys = [float(r[3]) for r in rows]
    slope, intercept, r2 = least_squares(xs, ys)
    fit = {"slope": round(slope, 3), "intercept": round(intercept, 3), "r_squared": round(r2, 3)}
    prediction = round(intercept + slope * at, 1)
    task = (
        "Fit a least-squares straight line that predicts 'Units Sold' from "
        f"'{predictor}' in files/ad_spend.csv. Save it to {OUT} as "
        '{"slope": ..., "intercept": ..., "r_squared": ...} and print @slope[value] '
        "@intercept[value] @r_squared[value], rounded to three decimals, and the predicted "
        f"units for a spend of {at} ($k) as @predicted_units[value], rounded to one decimal."
    )
    answer = {**fit, "predicted_units": prediction}

    def check(answer_text: str, files: Mapping[str, bytes]) -> Verdict:
        problem = first_problem(
            check_json_fields(files.get(OUT), fit, TOL, rel=REL),
            check_tags(answer_text, answer, TOL, rel=REL),
        )
        return Verdict(problem is None, problem or "ok")

    reference = f"""import json, os
import numpy as np
import pandas as pd
os.makedirs("artifacts", exist_ok=True)
df = pd.read_csv("files/ad_spend.csv")
x, y = df["{predictor}"], df["Units Sold"]
slope, intercept = np.polyfit(x, y, 1)
r2 = 1 - ((y - (intercept + slope * x)) ** 2).sum() / ((y - y.mean()) ** 2).sum()
fit = {{"slope": round(slope, 3), "intercept": round(intercept, 3), "r_squared": round(r2, 3)}}
with open("{OUT}", "w") as f:
    json.dump(fit, f)
print(" ".join(f"@{{k}}[{{v}}]" for k, v in fit.items()),
      f"@predicted_units[{{intercept + slope * {at}:.1f}}]")
"""
    return TaskInstance(
        family=NAME,
        seed=seed,
        task=task,
        files=(TaskFile("ad_spend.csv", csv_text(HEADER, rows)),),
        artifacts=(OUT,),
        truth={"predictor": predictor, "at": at, **answer},
        check=check,
        reference=reference,
    )


def make(seed: int) -> TaskInstance:
    rng = rng_for(NAME, seed)
    predictor = rng.choice(PREDICTORS)
    return build(seed, generate(rng), predictor, float(rng.choice((25, 40, 60, 75))))


FAMILY = TaskFamily(NAME, "a small linear regression", make)
