"""Whole rows saved where a program saved a column of them (docs/engine.md#code-first-flex).

Asked to "save the outlier rows with all their columns", a small model filters one column and
saves the values (``outliers = t[mask]``, then ``outliers.to_csv(path)``), and sends the same
program again when the host doubts it (the seed-80 ``sensor_summary`` tune transcripts). When
the inspection finds such an artifact lacking its input's columns, a host cell looks in the
program's namespace for the table those values were selected from: a DataFrame holding every
column of the input, whose rows at the saved value's labels hold exactly those values. Only
then is the program mended to save those rows of that table (``df.loc[outliers.index]``) and
run again, the line numbers kept; otherwise the doubt goes to the model as before.
"""

from __future__ import annotations

import ast
import json

from fleet_core.engine.sourceedits import Edit, called_name, parse, receiver, splice, spliced_in

MARK = "@@fleet-rows "

_SOURCE = r"""
def _fleet_rows(saved, source):
    import csv
    value = globals().get(saved)
    with open(source, newline="", encoding="utf-8", errors="replace") as f:
        header = [h.strip() for h in next(csv.reader(f), [])]

    def holds(table):
        try:
            if not set(header) <= {str(c).strip() for c in table.columns}:
                return False
            if not (value.index.is_unique and value.index.isin(table.index).all()):
                return False
            picked = table.loc[value.index]
            if hasattr(value, "columns"):
                return set(value.columns) < set(table.columns) and value.equals(
                    picked[list(value.columns)])
            return value.name in table.columns and value.equals(picked[value.name])
        except Exception:
            return False

    found = ""
    if value is not None and hasattr(value, "index"):
        found = next((n for n, t in list(globals().items())
                      if not n.startswith("_") and t is not value
                      and type(t).__name__ == "DataFrame" and holds(t)), "")
    print(MARK + json.dumps(found))
"""


def rows_cell(saved: str, source: str) -> str:
    """The host cell that names the table ``saved`` (a name in the program's namespace) holds
    a selection of, among the tables holding every column of ``source``."""
    body = _SOURCE.replace("MARK + json.dumps", f"{MARK!r} + __import__('json').dumps")
    return f"{body}\n_fleet_rows({saved!r}, {source!r})\ndel _fleet_rows"


def marked_value(output: str, mark: str) -> object:
    """The JSON value on a host cell's last line starting with ``mark``, or None."""
    for line in reversed(output.splitlines()):
        if line.startswith(mark):
            try:
                return json.loads(line[len(mark) :])
            except ValueError:
                return None
    return None


def parse_rows(output: str) -> str | None:
    """The table's name the cell printed, or None."""
    found = marked_value(output, MARK)
    return found if isinstance(found, str) and found.isidentifier() else None


def _opened_as(tree: ast.Module, path: str) -> set[str]:
    """The names ``with open(path, ...) as f`` binds."""
    names = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.With):
            continue
        for item in node.items:
            call, target = item.context_expr, item.optional_vars
            if (
                isinstance(call, ast.Call)
                and called_name(call) == "open"
                and call.args
                and isinstance(call.args[0], ast.Constant)
                and call.args[0].value == path
                and isinstance(target, ast.Name)
            ):
                names.add(target.id)
    return names


def _saves(tree: ast.Module, path: str) -> list[ast.Name]:
    """The names ``name.to_csv(path)`` (or to a file opened on ``path``) saves."""
    handles = _opened_as(tree, path)
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and called_name(node) == "to_csv"):
            continue
        on = receiver(node)
        target = node.args[0] if node.args else None
        target = target or next((k.value for k in node.keywords if k.arg == "path_or_buf"), None)
        to_path = isinstance(target, ast.Constant) and target.value == path
        to_handle = isinstance(target, ast.Name) and target.id in handles
        if isinstance(on, ast.Name) and (to_path or to_handle):
            found.append(on)
    return found


def saved_name(code: str, path: str) -> str | None:
    """The one name whose ``to_csv`` writes ``path``, or None."""
    tree = parse(code)
    names = {name.id for name in _saves(tree, path)} if tree is not None else set()
    return names.pop() if len(names) == 1 else None


def saved_instead(code: str, path: str, saved: str, expression: str) -> str | None:
    """``code`` saving ``expression`` to ``path`` where it saved the name ``saved``."""
    tree = parse(code)
    if tree is None:
        return None
    value = spliced_in(expression)
    edits: list[Edit] = [
        (name.lineno - 1, name.col_offset, name.end_col_offset, value)
        for name in _saves(tree, path)
        if name.id == saved and name.end_col_offset is not None
    ]
    return splice(code, edits) if edits else None


def rows_saved(code: str, path: str, saved: str, table: str) -> str | None:
    """``code`` saving ``table.loc[saved.index]`` to ``path`` where it saved ``saved``."""
    return saved_instead(code, path, saved, f"{table}.loc[{saved}.index]")
