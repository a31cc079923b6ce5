"""The grouped table saved where a program saved the rows before grouping them
(docs/engine.md#code-first-flex).

Asked for a total per group, a small model often groups correctly for the printed answer
(``grouped = df.groupby("country").sum()``) and then saves the ungrouped rows
(``df.to_csv(path)``), in a continuation step or the first program, and its repairs after the
host's doubt ("82 rows but 5 distinct country values") rewrite what was right (the seed-88 and
seed-69 ``orders_json`` tune transcripts). When the inspection finds an artifact whose group
columns repeat a value, a host cell looks in the program's namespace for a table grouped by
those columns: its group labels are exactly the distinct labels of the saved rows, it holds
every other column saved, and each of those columns is one aggregate (sum, mean, count, min,
max or median) of the saved rows' column by group. Only then is the program mended to save
that table (its group labels as columns, the saved columns in their order) and run again, the
line numbers kept; otherwise the doubt goes to the model as before.
"""

from __future__ import annotations

from fleet_core.engine.rowsrewrites import marked_value, saved_instead

MARK = "@@fleet-grouped "

_SOURCE = r"""
def _fleet_grouped(saved, keys):
    rows = globals().get(saved)
    if type(rows).__name__ != "DataFrame" or not set(keys) <= set(rows.columns):
        print(MARK + json.dumps({}))
        return
    others = [c for c in rows.columns if c not in keys]
    labels = set(rows[keys].astype(str).itertuples(index=False, name=None))

    def flat(table):
        # the candidate with its group labels as columns, or None
        if type(table).__name__ == "Series":
            if table.name not in others or list(table.index.names) != keys:
                return None
            return table.reset_index()
        if type(table).__name__ != "DataFrame":
            return None
        if list(table.index.names) == keys:
            return table.reset_index()
        return table if set(keys) <= set(table.columns) else None

    def aggregates(table):
        if set(table[keys].astype(str).itertuples(index=False, name=None)) != labels:
            return False
        if len(table) != len(labels) or not set(others) <= set(table.columns):
            return False
        by = rows.groupby(keys)
        mine = table.set_index(keys)
        for column in others:
            got = mine[column]
            ways = ("sum", "mean", "count", "min", "max", "median")
            try:
                if not any(_fleet_same(getattr(by[column], w)(), got) for w in ways):
                    return False
            except Exception:
                return False
        return True

    found = {}
    for name, value in list(globals().items()):
        if name.startswith("_") or value is rows:
            continue
        try:
            table = flat(value)
            if table is not None and aggregates(table):
                found = {"name": name, "columns": [str(c) for c in rows.columns]}
                break
        except Exception:
            continue
    print(MARK + json.dumps(found))


def _fleet_same(want, got):
    try:
        want, got = want.sort_index(), got.reindex(want.index)
        return bool(((want - got).abs() <= 0.011 + 1e-9 * want.abs()).all())
    except Exception:
        return want.astype(str).equals(got.reindex(want.index).astype(str))
"""


def grouped_cell(saved: str, keys: tuple[str, ...]) -> str:
    """The host cell that names a table grouped by ``keys`` whose rows aggregate the rows the
    name ``saved`` holds (see the module docstring), or ""."""
    body = _SOURCE.replace("MARK + json.dumps", f"{MARK!r} + __import__('json').dumps")
    return f"{body}\n_fleet_grouped({saved!r}, {list(keys)!r})\ndel _fleet_grouped, _fleet_same"


def parse_grouped(output: str) -> tuple[str, list[str]] | None:
    """The grouped table's name and the saved rows' columns the cell printed, or None."""
    found = marked_value(output, MARK)
    if not isinstance(found, dict):
        return None
    name, columns = found.get("name"), found.get("columns")
    if not (isinstance(name, str) and name.isidentifier() and isinstance(columns, list)):
        return None
    return (name, columns) if all(isinstance(c, str) for c in columns) else None


def grouped_saved(
    code: str, path: str, saved: str, table: str, columns: list[str], keys: tuple[str, ...]
) -> str | None:
    """``code`` saving ``table``'s groups with the saved ``columns`` to ``path`` where it saved
    ``saved`` (the group labels made columns when ``table`` holds them in its index)."""
    flat = f"({table}.reset_index() if {table}.index.names == {list(keys)!r} else {table})"
    return saved_instead(code, path, saved, f"{flat}[{columns!r}]")
