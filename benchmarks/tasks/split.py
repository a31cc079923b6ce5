"""The recorded split (split.toml) and the rule that drew it."""

from __future__ import annotations

import random
import tomllib
from pathlib import Path
from typing import Any, Literal

Half = Literal["tune", "heldout"]
HALVES: tuple[Half, ...] = ("tune", "heldout")
SPLIT_FILE = Path(__file__).with_name("split.toml")


def _load() -> dict[str, Any]:
    return tomllib.loads(SPLIT_FILE.read_text(encoding="utf-8"))


def batches(data: dict[str, Any] | None = None) -> list[tuple[int, dict[str, Half]]]:
    """split.toml's batches (or ``data``'s, the file as read), each drawn by the rule with its
    seed: the first split, then the families added later (``[[added]]``), in order."""
    data = _load() if data is None else data
    drawn = [(data["seed"], data["families"])]
    drawn += [(batch["seed"], batch["families"]) for batch in data.get("added", [])]
    found: list[tuple[int, dict[str, Half]]] = []
    for seed, families in drawn:
        checked: dict[str, Half] = {}
        for name, half in families.items():
            if half not in HALVES:
                raise ValueError(f"split.toml: {name} = {half!r}, not one of {HALVES}")
            checked[name] = half
        found.append((int(seed), checked))
    return found


def recorded() -> tuple[dict[str, Half], int, str]:
    """split.toml's assignment (family -> half, every batch), the first split's seed and the
    rule."""
    data = _load()
    families: dict[str, Half] = {}
    for _, batch in batches(data):
        families.update(batch)
    return families, int(data["seed"]), str(data["rule"])


def by_rule(names: list[str], seed: int) -> dict[str, Half]:
    """The rule written in split.toml, applied to ``names``."""
    shuffled = sorted(names)
    random.Random(seed).shuffle(shuffled)
    half = len(shuffled) // 2
    return {name: ("tune" if i < half else "heldout") for i, name in enumerate(shuffled)}


def families_of(half: Half | Literal["both"]) -> list[str]:
    """The families of one half (or both), in split.toml's order."""
    families = recorded()[0]
    return [name for name, h in families.items() if half in ("both", h)]
