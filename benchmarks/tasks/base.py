"""The suite's typed model: a family makes instances; an instance carries its files, the task a
user would write, the ground truth and the checker that judges an answer and its artifacts."""

from __future__ import annotations

import csv
import io
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class TaskFile:
    """One file to attach; it lands at ``files/<name>`` in the Session's workspace."""

    name: str
    content: str

    @property
    def path(self) -> str:
        return f"files/{self.name}"


@dataclass(frozen=True, slots=True)
class Verdict:
    ok: bool
    why: str = "ok"


Checker = Callable[[str, Mapping[str, bytes]], Verdict]
"""``check(answer, artifacts)``: ``artifacts`` maps workspace paths (``artifacts/...``) to bytes;
a missing artifact is simply absent."""


@dataclass(frozen=True, slots=True)
class TaskInstance:
    family: str
    seed: int
    task: str  # what the user types; names every input file and the artifact path
    files: tuple[TaskFile, ...]  # the first one is selected as the Session's dataset
    artifacts: tuple[str, ...]  # the workspace paths the task asks for
    truth: Mapping[str, Any]  # the ground truth (JSON-able), computed from the generated data
    check: Checker = field(repr=False, compare=False)
    reference: str = field(default="", repr=False)  # a correct program (tests, --dry-run)

    @property
    def dataset(self) -> str:
        return self.files[0].path


@dataclass(frozen=True, slots=True)
class TaskFamily:
    name: str  # the module's name; split.toml assigns it to a half
    shape: str  # the kind of task users bring, in a few words
    make: Callable[[int], TaskInstance] = field(repr=False, compare=False)

    def instance(self, seed: int) -> TaskInstance:
        """A fresh instance: its data, task wording and truth follow from ``seed`` alone."""
        made = self.make(seed)
        assert made.family == self.name, (made.family, self.name)
        return made


def rng_for(family: str, seed: int) -> random.Random:
    """A family's own random stream for ``seed`` (string seeds hash the same in every process),
    so two families given the same seed still get unrelated data."""
    return random.Random(f"{family}:{seed}")


def csv_text(header: list[str], rows: list[list[Any]]) -> str:
    """A CSV file's text (``\\n`` line ends, quoting only where needed)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue()
