"""One-line edits of a program's source that keep its line numbers (engine/rewrites.py,
engine/fitrewrites.py)."""

from __future__ import annotations

import ast
from collections.abc import Callable

#: One change to a program's source: line index, start and end byte, and the new bytes made
#: from the old ones.
Edit = tuple[int, int, int, Callable[[bytes], bytes]]


def splice(code: str, edits: list[Edit]) -> str:
    """``code`` with each one-line edit applied to its UTF-8 bytes, the later ones first so that
    the earlier offsets hold: the line numbers stay."""
    lines = [line.encode("utf-8") for line in code.splitlines()]
    for row, start, end, change in sorted(edits, key=lambda e: e[:3], reverse=True):
        line = lines[row]
        lines[row] = line[:start] + change(line[start:end]) + line[end:]
    return "\n".join(line.decode("utf-8") for line in lines)


def parse(code: str) -> ast.Module | None:
    try:
        return ast.parse(code)
    except SyntaxError:
        return None


def spliced_in(text: str) -> Callable[[bytes], bytes]:
    """An edit's change that puts ``text`` where its span was (an empty span: inserts it)."""
    return lambda _old: text.encode()


def receiver(call: ast.Call) -> ast.expr | None:
    """What a method call is called on: ``df`` in ``df.f(x)``; None for a plain ``f(x)``."""
    return call.func.value if isinstance(call.func, ast.Attribute) else None


#: Calls that read an input file into a value (``pd.read_csv('files/a.csv')``).
INPUT_READS = frozenset(
    {"read_csv", "read_table", "read_json", "read_excel", "read_parquet", "read_fwf", "load"}
)


def called_name(call: ast.Call) -> str:
    """The name a call calls: ``f`` in ``f(x)`` and ``m.f(x)``; "" for anything else."""
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
