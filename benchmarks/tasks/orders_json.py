"""Nested JSON records: orders holding a customer object and a list of items, totalled per
country (quantity times unit price over every item), with the top country as tags."""

from __future__ import annotations

import json
import random
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from .base import TaskFamily, TaskFile, TaskInstance, Verdict, rng_for
from .checking import check_grouped, check_tags, first_problem

NAME = "orders_json"
TOL = 0.011
COUNTRIES = ("Brazil", "Canada", "Japan", "Kenya", "Norway", "Portugal", "Vietnam")
SKUS = {"A-100": 4.5, "B-220": 12.0, "C-310": 0.99, "D-415": 129.0, "E-560": 23.75}
NAMES = ("Aiko", "Bruno", "Chidi", "Dana", "Elif", "Femi", "Gus", "Hana", "Ivo", "Joana")
OUT = "artifacts/revenue_by_country.csv"


def generate(rng: random.Random) -> list[dict[str, Any]]:
    countries = rng.sample(COUNTRIES, rng.randint(4, 6))
    orders = []
    for i in range(rng.randint(40, 90)):
        items = [
            {"sku": sku, "qty": rng.randint(1, 6), "unit_price": price}
            for sku, price in rng.sample(sorted(SKUS.items()), rng.randint(1, 3))
        ]
        orders.append(
            {
                "order_id": f"SO-{7001 + i}",
                "customer": {"name": rng.choice(NAMES), "country": rng.choice(countries)},
                "items": items,
            }
        )
    return orders


def build(seed: int, orders: list[dict[str, Any]]) -> TaskInstance:
    totals: dict[str, float] = defaultdict(float)
    for order in orders:
        for item in order["items"]:
            totals[order["customer"]["country"]] += item["qty"] * item["unit_price"]
    truth = {country: round(total, 2) for country, total in sorted(totals.items())}
    top = max(truth, key=lambda country: truth[country])
    task = (
        "files/orders.json is a list of orders; each has a customer object (with a country) "
        "and a list of items, each with a qty and a unit_price. Compute the revenue per "
        "customer country (qty times unit_price, summed over every item of every order), save "
        f"it to {OUT} with the columns country and revenue (rounded to two decimals), and print "
        "the country with the most revenue and its revenue as @top_country[name] "
        "@top_revenue[value]."
    )

    def check(answer: str, files: Mapping[str, bytes]) -> Verdict:
        expected = {"top_country": top, "top_revenue": truth[top]}
        problem = first_problem(
            check_grouped(files.get(OUT), truth, TOL), check_tags(answer, expected, TOL)
        )
        return Verdict(problem is None, problem or "ok")

    reference = f"""import json, os
import pandas as pd
os.makedirs("artifacts", exist_ok=True)
orders = json.load(open("files/orders.json"))
rows = [
    {{"country": o["customer"]["country"], "revenue": i["qty"] * i["unit_price"]}}
    for o in orders
    for i in o["items"]
]
result = pd.DataFrame(rows).groupby("country", as_index=False)["revenue"].sum().round(2)
result.to_csv("{OUT}", index=False)
top = result.loc[result["revenue"].idxmax()]
print(f"@top_country[{{top['country']}}] @top_revenue[{{top['revenue']:.2f}}]")
"""
    return TaskInstance(
        family=NAME,
        seed=seed,
        task=task,
        files=(TaskFile("orders.json", json.dumps(orders, indent=2)),),
        artifacts=(OUT,),
        truth={"figures": truth, "top_country": top},
        check=check,
        reference=reference,
    )


def make(seed: int) -> TaskInstance:
    rng = rng_for(NAME, seed)
    for _ in range(100):  # one country clearly first
        made = build(seed, generate(rng))
        figures = sorted(made.truth["figures"].values(), reverse=True)
        if figures[0] - figures[1] > 1:
            return made
    raise AssertionError(f"{NAME}: no instance with one top country (seed {seed})")


FAMILY = TaskFamily(NAME, "nested JSON records flattened, then a group total", make)
