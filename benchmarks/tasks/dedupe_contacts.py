"""Cleaning duplicates: contacts whose e-mails differ only in case and surrounding spaces are
one contact; the earliest signup is kept, and the counts are the answer."""

from __future__ import annotations

import random
from collections.abc import Mapping
from datetime import date, timedelta
from typing import Any

from .base import TaskFamily, TaskFile, TaskInstance, Verdict, csv_text, rng_for
from .checking import check_tags, first_problem, norm, table

NAME = "dedupe_contacts"
HEADER = ["Full Name", "E-mail", "Signup Date", "Plan"]
FIRST = ("Ada", "Bo", "Cai", "Dara", "Emil", "Fay", "Gil", "Hal", "Ira", "Jo", "Kim", "Lev")
LAST = ("Abe", "Berg", "Cruz", "Diaz", "Eng", "Fox", "Gray", "Holm", "Ito", "Jain")
DOMAINS = ("example.com", "mail.test", "corp.example")
PLANS = ("free", "pro", "team")
OUT = "artifacts/contacts_clean.csv"


def _variant(rng: random.Random, email: str) -> str:
    """The same address as a person might type it again: other case, stray spaces."""
    spelled = rng.choice([email.upper(), email.title(), email.capitalize(), email])
    return rng.choice(["", " ", "  "]) + spelled + rng.choice(["", " "])


def generate(rng: random.Random) -> list[list[Any]]:
    people = []
    for i in range(rng.randint(30, 70)):
        first, last = rng.choice(FIRST), rng.choice(LAST)
        email = f"{first}.{last}{i}@{rng.choice(DOMAINS)}".lower()
        people.append((f"{first} {last}", email))
    rows = []
    for name, email in people:
        for copy in range(rng.choice((1, 1, 1, 2, 3))):
            day = date(2024, 1, 1) + timedelta(days=rng.randint(0, 600))
            spelled = email if copy == 0 and rng.random() < 0.5 else _variant(rng, email)
            rows.append([name, spelled, day.isoformat(), rng.choice(PLANS)])
    rng.shuffle(rows)
    return rows


def build(seed: int, rows: list[list[Any]]) -> TaskInstance:
    earliest: dict[str, str] = {}
    for row in rows:
        email = str(row[1]).strip().lower()
        if email not in earliest or str(row[2]) < earliest[email]:
            earliest[email] = str(row[2])
    unique = len(earliest)
    removed = len(rows) - unique
    task = (
        "files/contacts.csv has duplicate contacts: the same E-mail typed again with other "
        "capital letters or spaces around it. Remove the duplicates (the same E-mail ignoring "
        "case and surrounding spaces), keeping each contact's row with the earliest Signup "
        f"Date, save the remaining rows with all their columns to {OUT}, and print the number "
        "of unique contacts and the number of rows removed as @unique_contacts[N] "
        "@rows_removed[N]."
    )

    def check(answer: str, files: Mapping[str, bytes]) -> Verdict:
        data = files.get(OUT)
        problem = "no artifact" if data is None else None
        if data is not None:
            kept = _kept(table(data), set(earliest))
            if kept != earliest:
                wrong = sorted(set(kept.items()) ^ set(earliest.items()))[:3]
                problem = f"artifact: {len(kept)} contacts kept, expected {unique} ({wrong})"
        expected = {"unique_contacts": unique, "rows_removed": removed}
        problem = first_problem(problem, check_tags(answer, expected, 0.0))
        return Verdict(problem is None, problem or "ok")

    reference = f"""import os
import pandas as pd
os.makedirs("artifacts", exist_ok=True)
df = pd.read_csv("files/contacts.csv")
df["_key"] = df["E-mail"].str.strip().str.lower()
kept = df.sort_values("Signup Date").drop_duplicates("_key").drop(columns="_key")
kept.to_csv("{OUT}", index=False)
print(f"@unique_contacts[{{len(kept)}}] @rows_removed[{{len(df) - len(kept)}}]")
"""
    return TaskInstance(
        family=NAME,
        seed=seed,
        task=task,
        files=(TaskFile("contacts.csv", csv_text(HEADER, rows)),),
        artifacts=(OUT,),
        truth={"unique_contacts": unique, "rows_removed": removed, "earliest": earliest},
        check=check,
        reference=reference,
    )


def _kept(rows: list[list[str]], emails: set[str]) -> dict[str, str]:
    """Each known e-mail's signup date in an artifact's rows; a second row for one e-mail
    makes the mapping wrong on purpose (its date is marked as a duplicate)."""
    kept: dict[str, str] = {}
    for row in rows:
        cells = [norm(c) for c in row]
        email = next((c for c in cells if c in emails), None)
        day = next((c[:10] for c in cells if len(c) >= 10 and c[4] == "-" and c[7] == "-"), "")
        if email is not None:
            kept[email] = day if email not in kept else "duplicate"
    return kept


def make(seed: int) -> TaskInstance:
    rng = rng_for(NAME, seed)
    for _ in range(100):  # some duplicates to remove
        made = build(seed, generate(rng))
        if made.truth["rows_removed"] >= 3:
            return made
    raise AssertionError(f"{NAME}: no instance with duplicates (seed {seed})")


FAMILY = TaskFamily(NAME, "removing duplicates that differ in case and spaces", make)
