"""The curated optimization dataset: approved labels on replay-captured Turns.

Sources: every labelled trace in the store whose label is ``approved`` (``benchmark``,
``synthetic`` and ``rejected`` are excluded) and whose Turn has a replay snapshot that verifies
(``decode_replay``); traces from any Session qualify, and an example's source group is its
label's ``source_group``. Examples are de-duplicated by (source Session, Turn, snapshot digest).
At least ``MIN_EXAMPLES`` examples from ``MIN_GROUPS`` source groups are required; otherwise
``OptimizationRefused`` says what to add. Blocking (the store, replay decoding): worker thread.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fleet_core.errors import InvalidInput
from fleet_core.evaluation.labels import TraceLabels
from fleet_core.observability.replay import ReplaySnapshot

if TYPE_CHECKING:
    from fleet_core.store import Store

MIN_EXAMPLES = 8
MIN_GROUPS = 3
MAX_EXAMPLES = 500


class OptimizationRefused(InvalidInput):
    """The optimization cannot run or the approval cannot proceed; the message says why."""


@dataclass(frozen=True, slots=True)
class OptExample:
    trace_id: str
    turn_id: str
    session_id: str
    labels: TraceLabels
    snapshot: ReplaySnapshot
    snapshot_sha256: str

    @property
    def example_id(self) -> str:
        return self.turn_id

    @property
    def group(self) -> str:
        return self.labels.source_group

    @property
    def critical(self) -> bool:
        return self.labels.critical

    @property
    def task(self) -> str:
        return self.snapshot.task


@dataclass(frozen=True, slots=True)
class Dataset:
    examples: tuple[OptExample, ...]
    excluded: tuple[str, ...]  # "<trace id>: why" for every labelled trace left out

    @property
    def groups(self) -> list[str]:
        return sorted({e.group for e in self.examples})

    def lineage_digest(self) -> str:
        """sha256 over the examples' identities and labels (what the search saw)."""
        rows = [
            [e.session_id, e.turn_id, e.snapshot_sha256, e.labels.wire()]
            for e in sorted(self.examples, key=lambda e: e.turn_id)
        ]
        return hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()


def collect(store: Store) -> Dataset:
    from fleet_core.observability.errors import ReplayError
    from fleet_core.observability.replay import decode_replay

    examples: dict[tuple[str, str, str], OptExample] = {}
    excluded: list[str] = []
    for row in store.list_trace_labels(limit=10_000):
        trace_id, turn_id = str(row["trace_id"]), row.get("turn_id")
        try:
            labels = TraceLabels.model_validate(row["labels"])
        except ValueError:
            excluded.append(f"{trace_id}: its labels do not validate")
            continue
        if labels.review_status != "approved":
            excluded.append(f"{trace_id}: review status {labels.review_status} is excluded")
            continue
        stored = store.get_replay(str(turn_id)) if turn_id else None
        if stored is None:
            excluded.append(f"{trace_id}: the Turn was not replay-captured")
            continue
        digest, blob = stored
        try:
            snapshot = decode_replay(blob, digest, turn_id=str(turn_id))
        except ReplayError as exc:
            excluded.append(f"{trace_id}: {exc.message}")
            continue
        key = (snapshot.session_id, str(turn_id), digest)
        if key in examples:
            continue
        examples[key] = OptExample(
            trace_id, str(turn_id), snapshot.session_id, labels, snapshot, digest
        )
        if len(examples) >= MAX_EXAMPLES:
            break
    return Dataset(tuple(examples.values()), tuple(excluded))


def require_minimum(dataset: Dataset) -> None:
    n, groups = len(dataset.examples), len(dataset.groups)
    if n >= MIN_EXAMPLES and groups >= MIN_GROUPS:
        return
    raise OptimizationRefused(
        f"Optimization needs at least {MIN_EXAMPLES} approved, replay-captured examples from "
        f"at least {MIN_GROUPS} source groups; found {n} example(s) in {groups} group(s). "
        f"Add {max(0, MIN_EXAMPLES - n)} more example(s) and {max(0, MIN_GROUPS - groups)} "
        "more group(s): run Turns with recordReplay on, then label their traces "
        "(fleet-lsp eval label TRACE --answer ... --value ... --group NAME; --critical with "
        "--value for cases that must always pass).",
        examples=n,
        groups=groups,
    )
