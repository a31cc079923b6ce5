"""Nested JSON: support tickets with nested customers and event lists, summarised per tier."""

from __future__ import annotations

import json
import random
from collections import defaultdict
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from .base import TaskFamily, TaskFile, TaskInstance, Verdict, rng_for
from .checking import check_grouped, first_problem, missing_numbers

NAME = "nested_tickets"
TOL = 0.011
OUT = "artifacts/tier_replies.csv"
TIERS = ("Free", "Pro", "Business", "Enterprise")
SUBJECTS = ("Cannot log in", "Invoice question", "Export fails", "Feature request", "Slow sync")
TAGS = ("billing", "auth", "bug", "urgent", "mobile", "api")


def generate(rng: random.Random) -> dict[str, Any]:
    tiers = rng.sample(TIERS, rng.randint(3, 4))
    start = datetime(2025, rng.randint(1, 10), 1, 9, 0)
    tickets = []
    for i in range(rng.randint(25, 70)):
        opened = start + timedelta(hours=rng.randint(0, 900))
        events: list[dict[str, Any]] = [{"type": "opened", "at": opened.isoformat()}]
        at = opened
        for _ in range(rng.randint(0, 7)):
            at += timedelta(minutes=rng.randint(5, 600))
            kind = rng.choice(("reply", "reply", "reply", "note", "status_change"))
            event: dict[str, Any] = {"type": kind, "at": at.isoformat()}
            if kind == "reply":
                event["by"] = rng.choice(("agent", "agent", "customer"))
            events.append(event)
        if rng.random() < 0.7:
            events.append({"type": "closed", "at": (at + timedelta(hours=1)).isoformat()})
        tickets.append(
            {
                "id": f"T-{4100 + i}",
                "subject": rng.choice(SUBJECTS),
                "customer": {
                    "name": f"customer-{rng.randint(1, 60):03d}",
                    "plan": {"tier": rng.choice(tiers), "seats": rng.randint(1, 250)},
                },
                "events": events,
                "tags": rng.sample(TAGS, rng.randint(0, 3)),
            }
        )
    return {"exported_at": "2025-12-01T00:00:00Z", "source": "helpdesk", "tickets": tickets}


def build(seed: int, export: dict[str, Any]) -> TaskInstance:
    replies: dict[str, list[int]] = defaultdict(list)
    for ticket in export["tickets"]:
        agent = [e for e in ticket["events"] if e["type"] == "reply" and e.get("by") == "agent"]
        replies[ticket["customer"]["plan"]["tier"]].append(len(agent))
    truth = {
        tier: (len(counts), round(sum(counts) / len(counts), 2))
        for tier, counts in sorted(replies.items())
    }
    task = (
        "files/support_tickets.json is a helpdesk export: its 'tickets' list holds the tickets, "
        "each with its customer's plan tier at customer.plan.tier and an 'events' list. For "
        "each tier, count the tickets and compute the average number of agent replies per "
        'ticket (events whose type is "reply" and whose "by" is "agent"). Save '
        f"{OUT} with the columns tier, tickets and avg_agent_replies (rounded to two decimals) "
        "and state each tier's figures."
    )

    def check(answer: str, files: Mapping[str, bytes]) -> Verdict:
        averages = {tier: avg for tier, (_, avg) in truth.items()}
        missing = missing_numbers(answer, averages, TOL)
        problem = first_problem(
            check_grouped(files.get(OUT), truth, TOL),
            f"the answer lacks the averages of {missing}" if missing else None,
        )
        return Verdict(problem is None, problem or "ok")

    reference = f"""import csv, json, os
os.makedirs("artifacts", exist_ok=True)
with open("files/support_tickets.json") as f:
    export = json.load(f)
tickets = {{}}
replies = {{}}
for ticket in export["tickets"]:
    tier = ticket["customer"]["plan"]["tier"]
    tickets[tier] = tickets.get(tier, 0) + 1
    for event in ticket["events"]:
        if event["type"] == "reply" and event.get("by") == "agent":
            replies[tier] = replies.get(tier, 0) + 1
with open("{OUT}", "w", newline="") as f:
    writer = csv.writer(f)
    writer.writerow(["tier", "tickets", "avg_agent_replies"])
    for tier in sorted(tickets):
        average = round(replies.get(tier, 0) / tickets[tier], 2)
        writer.writerow([tier, tickets[tier], average])
        print(tier, tickets[tier], average)
"""
    return TaskInstance(
        family=NAME,
        seed=seed,
        task=task,
        files=(TaskFile("support_tickets.json", json.dumps(export, indent=2)),),
        artifacts=(OUT,),
        truth={tier: {"tickets": n, "avg_agent_replies": avg} for tier, (n, avg) in truth.items()},
        check=check,
        reference=reference,
    )


def make(seed: int) -> TaskInstance:
    return build(seed, generate(rng_for(NAME, seed)))


FAMILY = TaskFamily(NAME, "nested JSON records summarised per group", make)
