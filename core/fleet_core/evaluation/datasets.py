"""Seeded synthetic evaluation cases whose gold values are computed from the generated files.

``build_dataset(seed=7)`` returns CSV aggregations (revenue by region), filters (late
shipments), two-file joins (total per tier), long-context logs (count refunds, find the ALERT
code) and a few self-contained questions. Every case is ``synthetic``, ``critical`` and its own
source group. ``write_dataset(cases, path)`` stores them as JSON (file bytes base64) for
``fleet-lsp eval dataset``; ``read_dataset(path)`` loads them back. ``labelled_cases(store)``
turns reviewed, replay-captured Turns into cases (``fleet-lsp eval run --labelled``).
"""

from __future__ import annotations

import base64
import csv
import io
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fleet_core.evaluation.labels import TraceLabels

if TYPE_CHECKING:
    from fleet_core.store import Store

REGIONS = ("North", "South", "East", "West")
TIERS = ("gold", "silver", "bronze")


@dataclass(frozen=True, slots=True)
class EvalCase:
    case_id: str
    task: str
    files: dict[str, bytes] = field(default_factory=dict)
    labels: TraceLabels = field(
        default_factory=lambda: TraceLabels(
            source_group="none", review_status="synthetic", expected_values=["0"]
        )
    )
    category: str = "question"

    def wire(self) -> dict[str, Any]:
        return {
            "case_id": self.case_id,
            "task": self.task,
            "category": self.category,
            "files": {p: base64.b64encode(b).decode() for p, b in sorted(self.files.items())},
            "labels": self.labels.wire(),
        }

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> EvalCase:
        return cls(
            case_id=str(data["case_id"]),
            task=str(data["task"]),
            category=str(data.get("category", "question")),
            files={p: base64.b64decode(b) for p, b in dict(data.get("files", {})).items()},
            labels=TraceLabels.model_validate(data["labels"]),
        )


def _labels(
    case_id: str, values: list[str], route: str | None = None, answer: str | None = None
) -> TraceLabels:
    return TraceLabels.model_validate(
        {
            "review_status": "synthetic",
            "source_group": case_id,
            "expected_values": values,
            "expected_answer": answer,
            "route": route,
            "critical": True,
            "reviewer": "synthetic-generator",
        }
    )


def _csv(header: list[str], rows: Sequence[Sequence[Any]]) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue().encode()


def _revenue_case(rng: random.Random, n: int) -> EvalCase:
    rows: list[tuple[str, str, int]] = [
        (f"o{i}", rng.choice(REGIONS), rng.randint(10, 500)) for i in range(rng.randint(20, 60))
    ]
    totals = {r: sum(amount for _, region, amount in rows if region == r) for r in REGIONS}
    region = rng.choice(REGIONS)
    case_id = f"revenue-{n}"
    return EvalCase(
        case_id=case_id,
        category="csv_aggregation",
        task=(
            f"Using files/sales_{n}.csv (columns order_id, region, revenue), what is the total "
            f"revenue for the {region} region? Also save artifacts/revenue_by_region.csv."
        ),
        files={f"files/sales_{n}.csv": _csv(["order_id", "region", "revenue"], rows)},
        labels=_labels(case_id, [str(totals[region])], route="flex"),
    )


def _late_case(rng: random.Random, n: int) -> EvalCase:
    rows: list[tuple[str, int, int]] = []
    for i in range(rng.randint(20, 60)):
        promised = rng.randint(1, 10)
        rows.append((f"s{i}", promised, promised + rng.randint(-3, 4)))
    late = sum(1 for _, promised, delivered in rows if delivered > promised)
    case_id = f"late-{n}"
    return EvalCase(
        case_id=case_id,
        category="csv_filter",
        task=(
            f"In files/shipments_{n}.csv, a shipment is late when delivered_days > promised_days. "
            "How many shipments are late?"
        ),
        files={
            f"files/shipments_{n}.csv": _csv(
                ["shipment_id", "promised_days", "delivered_days"], rows
            )
        },
        labels=_labels(case_id, [str(late)]),
    )


def _join_case(rng: random.Random, n: int) -> EvalCase:
    customers: list[tuple[str, str]] = [
        (f"c{i}", rng.choice(TIERS)) for i in range(rng.randint(5, 15))
    ]
    orders: list[tuple[str, str, int]] = [
        (f"o{i}", rng.choice(customers)[0], rng.randint(5, 300)) for i in range(rng.randint(20, 50))
    ]
    tier = rng.choice(TIERS)
    members = {c for c, t in customers if t == tier}
    total = sum(amount for _, customer, amount in orders if customer in members)
    case_id = f"join-{n}"
    return EvalCase(
        case_id=case_id,
        category="csv_join",
        task=(
            f"Join files/orders_{n}.csv (order_id, customer_id, amount) with "
            f"files/customers_{n}.csv (customer_id, tier). "
            f"What is the total order amount for {tier}-tier customers?"
        ),
        files={
            f"files/orders_{n}.csv": _csv(["order_id", "customer_id", "amount"], orders),
            f"files/customers_{n}.csv": _csv(["customer_id", "tier"], customers),
        },
        labels=_labels(case_id, [str(total)]),
    )


def _log_case(rng: random.Random, n: int, chars: int) -> EvalCase:
    lines: list[str] = []
    refunds = 0
    alert_at = rng.randint(10, 100)
    code = f"ALRT-{rng.randint(1000, 9999)}"
    size = 0
    i = 0
    while size < chars:
        event = rng.choice(("login", "purchase", "refund", "logout", "view"))
        refunds += event == "refund"
        line = f"2026-01-{1 + i % 28:02d}T{i % 24:02d}:00:00 user{rng.randint(1, 40)} {event} ok"
        if i == alert_at:
            line = f"2026-01-01T00:00:00 system ALERT code={code}"
        lines.append(line)
        size += len(line) + 1
        i += 1
    case_id = f"logs-{n}"
    return EvalCase(
        case_id=case_id,
        category="long_context",
        task=(
            f"files/events_{n}.log has one event per line. How many refund events are there, and "
            "what is the code in the single ALERT line?"
        ),
        files={f"files/events_{n}.log": ("\n".join(lines) + "\n").encode()},
        labels=_labels(case_id, [str(refunds), code]),
    )


def _questions() -> list[EvalCase]:
    return [
        EvalCase(
            "question-1",
            "What is 17 multiplied by 23?",
            labels=_labels("question-1", ["391"], route="direct"),
            category="question",
        ),
        EvalCase(
            "question-2",
            "What is the sum of the integers from 1 to 100? Compute it.",
            labels=_labels("question-2", ["5050"], route="flex"),
            category="question",
        ),
    ]


def build_dataset(
    seed: int = 7,
    *,
    per_kind: int = 2,
    long_context: bool = True,
    log_chars: tuple[int, ...] = (20_000,),
) -> list[EvalCase]:
    """Seeded cases; the same seed always gives the same files, tasks and gold values."""
    rng = random.Random(seed)  # noqa: S311 - reproducible data, not secrets
    cases = _questions()
    for n in range(1, per_kind + 1):
        cases += [_revenue_case(rng, n), _late_case(rng, n), _join_case(rng, n)]
    if long_context:
        for n, chars in enumerate(log_chars, 1):
            cases.append(_log_case(rng, n, chars))
    return cases


def write_dataset(cases: list[EvalCase], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {"schema_version": 1, "cases": [c.wire() for c in cases]}
    path.write_text(json.dumps(payload, indent=1, sort_keys=True), encoding="utf-8")
    return path


def read_dataset(path: Path) -> list[EvalCase]:
    data = json.loads(path.read_text(encoding="utf-8"))
    if data.get("schema_version") != 1:
        raise ValueError(f"{path}: unsupported dataset schema {data.get('schema_version')!r}")
    return [EvalCase.from_wire(c) for c in data["cases"]]


def labelled_cases(store: Store) -> tuple[list[EvalCase], list[str]]:
    """Cases from the store's labelled traces (not rejected) whose Turn has a verified replay:
    the Turn's task and the ``files/`` it saw, scored against its labels. Also what was skipped
    and why. Blocking (the store and replay decoding): run it in a worker thread."""
    from fleet_core.observability.errors import ReplayError
    from fleet_core.observability.replay import decode_replay

    cases: list[EvalCase] = []
    skipped: list[str] = []
    for row in store.list_trace_labels(limit=10_000):
        trace_id, turn_id = str(row["trace_id"]), row.get("turn_id")
        labels = TraceLabels.model_validate(row["labels"])
        if labels.review_status == "rejected":
            continue
        stored = store.get_replay(turn_id) if turn_id else None
        if stored is None:
            skipped.append(f"{trace_id}: the Turn was not replay-captured")
            continue
        try:
            snapshot = decode_replay(stored[1], stored[0], turn_id=turn_id)
        except ReplayError as exc:
            skipped.append(f"{trace_id}: {exc.message}")
            continue
        files = {p: snapshot.file(p) for p in sorted(snapshot.file_bytes) if p.startswith("files/")}
        cases.append(
            EvalCase(
                case_id=f"trace-{trace_id.removeprefix('tr-')[:12]}",
                task=snapshot.task,
                files=files,
                labels=labels,
                category="labelled",
            )
        )
    return cases, skipped
