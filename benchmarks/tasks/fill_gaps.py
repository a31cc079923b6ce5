"""Cleaning and imputing: a price column with placeholders for missing values and thousands
separators, parsed, its gaps filled with the median of the row's category."""

from __future__ import annotations

import random
import statistics
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from .base import TaskFamily, TaskFile, TaskInstance, Verdict, csv_text, rng_for
from .checking import check_tags, close, first_problem, number, table

NAME = "fill_gaps"
TOL = 0.011  # "rounded to two decimals"
HEADER = ["SKU", "Category", "Unit Price", "Stock qty"]
CATEGORIES = {"Tools": 45.0, "Garden": 120.0, "Lighting": 30.0, "Furniture": 900.0}
MISSING = ("n/a", "-", "")
OUT = "artifacts/products_clean.csv"


def price_text(value: float) -> str:
    """A price as the shop's export writes it: thousands separated by commas."""
    return f"{value:,.2f}"


def generate(rng: random.Random) -> list[list[Any]]:
    rows: list[list[Any]] = []
    for i in range(rng.randint(50, 120)):
        category = rng.choice(sorted(CATEGORIES))
        price = round(CATEGORIES[category] * rng.lognormvariate(0, 0.5), 2)
        shown = rng.choice(MISSING) if rng.random() < 0.15 else price_text(price)
        rows.append([f"SKU-{5001 + i}", category, shown, rng.randint(0, 250)])
    return rows


def build(seed: int, rows: list[list[Any]]) -> TaskInstance:
    known: dict[str, list[float]] = defaultdict(list)
    for _, category, shown, _ in rows:
        if shown not in MISSING:
            known[category].append(float(str(shown).replace(",", "")))
    medians = {category: statistics.median(prices) for category, prices in known.items()}
    prices = {
        str(sku): (medians[category] if shown in MISSING else float(str(shown).replace(",", "")))
        for sku, category, shown, _ in rows
    }
    filled = sum(1 for row in rows if row[2] in MISSING)
    truth = {"filled": filled, "mean_price": round(statistics.fmean(prices.values()), 2)}
    task = (
        "The 'Unit Price' column of files/products.csv is messy: missing prices are written "
        "n/a, - or left empty, and prices of a thousand or more have a comma (1,250.00). Clean "
        "it: read the prices as numbers, and fill each missing price with the median price of "
        f"the same Category (over its known prices). Save every row with the cleaned price to "
        f"{OUT}, and print how many prices you filled and the mean unit price after filling, "
        "rounded to two decimals, as @filled[N] @mean_price[value]."
    )

    def check(answer: str, files: Mapping[str, bytes]) -> Verdict:
        data = files.get(OUT)
        problem = "no artifact" if data is None else _artifact_problem(table(data), prices)
        problem = first_problem(problem, check_tags(answer, truth, TOL))
        return Verdict(problem is None, problem or "ok")

    reference = f"""import os
import pandas as pd
os.makedirs("artifacts", exist_ok=True)
df = pd.read_csv("files/products.csv", dtype={{"Unit Price": str}}, keep_default_na=False)
price = pd.to_numeric(df["Unit Price"].str.replace(",", ""), errors="coerce")
missing = price.isna()
df["Unit Price"] = price.fillna(price.groupby(df["Category"]).transform("median"))
df.to_csv("{OUT}", index=False)
print(f"@filled[{{int(missing.sum())}}] @mean_price[{{df['Unit Price'].mean():.2f}}]")
"""
    return TaskInstance(
        family=NAME,
        seed=seed,
        task=task,
        files=(TaskFile("products.csv", csv_text(HEADER, rows)),),
        artifacts=(OUT,),
        truth={**truth, "medians": {c: round(m, 2) for c, m in sorted(medians.items())}},
        check=check,
        reference=reference,
    )


def _artifact_problem(rows: list[list[str]], prices: Mapping[str, float]) -> str | None:
    """None when every SKU has one row holding its cleaned price (within the tolerance)."""
    seen: dict[str, list[list[float]]] = {}
    for row in rows:
        sku = next((cell for cell in row if cell in prices), None)
        if sku is not None:
            figures = [number(cell) for cell in row if cell != sku]
            seen.setdefault(sku, []).append([f for f in figures if f is not None])
    if sorted(seen) != sorted(prices) or any(len(found) != 1 for found in seen.values()):
        rows_seen = sum(len(found) for found in seen.values())
        return f"artifact: {rows_seen} product rows, expected one for each of {len(prices)}"
    wrong = [
        sku for sku, want in prices.items() if not any(close(f, want, TOL) for f in seen[sku][0])
    ]
    return f"artifact: {len(wrong)} prices differ (e.g. {wrong[:3]})" if wrong else None


def make(seed: int) -> TaskInstance:
    rng = rng_for(NAME, seed)
    for _ in range(100):  # gaps in more than one category, every category with known prices
        rows = generate(rng)
        gaps = {row[1] for row in rows if row[2] in MISSING}
        knowns = {row[1] for row in rows if row[2] not in MISSING}
        if len(gaps) >= 2 and knowns == set(CATEGORIES):
            return build(seed, rows)
    raise AssertionError(f"{NAME}: no instance with gaps (seed {seed})")


FAMILY = TaskFamily(NAME, "cleaning a messy numeric column and imputing by group", make)
