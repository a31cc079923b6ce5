"""Splits by source group: a group never spans partitions; critical groups go to holdout.

Groups are ordered by ``sha256(seed:group)`` (deterministic for a seed). Every group holding a
critical example goes to holdout; of the rest, ``train`` gets ``max(1, floor(n * train_ratio))``
groups (leaving at least one for dev and, when there is no critical group, one for holdout),
``dev`` at least one, and the remainder joins holdout. Train and dev feed the search; holdout is
used only by the validation passes.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

from fleet_core.optimization.dataset import Dataset, OptExample, OptimizationRefused

DEFAULT_SEED = 0
DEFAULT_VALIDATION_RATIO = 0.35


@dataclass(frozen=True, slots=True)
class Splits:
    train: tuple[OptExample, ...]
    dev: tuple[OptExample, ...]
    holdout: tuple[OptExample, ...]
    seed: int

    def sizes(self) -> dict[str, int]:
        return {"train": len(self.train), "dev": len(self.dev), "holdout": len(self.holdout)}

    def groups(self) -> dict[str, list[str]]:
        return {
            name: sorted({e.group for e in part})
            for name, part in (("train", self.train), ("dev", self.dev), ("holdout", self.holdout))
        }


def _order(group: str, seed: int) -> str:
    return hashlib.sha256(f"{seed}:{group}".encode()).hexdigest()


def split(
    dataset: Dataset,
    *,
    seed: int = DEFAULT_SEED,
    validation_ratio: float = DEFAULT_VALIDATION_RATIO,
) -> Splits:
    if not 0.1 <= validation_ratio <= 0.5:
        raise OptimizationRefused("the validation ratio must be between 0.1 and 0.5")
    by_group: dict[str, list[OptExample]] = {}
    for example in dataset.examples:
        by_group.setdefault(example.group, []).append(example)
    critical = sorted((g for g, xs in by_group.items() if any(x.critical for x in xs)))
    rest = sorted((g for g in by_group if g not in critical), key=lambda g: _order(g, seed))
    reserve = 0 if critical else 1
    if len(rest) < 2 + reserve:
        raise OptimizationRefused(
            f"Splitting needs at least {2 + reserve} source groups without critical examples "
            f"(train and dev{'' if critical else ', plus one for holdout'}); found {len(rest)}. "
            "Label examples from more source groups."
        )
    n = len(rest)
    train_ratio = 1 - validation_ratio - 0.2
    n_train = max(1, min(n - reserve - 1, math.floor(n * train_ratio)))
    n_dev = max(1, min(n - n_train - reserve, math.floor(n * validation_ratio)))
    train_groups = rest[:n_train]
    dev_groups = rest[n_train : n_train + n_dev]
    holdout_groups = critical + rest[n_train + n_dev :]

    def pick(groups: list[str]) -> tuple[OptExample, ...]:
        return tuple(x for g in groups for x in sorted(by_group[g], key=lambda e: e.turn_id))

    return Splits(pick(train_groups), pick(dev_groups), pick(holdout_groups), seed)
