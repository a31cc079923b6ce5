"""Pivot/reshape: a long table of sales turned into one row per region, one column per quarter."""

from __future__ import annotations

import random
import re
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from .base import TaskFamily, TaskFile, TaskInstance, Verdict, csv_text, rng_for
from .checking import check_tags, close, first_problem, norm, number, table

NAME = "pivot_wide"
TOL = 0.011
HEADER = ["Region", "Quarter", "Product Line", "Net Revenue ($)"]
REGIONS = ("North America", "LATAM", "EMEA", "APAC", "Nordics")
LINES = ("Hardware", "Software", "Services", "Support")
QUARTERS = ("Q1", "Q2", "Q3", "Q4")
OUT = "artifacts/region_by_quarter.csv"


def generate(rng: random.Random) -> list[list[Any]]:
    regions = rng.sample(REGIONS, rng.randint(3, 5))
    rows = []
    for region in regions:
        for quarter in QUARTERS:
            for line in rng.sample(LINES, rng.randint(2, 4)):  # not every line every quarter
                for _ in range(rng.randint(1, 3)):
                    rows.append([region, quarter, line, round(rng.uniform(1_000, 60_000), 2)])
    rng.shuffle(rows)
    return rows


def build(seed: int, rows: list[list[Any]]) -> TaskInstance:
    totals: dict[str, dict[str, float]] = defaultdict(lambda: dict.fromkeys(QUARTERS, 0.0))
    for region, quarter, _, revenue in rows:
        totals[region][quarter] += revenue
    wide = {r: tuple(round(q[k], 2) for k in QUARTERS) for r, q in sorted(totals.items())}
    top = max(wide, key=lambda region: wide[region][3])
    task = (
        "Reshape files/sales_long.csv into a wide table with one row per Region and one column "
        "per Quarter (Q1, Q2, Q3, Q4), each cell the total 'Net Revenue ($)' of that region and "
        f"quarter over all product lines, rounded to two decimals. Save it to {OUT} and print "
        "the region with the highest Q4 total as @top_q4_region[name]."
    )

    def check(answer: str, files: Mapping[str, bytes]) -> Verdict:
        data = files.get(OUT)
        problem = "no artifact" if data is None else None
        if data is not None:
            problem = wide_problem(table(data), wide)
        problem = first_problem(problem, check_tags(answer, {"top_q4_region": top}, 0.0))
        return Verdict(problem is None, problem or "ok")

    reference = f"""import os
import pandas as pd
os.makedirs("artifacts", exist_ok=True)
df = pd.read_csv("files/sales_long.csv")
wide = df.pivot_table(index="Region", columns="Quarter", values="Net Revenue ($)",
                      aggfunc="sum").round(2)
wide.to_csv("{OUT}")
print(wide)
print(f"@top_q4_region[{{wide['Q4'].idxmax()}}]")
"""
    return TaskInstance(
        family=NAME,
        seed=seed,
        task=task,
        files=(TaskFile("sales_long.csv", csv_text(HEADER, rows)),),
        artifacts=(OUT,),
        truth={
            "wide": {r: dict(zip(QUARTERS, v, strict=True)) for r, v in wide.items()},
            "top_q4_region": top,
        },
        check=check,
        reference=reference,
    )


def wide_problem(rows: list[list[str]], wide: Mapping[str, tuple[float, ...]]) -> str | None:
    """None when a header row names the four quarters and each region's row holds its totals
    under them (a pandas pivot's extra header line and index column are fine)."""
    columns: dict[str, int] = {}
    for row in rows:
        found = {
            q: i
            for i, cell in enumerate(row)
            for q in QUARTERS
            if re.search(rf"\b{q}\b", cell, re.IGNORECASE)
        }
        if len(found) == 4:
            columns = found
            break
    if not columns:
        return "artifact: no header row names Q1 to Q4"
    wrong = []
    for region, figures in wide.items():
        matches = [row for row in rows if any(norm(c) == norm(region) for c in row)]
        if len(matches) != 1:
            wrong.append(f"{region}: {len(matches)} rows")
            continue
        row = matches[0]
        for quarter, want in zip(QUARTERS, figures, strict=True):
            index = columns[quarter]
            cell = row[index] if index < len(row) else ""
            if not close(number(cell), want, TOL):
                wrong.append(f"{region} {quarter}: {cell!r} (expected {want})")
    return "artifact: " + "; ".join(wrong[:4]) if wrong else None


def make(seed: int) -> TaskInstance:
    rng = rng_for(NAME, seed)
    while True:  # one region clearly on top in Q4
        made = build(seed, generate(rng))
        q4 = sorted((v["Q4"] for v in made.truth["wide"].values()), reverse=True)
        if q4[0] > 1.01 * q4[1]:
            return made


FAMILY = TaskFamily(NAME, "pivot a long table to wide", make)
