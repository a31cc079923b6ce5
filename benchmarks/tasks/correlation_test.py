"""Correlation and a significance test: Pearson's r between two columns and its p-value."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from .base import TaskFamily, TaskFile, TaskInstance, Verdict, csv_text, rng_for
from .checking import check_json_fields, check_tags, first_problem

NAME = "correlation_test"
TOL = {"r": 0.0015, "p_value": 0.00015, "significant": 0.0}  # three and four decimals
HEADER = ["Student", "Study Hours/Week", "Sleep.hrs", "Exam Score (%)"]
PAIRS = (("Study Hours/Week", "Exam Score (%)"), ("Sleep.hrs", "Exam Score (%)"))
OUT = "artifacts/correlation.json"


def generate(rng: random.Random) -> list[list[Any]]:
    """30-60 students; the score depends on both columns with noise, drawn again until the
    test's p-value is neither tiny nor near the 0.05 threshold (so one decision is right)."""
    while True:
        n = rng.randint(30, 60)
        study_weight, sleep_weight = rng.uniform(0.2, 1.2), rng.uniform(0.5, 3.0)
        rows = []
        for i in range(n):
            study = round(rng.uniform(1, 25), 1)
            sleep = round(rng.uniform(4.5, 9.5), 1)
            score = 40 + study_weight * study + sleep_weight * sleep + rng.gauss(0, 11)
            rows.append([f"S{1000 + i}", study, sleep, round(min(100.0, max(0.0, score)), 1)])
        p_values = [pearson(rows, x, y)[1] for x, y in PAIRS]
        if all(0.002 < p < 0.4 and abs(p - 0.05) > 0.01 for p in p_values):
            return rows


def pearson(rows: list[list[Any]], x: str, y: str) -> tuple[float, float]:
    from scipy import stats  # only when an instance is made: importing the suite stays light

    xs = [float(row[HEADER.index(x)]) for row in rows]
    ys = [float(row[HEADER.index(y)]) for row in rows]
    result = stats.pearsonr(xs, ys)
    return float(result.statistic), float(result.pvalue)


def build(seed: int, rows: list[list[Any]], x: str, y: str) -> TaskInstance:
    r, p = pearson(rows, x, y)
    truth: dict[str, Any] = {"r": round(r, 3), "p_value": round(p, 4), "significant": p < 0.05}
    task = (
        f"Is '{y}' correlated with '{x}' in files/study_scores.csv? Compute the Pearson "
        "correlation coefficient and the two-sided p-value of the test that the correlation is "
        f'zero. Save them to {OUT} as {{"r": ..., "p_value": ..., "significant": ...}} where '
        "significant is true when p < 0.05, and print @r[value] @p_value[value] "
        "@significant[yes or no], with r rounded to three decimals and the p-value to four."
    )

    def check(answer: str, files: Mapping[str, bytes]) -> Verdict:
        problem = first_problem(
            check_json_fields(files.get(OUT), truth, TOL), check_tags(answer, truth, TOL)
        )
        return Verdict(problem is None, problem or "ok")

    reference = f"""import json, os
import pandas as pd
from scipy import stats
os.makedirs("artifacts", exist_ok=True)
df = pd.read_csv("files/study_scores.csv")
r, p = stats.pearsonr(df["{x}"], df["{y}"])
result = {{"r": round(float(r), 3), "p_value": round(float(p), 4), "significant": bool(p < 0.05)}}
with open("{OUT}", "w") as f:
    json.dump(result, f)
yes = "yes" if result["significant"] else "no"
print(f"@r[{{result['r']}}] @p_value[{{result['p_value']}}] @significant[{{yes}}]")
"""
    return TaskInstance(
        family=NAME,
        seed=seed,
        task=task,
        files=(TaskFile("study_scores.csv", csv_text(HEADER, rows)),),
        artifacts=(OUT,),
        truth={"x": x, "y": y, **truth},
        check=check,
        reference=reference,
    )


def make(seed: int) -> TaskInstance:
    rng = rng_for(NAME, seed)
    rows = generate(rng)
    return build(seed, rows, *rng.choice(PAIRS))


FAMILY = TaskFamily(NAME, "correlation and its significance test", make)
