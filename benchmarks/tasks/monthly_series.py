"""Dates and time series: a daily series rolled up per calendar month, and its top month."""

from __future__ import annotations

import math
import random
import re
from collections import defaultdict
from collections.abc import Mapping
from datetime import date, timedelta
from typing import Any

from .base import TaskFamily, TaskFile, TaskInstance, Verdict, csv_text, rng_for
from .checking import close, first_problem, number, table, tags

NAME = "monthly_series"
TOL = 0.011
HEADER = ["Date", "Page Views", "Unique Visitors", "Bounce Rate (%)"]
COLUMNS = ("Page Views", "Unique Visitors")
MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_ISO_MONTH = re.compile(r"(\d{4})[-/](\d{1,2})(?!\d)")


def month_of(text: object) -> str | None:
    """``YYYY-MM`` of a cell or tag: ``2025-03``, ``2025-03-31 00:00:00``, ``2025/3`` or
    ``March 2025`` / ``Mar 2025``; else None."""
    value = str(text).strip().lower()
    match = _ISO_MONTH.search(value)
    if match is not None and 1 <= int(match.group(2)) <= 12:
        return f"{match.group(1)}-{int(match.group(2)):02d}"
    named = re.fullmatch(r"([a-z]+)\.?,?\s+(\d{4})", value)
    if named is not None:
        for index, month in enumerate(MONTHS, 1):
            if len(named.group(1)) >= 3 and named.group(1).startswith(month):
                return f"{named.group(2)}-{index:02d}"
    return None


def generate(rng: random.Random) -> list[list[Any]]:
    start = date(rng.choice((2023, 2024, 2025)), rng.randint(1, 6), 1)
    level, trend = rng.uniform(800, 5000), rng.uniform(-3, 8)
    rows = []
    for day in range(rng.randint(120, 200)):
        if rng.random() < 0.04:  # a few days missing from the export
            continue
        when = start + timedelta(days=day)
        weekly = 1.0 + 0.25 * math.sin(2 * math.pi * when.weekday() / 7)
        views = max(0, round((level + trend * day) * weekly * rng.uniform(0.8, 1.2)))
        visitors = round(views * rng.uniform(0.35, 0.6))
        rows.append([when.isoformat(), views, visitors, round(rng.uniform(25, 70), 1)])
    return rows


def build(seed: int, rows: list[list[Any]], column: str, agg: str) -> TaskInstance:
    buckets: dict[str, list[int]] = defaultdict(list)
    for row in rows:
        buckets[str(row[0])[:7]].append(int(row[HEADER.index(column)]))
    figures = {
        month: round(sum(v) if agg == "sum" else sum(v) / len(v), 2)
        for month, v in sorted(buckets.items())
    }
    top = max(figures, key=figures.__getitem__)
    slug = column.lower().replace(" ", "_")
    out = f"artifacts/monthly_{slug}.csv"
    what = (
        f"total '{column}'"
        if agg == "sum"
        else f"average daily '{column}' (the mean over the days the file lists)"
    )
    task = (
        f"Using files/web_traffic.csv, compute the {what} for each calendar month. Save a table "
        f"with the columns month (as YYYY-MM) and {slug} to {out}, with the figures rounded to "
        "two decimals, and print the month with the highest figure as @top_month[YYYY-MM]."
    )

    def check(answer: str, files: Mapping[str, bytes]) -> Verdict:
        data = files.get(out)
        problem = "no artifact" if data is None else None
        if data is not None:
            got: dict[str, list[list[float]]] = defaultdict(list)
            for row in table(data):
                cells = [(i, month_of(c)) for i, c in enumerate(row)]
                label = next(((i, m) for i, m in cells if m is not None), None)
                if label is not None:
                    rest = [number(c) for i, c in enumerate(row) if i != label[0]]
                    got[label[1]].append([n for n in rest if n is not None])
            wrong = [
                m
                for m, want in figures.items()
                if len(got.get(m, [])) != 1 or not any(close(n, want, TOL) for n in got[m][0])
            ] + sorted(set(got) - set(figures))
            problem = f"artifact wrong for months {wrong}" if wrong else None
        said = tags(answer).get("topmonth")
        if month_of(said or "") != top:
            told = "missing" if said is None else f"{said!r}"
            problem = first_problem(problem, f"@top_month[...] {told}, expected {top}")
        return Verdict(problem is None, problem or "ok")

    function = "sum" if agg == "sum" else "mean"
    reference = f"""import os
import pandas as pd
os.makedirs("artifacts", exist_ok=True)
df = pd.read_csv("files/web_traffic.csv", parse_dates=["Date"])
df["month"] = df["Date"].dt.strftime("%Y-%m")
result = df.groupby("month")["{column}"].{function}().round(2).reset_index()
result.columns = ["month", "{slug}"]
result.to_csv("{out}", index=False)
top = result.loc[result["{slug}"].idxmax(), "month"]
print(result.to_string(index=False))
print(f"@top_month[{{top}}]")
"""
    return TaskInstance(
        family=NAME,
        seed=seed,
        task=task,
        files=(TaskFile("web_traffic.csv", csv_text(HEADER, rows)),),
        artifacts=(out,),
        truth={"column": column, "aggregate": agg, "figures": figures, "top_month": top},
        check=check,
        reference=reference,
    )


def make(seed: int) -> TaskInstance:
    rng = rng_for(NAME, seed)
    column, agg = rng.choice(COLUMNS), rng.choice(("sum", "mean"))
    while True:  # one month clearly on top (by more than 1 %)
        made = build(seed, generate(rng), column, agg)
        ranked = sorted(made.truth["figures"].values(), reverse=True)
        if ranked[0] > 1.01 * ranked[1]:
            return made


FAMILY = TaskFamily(NAME, "dates and a monthly time series", make)
