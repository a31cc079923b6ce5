"""The inputs' structure beyond their preview, for the code-first first prompt (docs/engine.md).

A preview shows a JSON file's first record only, and a JSON Lines file looks like one: a small
model reads it with ``json.load`` (``Extra data``) or assumes every record has every key
(``KeyError`` on the first record that lacks one). ``json_structure`` reads the file once and
says how to read it, how many records it holds, and each key with its types and, where not
every record has it, how many do; an object or a list of objects one level down is shown with
its own keys. A table's preview shows its first rows only: ``table_structure`` says how many
rows it has and which columns have missing values, as pandas reads them. The code-first host
runs this file's source in a host cell in the sandbox (where the workspace is), in a namespace
of its own, so it imports only ``csv``, ``json`` and ``os``.
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path
from typing import Any

MAX_BYTES = 20_000_000  # a larger input is not read for its structure
MAX_RECORDS = 5_000  # records read for their keys, at most
MAX_KEYS = 24  # keys shown per level, at most
MAX_NESTED_KEYS = 10  # keys shown of an object one level down
MAX_CHARS = 1_200  # one input's structure, at most
JSON_LINES = (".jsonl", ".ndjson")
JSON_FILES = (".json", ".geojson", *JSON_LINES)
TABLES = (".csv", ".tsv")
MAX_MISSING_SHOWN = 12  # columns with missing values named, at most
#: The cells pandas' read_csv reads as missing by default (its ``na_values``).
PANDAS_NA = frozenset(
    [
        "",
        "#N/A",
        "#N/A N/A",
        "#NA",
        "-1.#IND",
        "-1.#QNAN",
        "-NaN",
        "-nan",
        "1.#IND",
        "1.#QNAN",
        "<NA>",
        "N/A",
        "NA",
        "NULL",
        "NaN",
        "None",
        "n/a",
        "nan",
        "null",
    ]
)
_FUTURE = "from __future__ import annotations\n"


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float, str)):
        return type(value).__name__
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "list"
    return type(value).__name__


def _key_stats(records: list[dict[str, Any]]) -> dict[str, tuple[int, list[str], list[Any]]]:
    """Each key in first-seen order: how many records have it, its kinds, its values."""
    stats: dict[str, tuple[int, list[str], list[Any]]] = {}
    for record in records:
        for key, value in record.items():
            count, kinds, values = stats.get(key, (0, [], []))
            kind = _kind(value)
            if kind not in kinds:
                kinds.append(kind)
            values.append(value)
            stats[key] = (count + 1, kinds, values)
    return stats


def _nested(kinds: list[str], values: list[Any]) -> str:
    """What an object or a list value holds, one level down ("" for a scalar)."""
    objects = [v for v in values if isinstance(v, dict)]
    if "object" in kinds and objects:
        return " with " + _keys_line(objects, MAX_NESTED_KEYS, nested=False)
    items = [item for v in values if isinstance(v, list) for item in v]
    if "list" not in kinds or not items:
        return ""
    item_objects = [item for item in items if isinstance(item, dict)]
    if item_objects:
        return " of objects with " + _keys_line(item_objects, MAX_NESTED_KEYS, nested=False)
    item_kinds = sorted({_kind(item) for item in items})
    return " of " + " or ".join(item_kinds)


def _keys_line(records: list[dict[str, Any]], limit: int, *, nested: bool) -> str:
    """``'a': int, 'b': str or null (in 40 of 50)``; objects and lists of the first level are
    shown with their own keys when ``nested``."""
    total = len(records)
    shown: list[str] = []
    stats = _key_stats(records)
    for key, (count, kinds, values) in list(stats.items())[:limit]:
        text = f"{key!r}: " + " or ".join(kinds)
        if nested:
            text += _nested(kinds, values)
        if count < total:
            text += f" (in {count} of {total})"
        shown.append(text)
    more = f"{len(stats)} keys, the first {limit}: " if len(stats) > limit else ""
    return more + "{" + ", ".join(shown) + "}"


def _json_lines(path: str) -> tuple[list[Any], int]:
    """The values of a JSON Lines file's first ``MAX_RECORDS`` lines, and how many lines of
    those were not JSON."""
    values: list[Any] = []
    bad = 0
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            if not line.strip():
                continue
            if len(values) + bad >= MAX_RECORDS:
                break
            try:
                values.append(json.loads(line))
            except ValueError:
                bad += 1
    return values, bad


def _records(records: list[Any]) -> str:
    """What a file's records are and their objects' keys (after the file's own description)."""
    objects = [r for r in records if isinstance(r, dict)]
    if not objects:
        return " (values: " + (" or ".join(sorted({_kind(r) for r in records})) or "none") + ")"
    others = len(records) - len(objects)
    note = f" ({others} of them are not objects)" if others else ""
    return f"{note}. Each object's keys: " + _keys_line(objects, MAX_KEYS, nested=True)


def json_reader(path: str) -> str:
    """The line that reads a JSON (``data``) or JSON Lines (``records``) file."""
    if path.lower().endswith(JSON_LINES):
        return f"records = [json.loads(line) for line in open({path!r}) if line.strip()]"
    return f"data = json.load(open({path!r}))"


def _described(path: str) -> tuple[str, str]:
    """What ``path`` holds, and how to read it."""
    reader = json_reader(path)
    if path.lower().endswith(JSON_LINES):
        values, bad = _json_lines(path)
        read = len(values) + bad
        count = f"its first {read} lines read" if read >= MAX_RECORDS else f"{len(values)} values"
        what = f"JSON Lines, one value a line: {count}"
        if bad:
            what += (
                f" ({bad} more {'line is' if bad == 1 else 'lines are'} not JSON: skip such lines)"
            )
        return what + _records(values), reader
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)
    if isinstance(data, list):
        return f"a JSON list of {len(data)} items" + _records(data[:MAX_RECORDS]), reader
    if isinstance(data, dict):
        return "a JSON object. Its keys: " + _keys_line([data], MAX_KEYS, nested=True), reader
    return f"a single JSON {_kind(data)}", reader


def json_structure(path: str) -> str:
    """How to read ``path`` and what its records hold, within ``MAX_CHARS``."""
    try:
        size = os.path.getsize(path)
        if size > MAX_BYTES:
            return f"{path}: {size} bytes, too large to read for its structure"
        what, reader = _described(path)
    except (OSError, ValueError) as error:
        return f"{path}: not readable as JSON ({type(error).__name__}: {str(error)[:120]})"
    text = f"{path}: read it with {reader}\n  It is {what}"
    return text if len(text) <= MAX_CHARS else text[: MAX_CHARS - 3] + "..."


def _delimiter(handle: Any, path: str) -> str:
    """The table's field separator: sniffed from its start (``,``, ``;``, tab or ``|``)."""
    sample = handle.read(4_096)
    handle.seek(0)
    try:
        return str(csv.Sniffer().sniff(sample, delimiters=",;\t|").delimiter)
    except csv.Error:
        return "\t" if path.lower().endswith(".tsv") else ","


def table_structure(path: str) -> str:
    """How many rows a CSV or TSV table has and how many cells of each column are missing."""
    try:
        size = os.path.getsize(path)
        if size > MAX_BYTES:
            return ""
        with open(path, encoding="utf-8", errors="replace", newline="") as handle:
            rows = csv.reader(handle, delimiter=_delimiter(handle, path))
            header = next(rows, [])
            missing = [0] * len(header)
            count = 0
            for row in rows:
                count += 1
                for index in range(len(header)):
                    if index >= len(row) or row[index] in PANDAS_NA:
                        missing[index] += 1
    except (OSError, csv.Error):
        return ""
    gaps = [(name, n) for name, n in zip(header, missing, strict=True) if n]
    if not gaps:
        return f"{path}: {count} rows, no missing values"
    named = ", ".join(f"{name!r} {n}" for name, n in gaps[:MAX_MISSING_SHOWN])
    more = (
        f" and {len(gaps) - MAX_MISSING_SHOWN} more columns"
        if len(gaps) > MAX_MISSING_SHOWN
        else ""
    )
    return f"{path}: {count} rows; missing values (as pandas reads them) in {named}{more}"


def input_structures(paths: list[str]) -> str:
    """The structure of each JSON, JSON Lines or table input among ``paths``, a paragraph each."""
    found: list[str] = []
    for path in paths:
        lower = path.lower()
        shown = json_structure(path) if lower.endswith(JSON_FILES) else ""
        shown = table_structure(path) if lower.endswith(TABLES) else shown
        if shown:
            found.append(shown)
    return "\n".join(found)


def is_json(path: str) -> bool:
    return path.lower().endswith(JSON_FILES)


def has_structure(path: str) -> bool:
    """Whether ``input_structures`` says anything of ``path`` (by its name)."""
    return path.lower().endswith((*JSON_FILES, *TABLES))


def structure_cell(paths: list[str]) -> str:
    """A host cell printing ``input_structures(paths)``: this file's source run in a namespace
    of its own, so the program's names stay as they were."""
    source = Path(__file__).read_text(encoding="utf-8").replace(_FUTURE, "")
    return (
        f"_fleet_shape = {{}}\nexec({source!r}, _fleet_shape)\n"
        f"print(_fleet_shape['input_structures']({paths!r}))\ndel _fleet_shape"
    )
