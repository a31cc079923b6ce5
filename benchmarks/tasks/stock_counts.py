"""Deduplicating by a composite, normalized key: stock counts of an item in a warehouse
recorded more than once (item codes typed with other case, spaces or dashes); the latest count
of each is kept and totalled."""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from datetime import date, timedelta
from typing import Any

from .base import TaskFamily, TaskFile, TaskInstance, Verdict, csv_text, rng_for
from .checking import check_tags, first_problem, table

NAME = "stock_counts"
HEADER = ["Item Code", "Warehouse", "Counted On", "Qty"]
WAREHOUSES = ("North", "South", "East")
LETTERS = ("AB", "CK", "FR", "MX", "QT", "ZL")
OUT = "artifacts/latest_counts.csv"


def code_key(code: object) -> str:
    """An item code as compared: upper case, without spaces and dashes."""
    return re.sub(r"[\s-]", "", str(code)).upper()


def _spelled(rng: random.Random, letters: str, digits: str) -> str:
    """One way a person types the code ``letters-digits``."""
    sep = rng.choice(["-", "-", " ", ""])
    text = f"{letters}{sep}{digits}"
    return rng.choice([text, text, text.lower(), f" {text}"])


def generate(rng: random.Random) -> list[list[Any]]:
    rows: list[list[Any]] = []
    items = {(rng.choice(LETTERS), str(rng.randint(100, 999))) for _ in range(rng.randint(15, 35))}
    for letters, digits in sorted(items):
        for warehouse in rng.sample(WAREHOUSES, rng.randint(1, 3)):
            days = rng.sample(range(0, 300), rng.choice((1, 1, 2, 3)))
            for day in days:
                counted = date(2025, 1, 6) + timedelta(days=day)
                rows.append(
                    [_spelled(rng, letters, digits), warehouse, counted.isoformat(),
                     rng.randint(0, 400)]
                )  # fmt: skip
    rng.shuffle(rows)
    return rows


def build(seed: int, rows: list[list[Any]]) -> TaskInstance:
    latest: dict[tuple[str, str], list[Any]] = {}
    for row in rows:
        at = (code_key(row[0]), str(row[1]))
        if at not in latest or str(row[2]) > str(latest[at][2]):
            latest[at] = row
    kept = {(item, warehouse, str(row[2])) for (item, warehouse), row in latest.items()}
    truth = {"rows_kept": len(kept), "total_qty": sum(int(row[3]) for row in latest.values())}
    task = (
        "files/stock_counts.csv lists stock counts; an item may have been counted more than "
        "once in the same Warehouse, and its Item Code is not always typed the same way (other "
        "case, spaces or a dash: 'AB-120', 'ab 120' and 'AB120' are one item). Keep only the "
        "latest count (by Counted On) of each item in each warehouse, save those rows with all "
        f"their columns to {OUT}, and print how many rows you kept and their total Qty as "
        "@rows_kept[N] @total_qty[N]."
    )

    def check(answer: str, files: Mapping[str, bytes]) -> Verdict:
        data = files.get(OUT)
        problem = "no artifact" if data is None else None
        if data is not None:
            got = {
                (code_key(cells[0]), cells[1], cells[2])
                for cells in (_fields(row) for row in table(data))
                if cells is not None
            }
            if got != kept:
                problem = f"artifact: {len(got)} latest counts, expected {len(kept)}"
        problem = first_problem(problem, check_tags(answer, truth, 0.5))
        return Verdict(problem is None, problem or "ok")

    reference = f"""import os
import pandas as pd
os.makedirs("artifacts", exist_ok=True)
df = pd.read_csv("files/stock_counts.csv")
df["key"] = df["Item Code"].str.replace(r"[\\s-]", "", regex=True).str.upper()
latest = df.sort_values("Counted On").groupby(["key", "Warehouse"]).tail(1)
latest.drop(columns="key").to_csv("{OUT}", index=False)
print(f"@rows_kept[{{len(latest)}}] @total_qty[{{latest['Qty'].sum()}}]")
"""
    return TaskInstance(
        family=NAME,
        seed=seed,
        task=task,
        files=(TaskFile("stock_counts.csv", csv_text(HEADER, rows)),),
        artifacts=(OUT,),
        truth=truth,
        check=check,
        reference=reference,
    )


_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_CODE = re.compile(r"[A-Za-z]{2}[\s-]?\d{3}")


def _fields(row: list[str]) -> tuple[str, str, str] | None:
    """A data row's item code, warehouse and date, in whatever column order; None for a header."""
    code = next((c for c in row if _CODE.fullmatch(c.strip())), None)
    warehouse = next((c.title() for c in row if c.title() in WAREHOUSES), None)  # any case
    day = next((c for c in row if _DATE.fullmatch(c)), None)
    return None if code is None or warehouse is None or day is None else (code, warehouse, day)


def make(seed: int) -> TaskInstance:
    rng = rng_for(NAME, seed)
    for _ in range(100):  # duplicates to remove, in more than one spelling
        rows = generate(rng)
        made = build(seed, rows)
        if len(rows) - made.truth["rows_kept"] >= 5:
            return made
    raise AssertionError(f"{NAME}: no instance with duplicates (seed {seed})")


FAMILY = TaskFamily(NAME, "duplicates by a composite, normalized key; the latest kept", make)
