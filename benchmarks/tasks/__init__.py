"""A general task suite for the small-model profile (docs/benchmarks.md#task-suite).

Eighteen families of the data tasks users bring, one module each (six added after the split).
A family makes fresh instances from a seed: the files to attach, the task a user would write
(naming its inputs and the artifact to write, some with an answer format such as
``@name[value]``), the ground truth computed here from the generated data (plain Python, scipy
for one p-value), a checker that judges an answer and its artifacts tolerantly, and a correct
reference program (used by the tests and ``bench_tasks.py --dry-run`` only, never shown to a
model).

``split.toml`` assigns whole families to ``tune`` or ``heldout`` once, by a seeded rule;
held-out transcripts are never read while tuning. ``benchmarks/bench_tasks.py`` runs them.
"""

from __future__ import annotations

from . import (
    clean_missing,
    correlation_test,
    dedupe_contacts,
    describe_column,
    events_jsonl,
    fill_gaps,
    filter_rows,
    group_aggregate,
    join_tables,
    linear_fit,
    log_status,
    monthly_series,
    nested_tickets,
    orders_json,
    pivot_wide,
    sensor_summary,
    stock_counts,
    top_k,
)
from .base import Checker, TaskFamily, TaskFile, TaskInstance, Verdict
from .split import HALVES, Half, batches, by_rule, families_of, recorded

FAMILIES: dict[str, TaskFamily] = {
    module.FAMILY.name: module.FAMILY
    for module in (
        group_aggregate,
        describe_column,
        correlation_test,
        filter_rows,
        monthly_series,
        join_tables,
        log_status,
        nested_tickets,
        top_k,
        clean_missing,
        linear_fit,
        pivot_wide,
        orders_json,
        dedupe_contacts,
        sensor_summary,
        stock_counts,
        events_jsonl,
        fill_gaps,
    )
}

__all__ = [
    "FAMILIES",
    "HALVES",
    "Checker",
    "Half",
    "TaskFamily",
    "TaskFile",
    "TaskInstance",
    "Verdict",
    "batches",
    "by_rule",
    "families_of",
    "recorded",
]
