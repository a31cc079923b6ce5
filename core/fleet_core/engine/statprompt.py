"""What the code-first route says and does about the statistics helpers (engine/stathelpers.py):
only the helpers a task's words call for are shown (and an import of one is dropped before the
program runs: engine/rewrites.py), and a helper's result unpacked into the wrong number of
names is told the helper's signature."""

from __future__ import annotations

import re

from fleet_core.engine.repairs import failing_line
from fleet_core.engine.stathelpers import HELP_INTRO, SIGNATURES

STATS_WORDS = re.compile(
    r"correlat|p-value|p_value|significan|t-test|ttest|normal(?:ity|ly)|regress|"
    r"least.squares|slope|intercept|r.squared|\brmse\b|shapiro",
    re.IGNORECASE,
)
#: The words that call for each helper; a statistics task naming none of them gets them all.
_CALLS_FOR = {
    "normality": re.compile(r"normal(?:ity|ly)?\b|shapiro|gaussian", re.I),
    "ttest": re.compile(r"t-test|ttest|\bt test|significan", re.I),
    "correlation": re.compile(r"correlat|pearson|spearman", re.I),
    "linear_fit": re.compile(
        r"regress|least.squares|slope|intercept|straight line|linear fit", re.I
    ),
    "regression_metrics": re.compile(r"\brmse\b|\bmae\b|\bmse\b|mean (?:squared|absolute)", re.I),
}
_UNPACKING = re.compile(r"values to unpack|cannot unpack|not iterable", re.I)


def helpers_for(task: str) -> list[str]:
    """The helpers a task calls for, in their documented order ([] for no statistics)."""
    if not STATS_WORDS.search(task):
        return []
    named = [name for name, words in _CALLS_FOR.items() if words.search(task)]
    return named or list(SIGNATURES)


def stats_help(task: str) -> str:
    """The prompt's line on the helpers the task calls for ("" when it asks no statistics)."""
    names = helpers_for(task)
    if not names:
        return ""
    return HELP_INTRO + "; ".join(SIGNATURES[n] for n in names) + ". Each drops missing values."


def unpacking_hint(error: str, code: str) -> str:
    """For a helper's result unpacked wrongly on the failing line: that helper's signature."""
    if not _UNPACKING.search(error):
        return ""
    located = failing_line(error, code)
    if located is None:
        return ""
    called = [n for n in SIGNATURES if re.search(rf"\b{n}\s*\(", located[1])]
    return "".join(f"{n}() returns, in this order: {SIGNATURES[n]}." for n in called[:1])
