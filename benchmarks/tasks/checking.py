"""Tolerant reading of answers and artifacts, shared by the families' checkers.

Numbers match within a tolerance (thousands separators, ``$``/``%`` and scientific notation
allowed), labels match case-insensitively with their whitespace collapsed, JSON keys match
ignoring case and punctuation (``p_value`` = ``p-value`` = ``pValue``), CSV artifacts may use
any column order, header or delimiter. An answer's ``@name[value]`` tags are read by name.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

_NUMBER = re.compile(r"(?<![\w.])-?(?:\d[\d,]*(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?")
_TAG = re.compile(r"@\s*([A-Za-z_][\w .-]*?)\s*\[([^\]\n]*)\]")
_YES = {"yes", "true", "1", "y", "significant"}
_NO = {"no", "false", "0", "n", "not significant"}


def norm(label: object) -> str:
    """A label as compared: lower case, quotes and surrounding space dropped, spaces collapsed."""
    return " ".join(str(label).strip().strip("'\"`").lower().split())


def key(name: object) -> str:
    """A field name as compared: lower case letters and digits only."""
    return re.sub(r"[^a-z0-9]", "", str(name).lower())


def close(got: float | None, expected: float, tol: float, rel: float = 0.0) -> bool:
    return got is not None and abs(got - expected) <= tol + rel * abs(expected)


def number(text: object, *, lenient: bool = False) -> float | None:
    """One cell or tag value as a number (``$1,234.50``, ``12 %``, ``1.2e-05``), else None;
    ``lenient``: also a text holding exactly one number (``0.12 kg``, ``p = 0.03``)."""
    cleaned = re.sub(r"[\s$€£%,]", "", str(text)).rstrip(".")
    try:
        value = float(cleaned)
    except ValueError:
        if lenient:
            found = {m.replace(",", "") for m in _NUMBER.findall(str(text))}
            return number(found.pop()) if len(found) == 1 else None
        return None
    return value if value == value else None  # NaN is no number


def numbers(text: str) -> list[float]:
    """Every number in a text; ``1,234.5`` counts both as 1234.5 and as 1 and 234.5."""
    found: list[float] = []
    for match in _NUMBER.findall(text):
        pieces = [match.replace(",", "")] + (match.split(",") if "," in match else [])
        for piece in pieces:
            value = number(piece)
            if value is not None:
                found.append(value)
    return found


def missing_numbers(
    answer: str, expected: Mapping[str, float], tol: float, rel: float = 0.0
) -> list[str]:
    """The names of ``expected`` whose value the answer does not state (within ``tol``)."""
    said = numbers(answer)
    return [k for k, v in expected.items() if not any(close(n, v, tol, rel) for n in said)]


def tags(answer: str) -> dict[str, str]:
    """The answer's ``@name[value]`` tags by :func:`key` of the name (the last one wins)."""
    return {key(name): value.strip().strip("'\"`") for name, value in _TAG.findall(answer)}


def flag(value: object) -> bool | None:
    """A yes/no value (``yes``, ``True``, ``1`` / ``no``, ``false``, ``0``), else None."""
    if isinstance(value, bool):
        return value
    text = norm(value)
    return True if text in _YES else False if text in _NO else None


def check_tags(
    answer: str,
    expected: Mapping[str, Any],
    tol: Mapping[str, float] | float,
    *,
    rel: float = 0.0,
) -> str | None:
    """None when every expected tag is present and right; else what is wrong. Numbers within
    their tolerance, booleans as yes/no, anything else as a case-insensitive label."""
    found = tags(answer)
    wrong = []
    for name, want in expected.items():
        got = found.get(key(name))
        if got is None:
            wrong.append(f"@{name}[...] missing")
            continue
        if isinstance(want, bool):
            ok = flag(got) is want
        elif isinstance(want, int | float):
            limit = tol if isinstance(tol, int | float) else tol.get(name, 0.0)
            ok = close(number(got, lenient=True), float(want), limit, rel)
        else:
            ok = same_label(got, str(want))
        if not ok:
            wrong.append(f"@{name}[{got}] (expected {want})")
    return "; ".join(wrong) if wrong else None


def same_label(got: object, want: str) -> bool:
    return norm(got) == norm(want)


def table(data: bytes) -> list[list[str]]:
    """A CSV artifact's non-empty rows, cells stripped; ``;`` or tab delimiters are accepted."""
    text = data.decode("utf-8-sig", "replace")
    first = text.split("\n", 1)[0]
    delimiter = max((",", ";", "\t"), key=first.count)
    rows = csv.reader(io.StringIO(text), delimiter=delimiter)
    return [cells for cells in ([c.strip() for c in row] for row in rows) if any(cells)]


def check_ids(data: bytes | None, ids: Iterable[str], known: set[str], noun: str) -> str | None:
    """The problem with a CSV artifact that must hold exactly the rows of ``ids`` (told apart
    from the input's other rows by the ``known`` ids in any of its cells), or None."""
    if data is None:
        return "no artifact"
    got = sorted(cell for row in table(data) for cell in row if cell in known)
    want = sorted(ids)
    if got == want:
        return None
    differ = sorted(set(got) ^ set(want))[:5]
    return f"artifact: {len(got)} {noun}, expected {len(want)} (differ: {differ})"


def labelled_rows(rows: list[list[str]], labels: Iterable[str]) -> dict[str, list[list[float]]]:
    """For each row whose cells include one of ``labels`` (compared by :func:`norm`): the
    numbers of its other cells, one list per such row, under the label as given."""
    wanted = {norm(label): label for label in labels}
    found: dict[str, list[list[float]]] = {}
    for row in rows:
        for index, cell in enumerate(row):
            label = wanted.get(norm(cell))
            if label is not None:
                rest = [number(c) for i, c in enumerate(row) if i != index]
                found.setdefault(label, []).append([n for n in rest if n is not None])
                break
    return found


def check_grouped(
    data: bytes | None,
    expected: Mapping[str, float | tuple[float, ...]],
    tol: float,
    *,
    rel: float = 0.0,
) -> str | None:
    """None when a CSV artifact has one row per expected label holding its figure(s) (each
    within ``tol``, in any column) and no other row with figures; else what is wrong."""
    if data is None:
        return "no artifact"
    rows = table(data)
    found = labelled_rows(rows, expected)
    wrong = []
    for label, want in expected.items():
        figures = want if isinstance(want, tuple) else (want,)
        seen = found.get(label, [])
        if len(seen) != 1:
            wrong.append(f"{label}: {len(seen)} rows")
        elif not all(any(close(n, f, tol, rel) for n in seen[0]) for f in figures):
            wrong.append(f"{label}: {seen[0]} (expected {list(figures)})")
    labels = {norm(label) for label in expected}
    extra = [
        row
        for row in rows
        if not any(norm(c) in labels for c in row) and any(number(c) is not None for c in row)
    ]
    if extra:
        wrong.append(f"rows for no expected label: {extra[:3]}")
    return "artifact: " + "; ".join(wrong) if wrong else None


def load_json(data: bytes | None) -> Any:
    """A JSON artifact's value, or None when it is absent or not JSON."""
    if data is None:
        return None
    try:
        return json.loads(data.decode("utf-8-sig", "replace"))
    except ValueError:
        return None


def json_fields(value: Any) -> dict[str, Any]:
    """A JSON object's fields by :func:`key` (a list holding one object counts as the object)."""
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    return {key(k): v for k, v in value.items()} if isinstance(value, dict) else {}


def check_json_fields(
    data: bytes | None,
    expected: Mapping[str, Any],
    tol: Mapping[str, float] | float,
    *,
    rel: float = 0.0,
) -> str | None:
    """None when a JSON artifact's object has every expected field right; else what is wrong."""
    value = load_json(data)
    if value is None:
        return "no artifact" if data is None else "artifact is not JSON"
    fields = json_fields(value)
    wrong = []
    for name, want in expected.items():
        got = fields.get(key(name))
        if isinstance(want, bool):
            ok = flag(got) is want
        else:
            limit = tol if isinstance(tol, int | float) else tol.get(name, 0.0)
            ok = close(number(got) if got is not None else None, float(want), limit, rel)
        if not ok:
            wrong.append(f"{name}={got!r} (expected {want})")
    return "artifact: " + "; ".join(wrong) if wrong else None


def first_problem(*problems: str | None) -> str | None:
    return next((p for p in problems if p), None)
