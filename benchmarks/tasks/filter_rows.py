"""Filtering with conditions: the rows meeting three conditions, their count and total."""

from __future__ import annotations

import random
from collections.abc import Mapping
from datetime import date, timedelta
from typing import Any

from .base import TaskFamily, TaskFile, TaskInstance, Verdict, csv_text, rng_for
from .checking import check_ids, first_problem, missing_numbers

NAME = "filter_rows"
TOL = 0.011
HEADER = ["Order ID", "Customer", "Country", "Amount (EUR)", "Status", "order.date"]
COUNTRIES = ("Germany", "France", "Spain", "Italy", "Netherlands")
STATUSES = ("shipped", "shipped", "pending", "cancelled", "returned")
CUSTOMERS = ("Acme GmbH", "Bleu SARL", "Costa SL", "Delta SpA", "Eik BV", "Fjord AS", "Gala SA")
OUT = "artifacts/selected_orders.csv"


def generate(rng: random.Random) -> list[list[Any]]:
    rows = []
    for i in range(rng.randint(80, 200)):
        amount = round(rng.lognormvariate(5.3, 0.7), 2)
        day = date(2024, 1, 1) + timedelta(days=rng.randint(0, 365))
        rows.append(
            [
                f"ORD-{10001 + i}",
                rng.choice(CUSTOMERS),
                rng.choice(COUNTRIES),
                amount,
                rng.choice(STATUSES),
                day.isoformat(),
            ]
        )
    return rows


def build(seed: int, rows: list[list[Any]], country: str, threshold: int) -> TaskInstance:
    kept = [r for r in rows if r[2] == country and r[3] > threshold and r[4] != "cancelled"]
    ids = [str(r[0]) for r in kept]
    total = round(sum(float(r[3]) for r in kept), 2)
    task = (
        f"From files/orders_2024.csv, select the orders of customers in {country} with an "
        f"'Amount (EUR)' above {threshold} whose Status is not cancelled. Save those rows, with "
        f"all their columns, to {OUT}, and tell me how many orders there are and their total "
        "amount, rounded to two decimals."
    )

    all_ids = {str(r[0]) for r in rows}

    def check(answer: str, files: Mapping[str, bytes]) -> Verdict:
        problem = check_ids(files.get(OUT), ids, all_ids, "orders")
        missing = missing_numbers(answer, {"count": len(ids), "total": total}, TOL)
        problem = first_problem(
            problem, f"the answer lacks the {' and the '.join(missing)}" if missing else None
        )
        return Verdict(problem is None, problem or "ok")

    reference = f"""import os
import pandas as pd
os.makedirs("artifacts", exist_ok=True)
df = pd.read_csv("files/orders_2024.csv")
mask = (df["Country"] == "{country}") & (df["Amount (EUR)"] > {threshold})
kept = df[mask & (df["Status"] != "cancelled")]
kept.to_csv("{OUT}", index=False)
print(f"{{len(kept)}} orders, total {{kept['Amount (EUR)'].sum():.2f}} EUR")
"""
    return TaskInstance(
        family=NAME,
        seed=seed,
        task=task,
        files=(TaskFile("orders_2024.csv", csv_text(HEADER, rows)),),
        artifacts=(OUT,),
        truth={
            "country": country,
            "threshold": threshold,
            "order_ids": ids,
            "count": len(ids),
            "total": total,
        },
        check=check,
        reference=reference,
    )


def make(seed: int) -> TaskInstance:
    rng = rng_for(NAME, seed)
    rows = generate(rng)
    for _ in range(100):  # at least three orders selected
        country, threshold = rng.choice(COUNTRIES), rng.choice((150, 200, 250, 300, 400))
        made = build(seed, rows, country, threshold)
        if made.truth["count"] >= 3:
            return made
    raise AssertionError(f"{NAME}: no condition selects three orders (seed {seed})")


FAMILY = TaskFamily(NAME, "filtering rows by several conditions", make)
