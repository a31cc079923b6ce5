"""What the code-first route says and does about the statistics helpers (engine/stathelpers.py):
only the helpers a task's words call for are shown (and an import of one is dropped before the
program runs: engine/rewrites.py), and a helper's result unpacked into the wrong number of
names is told the helper's signature."""

from __future__ import annotations

import ast
import json
import re

from fleet_core.engine.repairs import failing_line
from fleet_core.engine.sourceedits import called_name
from fleet_core.engine.stathelpers import HELP_INTRO, SIGNATURES

STATS_WORDS = re.compile(
    r"correlat|p-value|p_value|significan|t-test|ttest|normal(?:ity|ly)|regress|"
    r"least.squares|slope|intercept|r.squared|\brmse\b|shapiro|\biqr\b|interquartile|quartile|"
    r"outlier",
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
    "iqr_fences": re.compile(r"\biqr\b|interquartile|quartile|outlier", re.I),
}
#: The helpers a statistics task naming none gets (the tests, fits and metrics).
_GENERAL = ("normality", "ttest", "correlation", "linear_fit", "regression_metrics")
_UNPACKING = re.compile(r"values to unpack|cannot unpack|not iterable", re.I)


def helpers_for(task: str) -> list[str]:
    """The helpers a task calls for, in their documented order ([] for no statistics)."""
    if not STATS_WORDS.search(task):
        return []
    named = [name for name, words in _CALLS_FOR.items() if words.search(task)]
    return named or list(_GENERAL)


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


#: scipy.stats functions a defined helper does the work of (the helper unpacks as documented).
SCIPY_HELPERS = {
    "linregress": "linear_fit",
    "pearsonr": "correlation",
    "spearmanr": "correlation",
    "shapiro": "normality",
    "normaltest": "normality",
    "ttest_ind": "ttest",
    "ttest_1samp": "ttest",
}
RESULT_MARK = "@@fleet-result "


def _unpacking(error: str, code: str) -> tuple[int, ast.Assign, ast.Call] | None:
    """The failing line that unpacked a call's result into the wrong number of names: its
    number, its statement and the call; None for any other failure."""
    if not _UNPACKING.search(error):
        return None
    located = failing_line(error, code)
    if located is None:
        return None
    try:
        statement = ast.parse(located[1]).body[0]
    except (SyntaxError, IndexError):
        return None
    if not (
        isinstance(statement, ast.Assign)
        and isinstance(statement.targets[0], ast.Tuple | ast.List)
        and isinstance(statement.value, ast.Call)
    ):
        return None
    return located[0], statement, statement.value


def unpacked_call(error: str, code: str) -> str | None:
    """The call whose result the failing line unpacked into the wrong number of names (its
    source, to be evaluated again in the sandbox), or None."""
    found = _unpacking(error, code)
    return None if found is None else ast.unparse(found[2])


def result_cell(call: str) -> str:
    """A host cell that evaluates ``call`` again (the failed program's names are still defined)
    and prints its result's type, length and field names on one marked line."""
    return (
        "try:\n"
        f"    _fleet_value = ({call})\n"
        "    _fleet_names = list(getattr(_fleet_value, '_fields', None) or [])\n"
        "    _fleet_extra = list(getattr(_fleet_value, '_extra_fields', None) or [])\n"
        "    _fleet_len = len(_fleet_value) if hasattr(_fleet_value, '__len__') else -1\n"
        "    _fleet_kind = type(_fleet_value).__name__\n"
        f"    print({RESULT_MARK!r} + __import__('json').dumps("
        "[_fleet_kind, _fleet_len, _fleet_names, _fleet_extra]))\n"
        "except Exception:\n"
        "    pass\n"
        "finally:\n"
        "    _fleet_value = None\n"
    )


def result_hint(call: str, output: str) -> str:
    """What the call really returns (from :func:`result_cell`'s output), and the defined helper
    that does a scipy function's work, or "" when the cell printed nothing usable."""
    line = next((x for x in reversed(output.splitlines()) if x.startswith(RESULT_MARK)), None)
    if line is None:
        return ""
    try:
        kind, length, names, extra = json.loads(line[len(RESULT_MARK) :])
    except (ValueError, TypeError):
        return ""
    shown = re.sub(r"\s+", " ", call)[:80]
    if names:
        fields = ", ".join(str(n) for n in names)
        more = f" (and by name only: {', '.join(str(n) for n in extra)})" if extra else ""
        said = f"{shown} returns a {kind} of {length} values, in this order: {fields}{more}."
        said += f" Unpack all {length}, or take them by name (result = ...; result.{names[0]})."
    elif length >= 0:
        said = f"{shown} returns a {kind} of {length} values."
    else:
        said = f"{shown} returns a {kind}, which cannot be unpacked."
    callee = re.match(r"[\w.]*?(\w+)\s*\(", call)
    helper = SCIPY_HELPERS.get(callee.group(1)) if callee else None
    if helper is not None:
        said += f" Or use the defined helper (no import): {SIGNATURES[helper]}."
    return said


def helper_fields(name: str) -> list[str]:
    """A helper's figures in their order, as its signature names them (``slope, intercept,
    r_squared, p_value`` for ``linear_fit``)."""
    left = SIGNATURES[name].split("=", 1)[0]
    return [field.strip() for field in left.split(",")]


def unpacked_by_name(error: str, code: str) -> str | None:
    """For a helper's result unpacked into another number of names (``slope, intercept,
    r_squared = linear_fit(x, y)``: "too many values to unpack") where every name is one of the
    helper's figures: ``code`` with those figures read by name (``_fit = linear_fit(x, y);
    slope, intercept, r_squared = _fit.slope, _fit.intercept, _fit.r_squared``), one line, the
    line numbers kept; None otherwise."""
    found = _unpacking(error, code)
    if found is None:
        return None
    number, statement, call = found
    helper = called_name(call)
    elements = getattr(statement.targets[0], "elts", [])
    names = [n.id for n in elements if isinstance(n, ast.Name)]
    fields = helper_fields(helper) if helper in SIGNATURES else []
    if not names or len(names) != len(elements) or not set(names) <= set(fields):
        return None
    lines = code.splitlines()
    indent = lines[number - 1][: len(lines[number - 1]) - len(lines[number - 1].lstrip())]
    read = ", ".join(f"_fit.{n}" for n in names)
    lines[number - 1] = f"{indent}_fit = {ast.unparse(call)}; {', '.join(names)} = {read}"
    return "\n".join(lines)
