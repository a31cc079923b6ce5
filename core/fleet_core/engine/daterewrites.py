"""The latest (or earliest) row of each key, kept after sorting by the date
(docs/engine.md#code-first-flex).

A small model asked for "the latest count of each item" writes
``df.drop_duplicates(subset=[...], keep='last')`` on a table in file order, which keeps the last
row written, not the latest one (the seed-79 and seed-80 ``stock_counts`` tune transcripts).
Where the task asks for the latest or the earliest, the inputs hold exactly one date column,
and the program has not sorted that table before (a bare ``t.sort_values(...)`` statement
sorts nothing), the host sorts the table by that date (a stable sort, so rows already in
order stay so) right where such a call keeps the last or first row of each
key: ``drop_duplicates`` keeping the matching end, or ``groupby(...)`` followed by
``tail(1)``/``last()`` (``head(1)``/``first()`` for the earliest). Line numbers are kept.
"""

from __future__ import annotations

import ast
import re
from typing import Literal

from fleet_core.engine.sourceedits import Edit, called_name, parse, receiver, splice, spliced_in

End = Literal["last", "first"]
DateOrder = tuple[str, End]  # the one date column, and the end of each key's rows kept
_LATEST = re.compile(r"\b(?:latest|most recent|newest)\b", re.I)
_EARLIEST = re.compile(r"\b(?:earliest|oldest)\b", re.I)
_GROUP_ENDS: dict[End, frozenset[str]] = {
    "last": frozenset({"tail", "last"}),
    "first": frozenset({"head", "first"}),
}


def date_order(task: str, tables: dict[str, list[tuple[str, str]]]) -> DateOrder | None:
    """The one date column of the inputs and the end of it the task keeps ("last" for the
    latest); None when the task asks for neither or both, or the inputs hold no date column
    or more than one."""
    latest, earliest = bool(_LATEST.search(task)), bool(_EARLIEST.search(task))
    dates = {name for columns in tables.values() for name, kind in columns if "date" in kind}
    if latest == earliest or len(dates) != 1:
        return None
    return dates.pop(), "last" if latest else "first"


def _keeps(call: ast.Call, end: End) -> bool:
    """Whether ``call`` keeps the ``end`` row of each key: ``drop_duplicates`` (``keep``
    defaults to "first") or an end call on a ``groupby``."""
    name = called_name(call)
    if name == "drop_duplicates":
        keep = next((k.value for k in call.keywords if k.arg == "keep"), None)
        said = keep.value if isinstance(keep, ast.Constant) else None if keep else "first"
        return said == end
    on = receiver(call)
    return (
        name in _GROUP_ENDS[end]
        and isinstance(on, ast.Call)
        and called_name(on) == "groupby"
        and (name in ("last", "first") or _one_row(call))
    )


def _one_row(call: ast.Call) -> bool:
    """``tail()``/``head()`` asked for one row (``tail(1)``)."""
    only = call.args[0] if len(call.args) == 1 else None
    return isinstance(only, ast.Constant) and only.value == 1


def _table(call: ast.Call) -> ast.Name | None:
    """The table a keeping call starts from: ``df`` in ``df.drop_duplicates(...)`` and
    ``df.groupby(...).tail(1)``, when it is a plain name."""
    on = receiver(call)
    if isinstance(on, ast.Call) and called_name(on) == "groupby":
        on = receiver(on)
    return on if isinstance(on, ast.Name) else None


def _sorted_before(tree: ast.Module, table: str, line: int) -> bool:
    """Whether the program sorts ``table`` on a line before ``line`` in a way that lasts
    (``table = table.sort_values(...)``, or ``inplace=True``); a bare ``table.sort_values(...)``
    statement changes nothing."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and node.lineno < line:
            named = any(isinstance(t, ast.Name) and t.id == table for t in node.targets)
            if named and any(_is_sort(call) for call in ast.walk(node.value)):
                return True
        if (
            isinstance(node, ast.Call)
            and _is_sort(node)
            and node.lineno < line
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == table
            and any(k.arg == "inplace" for k in node.keywords)
        ):
            return True
    return False


def _is_sort(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and called_name(node) in ("sort_values", "sort_index")


def sorted_by_date(code: str, order: DateOrder | None) -> str:
    """``code`` with the table sorted by the date column where a call keeps the ``order`` end
    row of each key of a table not sorted before (see the module); ``code`` unchanged else."""
    tree = parse(code) if order is not None else None
    if tree is None or order is None:
        return code
    column, end = order
    edits: list[Edit] = []
    for node in ast.walk(tree):
        table = _table(node) if isinstance(node, ast.Call) and _keeps(node, end) else None
        if table is None or table.end_col_offset is None or table.lineno != table.end_lineno:
            continue
        if _sorted_before(tree, table.id, table.lineno):
            continue
        name, quoted = table.id, repr(column)
        by_date = f"({name}.sort_values({quoted}, kind='stable') if {quoted} in {name} else {name})"
        edits.append(
            (table.lineno - 1, table.col_offset, table.end_col_offset, spliced_in(by_date))
        )
    return splice(code, edits) if edits else code
