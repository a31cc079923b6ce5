"""Line-oriented text inputs (logs, plain text) for the code-first route: the model is shown how
one line splits into fields (named ones, from the prelude's ``log_fields``, for an access log or
key=value lines), and a program that reads such a file as a table is stopped before
it runs (``pd.read_csv(..., sep=' ')`` on an access log splits its quoted fields at their
spaces and answers with the wrong columns: docs/benchmarks.md)."""

from __future__ import annotations

import re

from fleet_core.engine.inputshape import is_json, json_reader
from fleet_core.engine.loghelpers import LOG_HELPER, log_fields, log_kind
from fleet_core.engine.profile import dataset_preview

#: Inputs these end with are tables or structured documents, read with pandas or json.
STRUCTURED = (".csv", ".tsv", ".json", ".jsonl", ".ndjson", ".geojson", ".parquet", ".xlsx", ".xls")
MAX_FIELDS = 14  # fields of a line shown, at most
FIELD_CHARS = 48  # each field shown, at most
MAX_TEXT_INPUTS = 2

_READER = re.compile(
    r"\b(?:pd|pandas)\s*\.\s*read_(?:csv|table|fwf)\s*\(\s*(?:[rRfFbB]{0,2})(?P<q>['\"])"
    r"(?:\./)?(?P<path>[^'\"]+)(?P=q)"
)

NOT_A_TABLE = (
    "The program was not run: it reads {path} with pandas.{reader}, but {path} is a text file, "
    "not a table (its fields hold spaces and quotes, so a table reader splits them wrongly). "
    "Read it line by line with open() and take each line's fields as shown here:\n{fields}\n"
    "Reply with the whole corrected program only."
)


JSON_NOT_A_TABLE = (
    "The program was not run: it reads {path} with pandas.{reader}, but {path} is JSON, not "
    "a table. Read it with {line} and loop over the records in plain Python.\n"
    "Reply with the whole corrected program only."
)


def text_inputs(manifest: str, paths: list[str]) -> dict[str, str]:
    """The line-oriented text files among ``paths`` (not a table or JSON by their name), each
    with its first non-blank line as the manifest previewed it (files with no preview left out)."""
    found: dict[str, str] = {}
    for path in paths:
        if path.lower().endswith(STRUCTURED) or len(found) >= MAX_TEXT_INPUTS:
            continue
        lines = [line for line in dataset_preview(manifest, path).splitlines() if line.strip()]
        if lines:
            found[path] = lines[0]
    return found


def _clip(field: str) -> str:
    return field if len(field) <= FIELD_CHARS else field[: FIELD_CHARS - 3] + "..."


def _indexed(parts: list[str]) -> str:
    shown = ", ".join(f"[{i}] {_clip(part)!r}" for i, part in enumerate(parts[:MAX_FIELDS]))
    return shown + (f", ... ({len(parts)} fields)" if len(parts) > MAX_FIELDS else "")


def named_fields(line: str) -> str:
    """What the prelude's ``log_fields`` returns for ``line`` (engine/loghelpers.py), as the
    prompt shows it; "" for a line it does not recognize."""
    fields = log_fields(line)
    if not fields:
        return ""
    shown = ", ".join(
        f"{key!r}: {_clip(str(v))!r}" if isinstance(v, str) else f"{key!r}: {v!r}"
        for key, v in list(fields.items())[:MAX_FIELDS]
    )
    return (
        f"It is {log_kind(line)}: {LOG_HELPER}(line), already defined (do not import it), "
        "returns one line's named fields as a dict (None for a line that is not one); for the "
        f"first line it returns:\n  {{{shown}}}\n"
        "Load every line into one table first, a row a line and a column a field, then "
        "answer each question from that table:\n"
        f"  rows = pd.DataFrame([f for line in open(path) if (f := {LOG_HELPER}(line))])"
    )


def split_fields(line: str) -> str:
    """How one line splits on whitespace and, when it quotes fields, on its quote marks."""
    shown = [f"  line.split() -> {_indexed(line.split())}"]
    if line.count('"') >= 2:
        shown.append(f"  line.split('\"') -> {_indexed(line.split(chr(34)))}")
    return "\n".join(shown)


def line_fields(line: str, split_intro: str = "") -> str:
    """How one line splits: into named fields when ``log_fields`` knows its format, else as
    ``split_fields`` shows it (after ``split_intro``)."""
    return named_fields(line) or split_intro + split_fields(line)


def text_block(texts: dict[str, str]) -> str:
    """The first prompt's note on each text input: read by lines, and how its first line splits."""
    return "\n".join(
        f"{path} is text, not a table: read it line by line with open() (not pandas). "
        + line_fields(line, "Its first line splits like this:\n")
        for path, line in texts.items()
    )


def table_reader(code: str, texts: dict[str, str], inputs: list[str] | None = None) -> str | None:
    """The feedback for a program that reads one of the text inputs, or a JSON file among
    ``inputs``, with a pandas table reader (a literal path), or None."""
    for match in _READER.finditer(code):
        path = match.group("path")
        reader = match.group(0).split(".", 1)[1].split("(", 1)[0].strip()
        if path in texts:
            fields = line_fields(texts[path])
            return NOT_A_TABLE.format(path=path, reader=reader, fields=fields)
        if path in (inputs or []) and is_json(path):
            return JSON_NOT_A_TABLE.format(path=path, reader=reader, line=json_reader(path))
    return None
