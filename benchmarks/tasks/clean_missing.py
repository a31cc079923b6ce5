"""Missing values and cleaning: missing markers, dropped rows and a median fill."""

from __future__ import annotations

import random
import statistics
from collections.abc import Mapping
from typing import Any

from .base import TaskFamily, TaskFile, TaskInstance, Verdict, csv_text, rng_for
from .checking import check_tags, close, first_problem, norm, number, table

NAME = "clean_missing"
TOL = 0.011
HEADER = ["Resp. ID", "Age", "Annual Income (USD)", "City", "Satisfaction (1-5)"]
MISSING = ("", "NA", "n/a", "-")
CITIES = ("Austin", "Boston", "Chicago", "Denver", "Seattle")
OUT = "artifacts/survey_clean.csv"


def generate(rng: random.Random) -> list[list[Any]]:
    rows = []
    for i in range(rng.randint(60, 160)):
        age: Any = rng.randint(18, 80)
        income: Any = round(rng.lognormvariate(10.9, 0.45) / 100) * 100
        if rng.random() < 0.12:
            age = rng.choice(MISSING)
        if rng.random() < 0.18:
            income = rng.choice(MISSING)
        rows.append([f"R{2000 + i}", age, income, rng.choice(CITIES), rng.randint(1, 5)])
    return rows


def income_column(rows: list[list[str]]) -> tuple[int, list[list[str]]] | None:
    """The income column's index in a table and the rows below its header."""
    for at, row in enumerate(rows):
        for index, cell in enumerate(row):
            if "income" in norm(cell):
                return index, rows[at + 1 :]
    return None


def build(seed: int, rows: list[list[Any]]) -> TaskInstance:
    kept = [r for r in rows if r[1] not in MISSING]
    known = [float(r[2]) for r in kept if r[2] not in MISSING]
    median = statistics.median(known)
    filled = [median if r[2] in MISSING else float(r[2]) for r in kept]
    truth = {
        "dropped": len(rows) - len(kept),
        "median_income": round(median, 2),
        "mean_income": round(statistics.fmean(filled), 2),
    }
    task = (
        "Clean files/customer_survey.csv. The cells '', 'NA', 'n/a' and '-' mean a missing "
        "value. Drop the rows whose Age is missing, then fill the missing 'Annual Income (USD)' "
        "values with the median of the known incomes of the remaining rows. Save the cleaned "
        f"table to {OUT} and print @dropped[number of rows dropped] @median_income[the median "
        "used] @mean_income[the mean income after filling], the incomes rounded to two decimals."
    )

    def check(answer: str, files: Mapping[str, bytes]) -> Verdict:
        data = files.get(OUT)
        found = income_column(table(data)) if data is not None else None
        if data is None:
            problem: str | None = "no artifact"
        elif found is None:
            problem = "artifact has no income column"
        else:
            column, body = found
            values = [number(row[column]) if column < len(row) else None for row in body]
            incomes = [v for v in values if v is not None]
            if len(body) != len(kept) or len(incomes) != len(body):
                problem = f"artifact: {len(body)} rows, expected {len(kept)} with every income"
            elif not close(statistics.fmean(incomes), truth["mean_income"], TOL):
                problem = f"artifact: mean income {statistics.fmean(incomes):.2f}"
            else:
                problem = None
        problem = first_problem(problem, check_tags(answer, truth, TOL))
        return Verdict(problem is None, problem or "ok")

    reference = f"""import os
import pandas as pd
os.makedirs("artifacts", exist_ok=True)
df = pd.read_csv("files/customer_survey.csv", na_values=["", "NA", "n/a", "-"],
                 keep_default_na=False)
clean = df.dropna(subset=["Age"]).copy()
median = clean["Annual Income (USD)"].median()
clean["Annual Income (USD)"] = clean["Annual Income (USD)"].fillna(median)
clean.to_csv("{OUT}", index=False)
mean = clean["Annual Income (USD)"].mean()
print(f"@dropped[{{len(df) - len(clean)}}] @median_income[{{median:.2f}}]",
      f"@mean_income[{{mean:.2f}}]")
"""
    return TaskInstance(
        family=NAME,
        seed=seed,
        task=task,
        files=(TaskFile("customer_survey.csv", csv_text(HEADER, rows)),),
        artifacts=(OUT,),
        truth={**truth, "kept_rows": len(kept)},
        check=check,
        reference=reference,
    )


def make(seed: int) -> TaskInstance:
    rng = rng_for(NAME, seed)
    while True:  # every marker occurs, so a reader that knows only some of them is wrong
        rows = generate(rng)
        if all(any(r[1] == m or r[2] == m for r in rows) for m in MISSING):
            return build(seed, rows)


FAMILY = TaskFamily(NAME, "missing values and cleaning", make)
