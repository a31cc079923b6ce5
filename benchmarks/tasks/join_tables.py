"""A join of two files: invoices matched to their customers, totalled per customer segment."""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Mapping
from datetime import date, timedelta
from typing import Any

from .base import TaskFamily, TaskFile, TaskInstance, Verdict, csv_text, rng_for
from .checking import check_grouped, first_problem, missing_numbers

NAME = "join_tables"
TOL = 0.011
CUSTOMER_HEADER = ["customer_id", "Full Name", "Segment"]
INVOICE_HEADER = ["Invoice No", "CustomerID", "Invoice Date", "Total ($)"]
SEGMENTS = ("Consumer", "Corporate", "Home Office", "Small Business")
FIRST = ("Ana", "Ben", "Chloé", "Dev", "Eva", "Farid", "Grace", "Hugo", "Ines", "Jun")
LAST = ("Ito", "Khan", "Lopez", "Meyer", "Novak", "Okafor", "Park", "Quinn", "Rossi", "Silva")
OUT = "artifacts/segment_totals.csv"


def generate(rng: random.Random) -> tuple[list[list[Any]], list[list[Any]]]:
    """Customers and invoices; a few invoices name customers the customer file lacks."""
    segments = rng.sample(SEGMENTS, rng.randint(3, 4))
    customers = [
        [f"C{100 + i}", f"{rng.choice(FIRST)} {rng.choice(LAST)}", rng.choice(segments)]
        for i in range(rng.randint(15, 40))
    ]
    ids = [c[0] for c in customers]
    invoices = []
    for i in range(rng.randint(80, 200)):
        customer = rng.choice(ids) if rng.random() > 0.06 else f"C{900 + rng.randint(0, 50)}"
        day = date(2025, 1, 1) + timedelta(days=rng.randint(0, 300))
        total = round(rng.uniform(12, 900), 2)
        invoices.append([f"INV-{5000 + i}", customer, day.isoformat(), total])
    if all(invoice[1] in ids for invoice in invoices):  # at least one to leave out
        invoices[rng.randrange(len(invoices))][1] = "C950"
    rng.shuffle(customers)
    return customers, invoices


def build(seed: int, customers: list[list[Any]], invoices: list[list[Any]]) -> TaskInstance:
    segment_of = {str(c[0]): str(c[2]) for c in customers}
    totals: dict[str, float] = defaultdict(float)
    for invoice in invoices:
        segment = segment_of.get(str(invoice[1]))
        if segment is not None:
            totals[segment] += float(invoice[3])
    truth = {segment: round(total, 2) for segment, total in sorted(totals.items())}
    task = (
        "files/invoices.csv holds our invoices and files/customers.csv our customers (an "
        "invoice's CustomerID is a customer's customer_id). Compute the total 'Total ($)' of the "
        "invoices per customer Segment, leaving out invoices whose customer is not in "
        f"customers.csv. Save it to {OUT} (one row per segment, totals rounded to two "
        "decimals) and state each segment's total."
    )

    def check(answer: str, files: Mapping[str, bytes]) -> Verdict:
        missing = missing_numbers(answer, truth, TOL)
        problem = first_problem(
            check_grouped(files.get(OUT), truth, TOL),
            f"the answer lacks the totals of {missing}" if missing else None,
        )
        return Verdict(problem is None, problem or "ok")

    reference = f"""import os
import pandas as pd
os.makedirs("artifacts", exist_ok=True)
invoices = pd.read_csv("files/invoices.csv")
customers = pd.read_csv("files/customers.csv")
joined = invoices.merge(customers, left_on="CustomerID", right_on="customer_id", how="inner")
result = joined.groupby("Segment")["Total ($)"].sum().round(2).reset_index()
result.to_csv("{OUT}", index=False)
print(result.to_string(index=False))
"""
    return TaskInstance(
        family=NAME,
        seed=seed,
        task=task,
        files=(
            TaskFile("invoices.csv", csv_text(INVOICE_HEADER, invoices)),
            TaskFile("customers.csv", csv_text(CUSTOMER_HEADER, customers)),
        ),
        artifacts=(OUT,),
        truth={"figures": truth, "unmatched": sum(i[1] not in segment_of for i in invoices)},
        check=check,
        reference=reference,
    )


def make(seed: int) -> TaskInstance:
    return build(seed, *generate(rng_for(NAME, seed)))


FAMILY = TaskFamily(NAME, "a join of two files, then a group total", make)
