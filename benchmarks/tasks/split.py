"""The recorded split (split.toml) and the rule that drew it."""

from __future__ import annotations

import random
import tomllib
from pathlib import Path
from typing import Literal

Half = Literal["tune", "heldout"]
HALVES: tuple[Half, ...] = ("tune", "heldout")
SPLIT_FILE = Path(__file__).with_name("split.toml")


def recorded() -> tuple[dict[str, Half], int, str]:
    """split.toml's assignment (family -> half), its seed and its rule."""
    data = tomllib.loads(SPLIT_FILE.read_text(encoding="utf-8"))
    families: dict[str, Half] = {}
    for name, half in data["families"].items():
        if half not in HALVES:
            raise ValueError(f"split.toml: {name} = {half!r}, not one of {HALVES}")
        families[name] = half
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
