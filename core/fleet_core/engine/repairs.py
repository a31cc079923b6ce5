"""What the code-first host knows about a program beyond "it raised" (no dspy here).

The small-model profile's levers of issue 22 (docs/engine.md#the-small-model-profile), as pure
functions the code-first loop (engine/codefirst.py) calls:

- a reply cut by the output cap is recognized (:func:`looks_cut`) and never run;
- the input tables' column names are shown exactly, quoted, with a dtype read from the preview
  (:func:`columns_block`), and a ``KeyError`` or "does not exist" gets the real columns nearest
  to the one asked for (:func:`column_hint`), or, when exactly one real column is the same name
  up to case, spaces and punctuation, the program is run again with it (:func:`respelled`);
- a program whose printed answer is an error message, or that printed a guard's "does not
  exist" in place of the failing step, is not a success (:func:`hidden_error`);
- a failure seen again gets a different kind of help: the failing line, then the input's real
  shape, then a simpler plan (:func:`failing_line`, :data:`SHAPE_CELL`, :data:`SIMPLER`);
- a program that fails on its own ``raise`` is told the task did not ask for that check
  (:func:`own_raise_hint`);
- a task's stated answer format (``@name[value]``) is followed, and tables print without
  pandas' index column (:func:`format_problem`);
- a program that ran but left work undone is known (:func:`unfinished`), for a continuation;
- two programs' answers agree or not (:func:`same_answer`: the tags' values, else every printed
  figure, within rounding), for ``[engine] small_vote``.
"""

from __future__ import annotations

import ast
import csv
import difflib
import io
import re
from collections.abc import Callable, Mapping

from fleet_core.engine.profile import dataset_preview
from fleet_core.engine.sourceedits import (
    INPUT_READS,
    Edit,
    called_name,
    parse,
    splice,
    spliced_in,
)
from fleet_core.outcomes import error_answer

# --- replies cut by the output cap ---------------------------------------------------------------

CUT_FRACTION = 0.8  # a reply this close to its budget that does not parse was cut
CHARS_PER_TOKEN = 4  # code and CSV, roughly, when the server reports no usage


def estimate_tokens(text: str) -> int:
    """A cautious (high) token count for a prompt: about 3 characters a token."""
    return len(text) // 3 + 1


def _syntax_error_at_end(code: str) -> bool:
    try:
        compile(code, "<reply>", "exec")
    except SyntaxError as exc:
        last = len(code.rstrip().splitlines())
        return (exc.lineno or last) >= last - 1 or "was never closed" in str(exc.msg)
    except ValueError:  # a NUL byte: not a cut, a bad reply
        return False
    return False


def looks_cut(
    reply: str,
    code: str,
    *,
    finish_reason: str | None,
    budget: int | None,
    output_tokens: int | None = None,
) -> bool:
    """Whether a reply stopped for length: the server said so (``finish_reason`` "length"), or
    it used (nearly) its whole budget and ends in an unterminated fence or a SyntaxError at its
    end. A short reply with a broken last line is a real error, for a repair to fix."""
    if finish_reason == "length":
        return True
    text = reply.split("</think>", 1)[-1]
    unterminated = text.count("```") % 2 == 1
    if not (unterminated or (code and _syntax_error_at_end(code))):
        return False
    if budget is None:
        return unterminated
    if output_tokens is not None:
        return output_tokens >= budget - 2
    return len(reply) / CHARS_PER_TOKEN >= CUT_FRACTION * budget


# --- column names, exactly -------------------------------------------------------------------

_INT = re.compile(r"^[+-]?\d+$")
_FLOAT = re.compile(r"^[+-]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?$")
MAX_COLUMNS = 30


def _dtype(values: list[str]) -> str:
    filled = [v.strip() for v in values if v.strip()]
    blanks = " with blanks" if len(filled) < len(values) else ""
    if not filled:
        return "empty"
    if all(_INT.match(v) for v in filled):
        return "int" + blanks
    if all(_FLOAT.match(v) for v in filled):
        return "float" + blanks
    if all(_DATE.match(v) for v in filled):
        return "date text" + blanks
    return "text" + blanks


def csv_columns(preview: str) -> list[tuple[str, str]]:
    """A CSV preview's header names, exactly as written, each with a dtype read from the rows
    shown (int, float, date text, text; "with blanks" when a shown row has none)."""
    lines = [line for line in preview.splitlines() if line.strip()]
    if not lines:
        return []
    try:
        dialect: type[csv.Dialect] | csv.Dialect = csv.Sniffer().sniff(lines[0], ",;\t|")
    except csv.Error:
        dialect = csv.excel
    rows = list(csv.reader(io.StringIO("\n".join(lines)), dialect))
    header, body = rows[0], [r for r in rows[1:] if len(r) == len(rows[0])]
    return [(name, _dtype([r[i] for r in body])) for i, name in enumerate(header[:MAX_COLUMNS])]


def table_columns(manifest: str, paths: list[str]) -> dict[str, list[tuple[str, str]]]:
    """The columns of each CSV/TSV input among ``paths``, read from the manifest's previews."""
    found: dict[str, list[tuple[str, str]]] = {}
    for path in paths:
        if path.lower().endswith((".csv", ".tsv")):
            columns = csv_columns(dataset_preview(manifest, path))
            if columns:
                found[path] = columns
    return found


def columns_block(tables: dict[str, list[tuple[str, str]]]) -> str:
    """``Columns of files/x.csv (exact names, dtype): 'A b' (int), ...``, one line a table."""
    return "\n".join(
        f"Columns of {path} (exact names, dtype): "
        + ", ".join(f"{name!r} ({kind})" for name, kind in columns)
        for path, columns in tables.items()
    )


_KEY_ERROR = re.compile(r"KeyError: ['\"](?P<name>[^'\"]{1,80})['\"]")
_ASKED = (
    re.compile(r"\[Index\(\[['\"](?P<name>[^'\"]{1,80})['\"]"),
    re.compile(r"[Cc]olumn not found: (?P<name>[^'\"\n]{1,80}?)['\"]?$", re.MULTILINE),
    _KEY_ERROR,
    re.compile(r"\[['\"](?P<name>[^'\"]{1,80})['\"]\] not in index"),
    re.compile(
        r"(?:[Cc]olumn|[Kk]ey|[Ff]ield)s?\(?s?\)?\s*\[?['\"](?P<name>[^'\"]{1,80})['\"]\]?\s*"
        r"(?:does not exist|doesn't exist|do not exist|not found|is not)"
    ),
    re.compile(r"['\"](?P<name>[^'\"]{1,80})['\"]\s+(?:does not exist|not found|not in)"),
)


def asked_column(text: str) -> str | None:
    """The column (or key) a failure says is missing, if it names one."""
    for pattern in _ASKED:
        match = pattern.search(text)
        if match is not None:
            return match.group("name")
    return None


def nearest_columns(asked: str, columns: list[str], n: int = 4) -> list[str]:
    """The real columns nearest to ``asked``: same name up to case and spaces first, then
    difflib's closest (on lower-case names)."""
    key = asked.strip().lower()
    same = [c for c in columns if c.strip().lower() == key]
    lowered = {c.lower(): c for c in columns}
    close = [lowered[c] for c in difflib.get_close_matches(key, list(lowered), n=n, cutoff=0.4)]
    ordered = same + [c for c in close if c not in same]
    return ordered[:n]


def _key(name: str) -> str:
    """A column name as a join key is recognized by: lower case, letters and digits only."""
    return re.sub(r"[^0-9a-z]", "", name.lower())


def merge_line(tables: dict[str, list[tuple[str, str]]], holder: str) -> str:
    """How to join the other table to ``holder`` on the one pair of columns whose names agree
    up to case and punctuation (``CustomerID`` and ``customer_id``); the general advice when
    there is not exactly one other table and one such pair."""
    others = [path for path in tables if path != holder]
    pairs = (
        []
        if len(others) != 1
        else [
            (left, right)
            for left, _ in tables[others[0]]
            for right, _ in tables[holder]
            if _key(left) and _key(left) == _key(right)
        ]
    )
    if len(pairs) != 1:
        return " (pd.merge with left_on/right_on for the key columns)."
    left, right = pairs[0]
    return (
        f":\nmerged = pd.read_csv({others[0]!r}).merge(pd.read_csv({holder!r}), "
        f"left_on={left!r}, right_on={right!r})\nthen take every column from merged."
    )


def column_hint(text: str, tables: dict[str, list[tuple[str, str]]]) -> str:
    """For a failure naming a missing column: the real columns nearest to it ("" otherwise)."""
    asked = asked_column(text)
    if asked is None or not tables:
        return ""
    names = [name for columns in tables.values() for name, _ in columns]
    if asked in names:  # a column of another input: the table at hand lacks it
        holders = [p for p, columns in tables.items() if asked in [n for n, _ in columns]]
        if len(tables) < 2:
            return ""
        return (
            f"The column {asked!r} is in {', '.join(holders)}, not in the table that line "
            f"reads: merge the tables first{merge_line(tables, holders[0])}"
        )
    nearest = nearest_columns(asked, names)
    shown = nearest or names[:MAX_COLUMNS]
    label = "The real columns nearest to it" if nearest else "The real columns"
    return (
        f"There is no column {asked!r}. {label}: {', '.join(repr(c) for c in shown)}. "
        "Write the column name exactly as it is (case, spaces, dots and units included)."
    )


def respelled(code: str, error: str, tables: dict[str, list[tuple[str, str]]]) -> str | None:
    """``code`` with a missing column's name written as the one real column it means (the same
    up to case, spaces and punctuation: ``'page_views'`` for ``'Page Views'``) in each one-line
    string literal that spells it so; None when the failure names no such column, or more than
    one real column could be meant, or no literal spells it."""
    asked = asked_column(error)
    names = {name for columns in tables.values() for name, _ in columns}
    if asked is None or asked in names or not _key(asked):
        return None
    meant = [name for name in names if _key(name) == _key(asked)]
    tree = parse(code)
    if len(meant) != 1 or tree is None:
        return None
    spelled = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and node.value == asked and node.lineno == node.end_lineno
    ]
    real = repr(meant[0]).encode()
    edits: list[Edit] = [
        (node.lineno - 1, node.col_offset, node.end_col_offset, lambda _old: real)
        for node in spelled
        if node.end_col_offset is not None
    ]
    return splice(code, edits) if edits else None


_UNDEFINED = re.compile(r"^NameError: name '(?P<name>\w+)' is not defined")


def case_renamed(code: str, error: str) -> str | None:
    """``code`` with an undefined name written as the one name the program itself binds that
    it differs from only in case (``Netherlands[...]`` after ``netherlands = ...``: seed-89
    ``filter_rows``, resent unchanged three times); None otherwise."""
    match = _UNDEFINED.match(error or "")
    tree = parse(code)
    if match is None or tree is None:
        return None
    asked = match.group("name")
    bound = {
        n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }
    meant = [name for name in bound if name.lower() == asked.lower()]
    if asked in bound or len(meant) != 1:
        return None
    edits: list[Edit] = [
        (node.lineno - 1, node.col_offset, node.end_col_offset, spliced_in(meant[0]))
        for node in ast.walk(tree)
        if isinstance(node, ast.Name) and node.id == asked and node.end_col_offset is not None
    ]
    return splice(code, edits) if edits else None


# --- a repair may not hide the error ---------------------------------------------------------

_HIDING = re.compile(
    r"\b(?:does not exist|doesn't exist|do not exist|not found|no such (?:file|column|key)"
    r"|could not|cannot|can't|unable to|not available|an error occurred|failed to)\b"
    r"|^error\b|\berror:",
    re.IGNORECASE,
)
"""A guard's message that stands for a failed step (not "no missing values", "0 errors")."""


def _printed_texts(node: ast.AST) -> list[str]:
    """The literal text of every ``print`` call under ``node`` (f-strings: their text parts)."""
    texts: list[str] = []
    for call in ast.walk(node):
        if not (isinstance(call, ast.Call) and getattr(call.func, "id", None) == "print"):
            continue
        for arg in call.args:
            parts = arg.values if isinstance(arg, ast.JoinedStr) else [arg]
            for part in parts:
                if isinstance(part, ast.Constant) and isinstance(part.value, str):
                    texts.append(part.value.strip())
    return [t for t in texts if len(t) >= 6]


def _guards(tree: ast.AST) -> list[ast.AST]:
    """The fallback branches of a program: ``except`` handlers and ``else`` branches."""
    found: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ExceptHandler):
            found.append(node)
        elif isinstance(node, ast.If) and node.orelse:
            found.extend(node.orelse)
            found.append(node)  # `if col not in df.columns: print("... does not exist")`
    return found


def guarded_print(code: str, output: str) -> str | None:
    """The message a program printed from a guard in place of a failing step ("column does not
    exist" from an ``else`` or an ``except``), if its output holds one."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return None
    for guard in _guards(tree):
        body = guard.body if isinstance(guard, ast.If) else [guard]
        for node in body:
            for text in _printed_texts(node):
                if _HIDING.search(text) and text in output:
                    return text
    return None


def hidden_error(code: str, output: str) -> str | None:
    """Why a program that ran did not answer: its printed answer is an error message (the
    Turn's own rule, ``outcomes.error_answer``), or a guard printed a failure in its place."""
    said = error_answer(output)
    if said is not None:
        return said
    return guarded_print(code, output)


# --- different help for a failure seen again ----------------------------------------------------

_FRAME = re.compile(r'File "<cell-\d+>", line (?P<line>\d+)')


def failing_line(error: str, code: str) -> tuple[int, str] | None:
    """The program's own line that failed (its last frame in the error), with its text."""
    found = _FRAME.findall(error)
    if not found:
        return None
    number = int(found[-1])
    lines = code.splitlines()
    if not 1 <= number <= len(lines):
        return None
    return number, lines[number - 1].strip()


OWN_RAISE = (
    "That error is raised by the program itself (line {number}: {text}). The task does not "
    "ask for that check: remove it and compute what the task asks."
)


def own_raise_hint(error: str, code: str) -> str:
    """For a program that failed on its own ``raise`` statement: the task did not ask for it."""
    located = failing_line(error, code)
    if located is None or not re.match(r"raise\b", located[1]):
        return ""
    return OWN_RAISE.format(number=located[0], text=located[1])


_ACCESSOR = re.compile(r"Can only use \.(?P<accessor>dt|str) accessor with")
_ACCESSED = re.compile(
    r"""\[\s*(?P<q>['"])(?P<column>[^'"]+)(?P=q)\s*\]\s*\.(?P<accessor>dt|str)\b"""
)
ACCESSOR_HINTS = {
    "dt": (
        "The column {column!r} holds text, not dates (a CSV's dates are read as text): "
        "convert it before using .dt: df[{column!r}] = pd.to_datetime(df[{column!r}])"
    ),
    "str": (
        "The column {column!r} does not hold text: use .str only on text, or convert it "
        "first: df[{column!r}].astype(str)"
    ),
}


def _failed_accessor(error: str, code: str) -> tuple[str, int] | None:
    """For pandas' "Can only use .dt (or .str) accessor with ..." error: the accessor and the
    number of the program's line that used it."""
    match = _ACCESSOR.search(error)
    located = failing_line(error, code) if match is not None else None
    if match is None or located is None:
        return None
    return match["accessor"], located[0]


def accessor_hint(error: str, code: str) -> str:
    """For pandas' "Can only use .dt (or .str) accessor with ..." error: the column on the
    failing line holds the other kind of values, and how to convert it."""
    failed = _failed_accessor(error, code)
    if failed is None:
        return ""
    accessor, number = failed
    line = code.splitlines()[number - 1]
    accessed = [m["column"] for m in _ACCESSED.finditer(line) if m["accessor"] == accessor]
    if not accessed:
        return ""
    return ACCESSOR_HINTS[accessor].format(column=accessed[0])


_CONVERTIBLE = re.compile(
    r"""(?P<column>(?<![\w.])[A-Za-z_][\w.]*\[\s*(?P<q>['"])[^'"\n]+(?P=q)\s*\])\s*"""
    r"""\.(?P<accessor>dt|str)\b"""
)
CONVERSIONS = {"dt": "pd.to_datetime({column}).dt", "str": "{column}.astype(str).str"}


def converted_accessor(error: str, code: str) -> str | None:
    """For pandas' "Can only use .dt (or .str) accessor with ..." error: ``code`` with each
    column on the failing line that uses that accessor converted where it is used
    (``pd.to_datetime(df['Date']).dt``, ``df['id'].astype(str).str``), the line numbers kept;
    None when the error is another or the line uses no such column."""
    failed = _failed_accessor(error, code)
    if failed is None:
        return None
    accessor, number = failed

    def convert(m: re.Match[str]) -> str:
        if m["accessor"] != accessor:
            return m.group(0)
        return CONVERSIONS[accessor].format(column=m["column"])

    return _line_changed(code, number, lambda line: _CONVERTIBLE.sub(convert, line))


def _line_changed(code: str, number: int, change: Callable[[str], str]) -> str | None:
    """``code`` with its line ``number`` (1-based) changed by ``change``, the other lines and
    the line numbers kept; None when ``change`` leaves the line as it is."""
    lines = code.splitlines()
    line = lines[number - 1]
    changed = change(line)
    if changed == line:
        return None
    lines[number - 1] = changed
    return "\n".join(lines)


#: pandas 2 aggregates every column unless told ``numeric_only=True``: a date or text column
#: beside the figures fails the whole aggregation.
_NOT_NUMERIC = re.compile(
    r"^TypeError: (?:(?:\w+ type|dtype '[^']+') does not support operation|agg function failed"
    r"|Could not convert\b|can only concatenate str)",
    re.M,
)
_BARE_AGGREGATE = re.compile(r"\.(?P<how>sum|mean|median|std|var|prod)\(\s*\)")


def numeric_only_added(error: str, code: str) -> str | None:
    """For an aggregation that failed on a date or text column (``df.groupby(month).sum()``
    with the date column still in ``df``: seed-89 ``monthly_series``, whose repairs never found
    it): ``code`` with the failing line's bare ``.sum()``, ``.mean()``, ``.median()``,
    ``.std()``, ``.var()`` or ``.prod()`` told ``numeric_only=True``; None otherwise."""
    located = failing_line(error, code) if _NOT_NUMERIC.search(error) else None
    if located is None:
        return None
    return _line_changed(
        code, located[0], lambda line: _BARE_AGGREGATE.sub(r".\g<how>(numeric_only=True)", line)
    )


def grouped_key_kept(error: str, code: str) -> str | None:
    """For ``KeyError: 'k'`` on a line that groups by the column ``k`` (``groupby('k')``, so
    ``k`` went into the index, and the line then reads it as a column), or that reads
    ``v['k']`` of a ``v`` an earlier line assigned so grouped: ``code`` with that grouping
    keeping ``k`` a column (``as_index=False``), the line numbers kept; None when the error is
    another or neither line groups by ``k`` so."""
    match = _KEY_ERROR.search(error)
    located = failing_line(error, code) if match is not None else None
    if match is None or located is None:
        return None
    name, number = match["name"], located[0]
    grouped = re.compile(rf"\.groupby\(\s*(?P<q>['\"]){re.escape(name)}(?P=q)\s*\)")

    def kept(m: re.Match[str]) -> str:
        return f".groupby({m['q']}{name}{m['q']}, as_index=False)"

    def keep(line: str) -> str:
        return grouped.sub(kept, line)

    here = _line_changed(code, number, keep)
    if here is not None:
        return here
    read = re.compile(rf"\b(\w+)\[\s*(['\"]){re.escape(name)}\2\s*\]")
    lines = code.splitlines()
    for variable in dict.fromkeys(read.findall(located[1])):
        assigned = re.compile(rf"^\s*{re.escape(variable[0])}\s*=[^=]")
        line = next((i for i in range(number - 1, 0, -1) if assigned.match(lines[i - 1])), None)
        if line is not None and (fixed := _line_changed(code, line, keep)) is not None:
            return fixed
    return None


_GROUPED_LABEL = re.compile(
    r"^(?P<indent>\s*)(?P<key>\w+)\s*=\s*(?P<frame>\w+)(?P<chain>\.groupby\(.*?)"
    r"(?P<pick>\.index\[\s*-?\d+\s*\]|\.idxmax\(\s*\)|\.idxmin\(\s*\))\s*$"
)
GROUPED_NAME = "grouped"


def grouped_label_read(error: str, code: str) -> str | None:
    """For ``KeyError: 'v'`` where a line looks up a group label in the ungrouped table (``top
    = df.groupby('k').sum()...index[0]``, then ``df.loc[top, 'x']``: ``df``'s row labels are
    0..n-1, ``v`` a value of its column ``k``): ``code`` with the grouped result kept (``grouped
    = df.groupby(...)...; top = grouped.index[0]``, one line) and the lookup reading it (a
    grouped Series is read by its label alone); line numbers kept. None otherwise."""
    match = _KEY_ERROR.search(error)
    located = failing_line(error, code) if match is not None else None
    if located is None or re.search(rf"\b{GROUPED_NAME}\b", code):
        return None
    number, text = located
    lines = code.splitlines()
    found = next(
        (
            (earlier, made, lookup)
            for earlier in range(number - 1, 0, -1)
            if (made := _GROUPED_LABEL.match(lines[earlier - 1])) is not None
            and (lookup := _label_lookup(made["frame"], made["key"])).search(text)
        ),
        None,
    )
    if found is None:
        return None
    earlier, made, lookup = found
    key, frame, chain = made["key"], made["frame"], made["chain"]
    series = re.search(r"\.groupby\(.*?\)\s*\[[^\]]+\]", chain) is not None

    def read(m: re.Match[str]) -> str:
        column = "" if series or m["column"] is None else m["column"]
        return f"{GROUPED_NAME}.{m['by']}[{key}{column}]"

    lines[earlier - 1] = (
        f"{made['indent']}{GROUPED_NAME} = {frame}{chain}; {key} = {GROUPED_NAME}{made['pick']}"
    )
    lines[number - 1] = lookup.sub(read, lines[number - 1])
    return "\n".join(lines)


def _label_lookup(frame: str, key: str) -> re.Pattern[str]:
    """``frame.loc[key]``, ``frame.loc[key, 'column']`` (or ``.at``)."""
    return re.compile(
        rf"\b{re.escape(frame)}\.(?P<by>loc|at)\[\s*{re.escape(key)}\s*"
        r"(?P<column>,\s*(?P<q>['\"])[^'\"\n]+(?P=q)\s*)?\]"
    )


_SERIES_HAS_NO = re.compile(r"AttributeError: 'Series' object has no attribute '(?P<attr>\w+)'")


def table_label(error: str, code: str) -> str | None:
    """For ``AttributeError: 'Series' object has no attribute 'strftime'`` on a line that reads
    an attribute of a table's ``idxmax()`` (or ``idxmin()``; a DataFrame's is a Series, one
    label per column): ``code`` with ``t.idxmax()`` written ``t.squeeze('columns').idxmax()``
    there (a one-column table's label), the line numbers kept; None otherwise."""
    match = _SERIES_HAS_NO.search(error)
    located = failing_line(error, code) if match is not None else None
    if match is None or located is None:
        return None
    read = re.compile(rf"\b(\w+)\.(idxmax|idxmin)\(\s*\)(?=\.{re.escape(match['attr'])}\b)")
    return _line_changed(
        code, located[0], lambda line: read.sub(r"\1.squeeze('columns').\2()", line)
    )


_UNDEFINED = re.compile(r"NameError: name '(?P<name>\w+)' is not defined")


def _input_read(statement: ast.stmt, name: str) -> bool:
    """Whether ``statement`` is ``name = <read>(<literals>)`` on one line, a read of a file."""
    if not (
        isinstance(statement, ast.Assign)
        and [getattr(t, "id", None) for t in statement.targets] == [name]
        and isinstance(statement.value, ast.Call)
        and statement.lineno == statement.end_lineno
    ):
        return False
    call = statement.value
    called = called_name(call)
    arguments = [*call.args, *(k.value for k in call.keywords)]
    literal = all(
        isinstance(a, ast.Constant)
        or (isinstance(a, ast.Call) and getattr(a.func, "id", "") == "open")
        for a in arguments
    )
    return called in INPUT_READS and bool(arguments) and literal


def restored_read(error: str, code: str, earlier: list[str]) -> str | None:
    """For a repair that uses a name it no longer defines (``NameError: name 'df'``) on a
    top-level line, where an earlier program of the Turn read an input into that name
    (``df = pd.read_csv('files/a.csv')``): ``code`` with that read put before the failing
    statement on its line (``df = pd.read_csv(...); df['x'] = ...``), the line numbers kept;
    None otherwise."""
    match = _UNDEFINED.search(error)
    located = failing_line(error, code) if match is not None else None
    if match is None or located is None:
        return None
    lines = code.splitlines()
    line = lines[located[0] - 1]
    if line != line.lstrip():  # inside a block: the read would not run first
        return None
    for source in reversed(earlier):
        tree = parse(source)
        reads = [s for s in (tree.body if tree else []) if _input_read(s, match["name"])]
        if reads:
            lines[located[0] - 1] = f"{ast.get_source_segment(source, reads[-1])}; {line}"
            return "\n".join(lines)
    return None


_NOT_DATED = re.compile(r"Only valid with DatetimeIndex, TimedeltaIndex or PeriodIndex")
#: Groupings by time that take the dates' column by a keyword (else they use the index).
DATED_KEYWORDS = {"Grouper": "key", "resample": "on"}


def dated_grouping(error: str, code: str, tables: dict[str, list[tuple[str, str]]]) -> str | None:
    """For pandas' "Only valid with DatetimeIndex ..." (``pd.Grouper(freq='ME')`` or
    ``df.resample('ME')`` on a table whose dates are a column, not its index): ``code`` with
    the one date column of the inputs named in each such call on the failing line
    (``pd.Grouper(freq='ME', key='Date')``, ``resample('ME', on='Date')``); None when the
    inputs hold no date column or more than one."""
    located = failing_line(error, code) if _NOT_DATED.search(error) else None
    dates = {name for columns in tables.values() for name, kind in columns if "date" in kind}
    tree = parse(code) if located is not None and len(dates) == 1 else None
    if located is None or tree is None:
        return None
    column = repr(dates.pop())
    edits: list[Edit] = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and node.lineno == node.end_lineno == located[0]):
            continue
        keyword = DATED_KEYWORDS.get(called_name(node))
        if (
            keyword is None
            or any(k.arg == keyword for k in node.keywords)
            or node.end_col_offset is None
        ):
            continue
        if not (node.args or node.keywords):
            continue
        end = node.end_col_offset - 1  # the closing parenthesis
        edits.append((node.lineno - 1, end, end, spliced_in(f", {keyword}={column}")))
    return splice(code, edits) if edits else None


#: A host cell that prints what each input really holds (run in the sandbox, after the prelude).
SHAPE_CELL = """
def _fleet_shape(paths):
    import json as _j
    for _p in paths:
        try:
            if _p.lower().endswith(('.csv', '.tsv')):
                _d = pd.read_csv(_p, sep=None, engine='python', nrows=2000)
                print(f"{_p}: {_d.shape[0]} rows read (of at most 2000), columns and dtypes:")
                print(', '.join(f"{c!r}: {t}" for c, t in _d.dtypes.astype(str).items()))
                print(_d.head(3).to_string(index=False)[:600])
            elif _p.lower().endswith('.json'):
                _v = _j.load(open(_p))
                _first = _v[0] if isinstance(_v, list) and _v else _v
                _n = f" of {len(_v)} items" if isinstance(_v, (list, dict)) else ""
                print(f"{_p}: a JSON {type(_v).__name__}{_n}")
                print('first item:', _j.dumps(_first)[:500])
            else:
                with open(_p, errors='replace') as _f:
                    print(f"{_p}: first lines:")
                    for _i, _l in zip(range(4), _f):
                        print(_l.rstrip()[:160])
        except Exception as _e:
            print(f"{_p}: could not be read here ({type(_e).__name__})")
_fleet_shape(PATHS)
del _fleet_shape
"""

SIMPLER = (
    "Start again with a simpler plan: read the input, then compute each figure the task asks "
    "for in its own short step (one operation per line, no try/except, no functions, no "
    "checks that print a message instead of the result), write the named files and print "
    "the figures."
)


# --- the answer's format ---------------------------------------------------------------------

_TAG = re.compile(r"@(?P<name>[A-Za-z_]\w{0,40})\[(?P<value>[^\]]*)\]")
_PLACEHOLDER = re.compile(r"^\s*(?:value|\.\.\.|x|n|yes or no|YYYY-MM(?:-DD)?|\{.*\})?\s*$", re.I)
#: A label joined to itself (``CanadaCanadaCanada``: a text column summed by a groupby).
_REPEATED = re.compile(r"^(?P<unit>(?=[^\n]*[A-Za-z])[^\n]{2,40}?)(?P=unit){2,}$")
_INDEXED = re.compile(r"^(?P<n>\d+)\s{2,}\S")


#: A printed value that is no value: NaN, None, an infinity, or punctuation only (a log's "-").
_DEGENERATE = re.compile(r"^\s*(?:[-+]?nan|none|null|nat|[-+]?inf(?:inity)?|[\W_]+)\s*$", re.I)
_DATE_LETTERS = re.compile(r"^(?=.*[YMDHhms])[YMDHhms]+(?:[-/:. T][YMDHhms]+)*$")


def placeholder_shape(placeholder: str) -> tuple[str, re.Pattern[str]] | None:
    """What a task's bracket text says its value looks like (``N``: a whole number;
    ``YYYY-MM``: that date shape; ``yes or no``; ``/path``: starting with ``/``; a number: a
    number), or None when it says nothing checkable (``value``, ``...``, a word)."""
    text = placeholder.strip()
    if text in ("N", "n", "K", "k"):
        return "a whole number", re.compile(r"^[+-]?\d+(?:\.0+)?$")
    if _DATE_LETTERS.match(text) and len(text) >= 4:
        pattern = "".join(r"\d" if c.isalpha() else re.escape(c) for c in text)
        return f"shaped {text}", re.compile(f"^{pattern}$")
    if text.casefold() == "yes or no":
        return "yes or no", re.compile(r"^(?:yes|no)$", re.I)
    if len(text) >= 2 and text[0] in "/#$" and text[1:].isalpha():
        return f"a value starting with {text[0]!r}", re.compile(f"^{re.escape(text[0])}")
    if _FLOAT.match(text):
        return "a number", re.compile(r"^[-+]?(?:\d[\d,]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?%?$")
    return None


def answer_tags(task: str) -> list[str]:
    """The ``@name[...]`` placeholders a task asks the answer to hold, in order."""
    names: list[str] = []
    for match in _TAG.finditer(task):
        if match.group("name") not in names:
            names.append(match.group("name"))
    return names


def _fstring(tags: list[str]) -> str:
    """``print(f"@r[{r}] @p_value[{p_value}]")``: the format as code a model completes (shown
    as ``@r[...]`` it was copied literally)."""
    return 'print(f"' + " ".join(f"@{t}[{{{t}}}]" for t in tags) + '")'


def format_line(task: str) -> str:
    """The first prompt's reminder of the task's answer format ("" when it states none)."""
    tags = answer_tags(task)
    if not tags:
        return ""
    return (
        f"The answer format: end the program with {_fstring(tags)}, each variable holding "
        "the computed value (nothing else inside the brackets: no name, no unit, no dict), "
        "rounded as the task says."
    )


def printed_index(output: str) -> bool:
    """Whether the output shows a pandas table with its index column (``0  East  1348.5``)."""
    run = 0
    for line in output.splitlines():
        match = _INDEXED.match(line)
        if match is not None and int(match.group("n")) == run:
            run += 1
            if run >= 2:
                return True
        elif match is None:
            run = 0
    return False


def format_problem(task: str, output: str, earlier: Mapping[str, str] | None = None) -> str | None:
    """What the printed answer misses of the task's stated format, or a table's index column
    (``earlier``: each tag's value that an earlier program printed in the wrong shape)."""
    found = tag_values(output)
    missing = [t for t in answer_tags(task) if t not in found]
    if missing:
        return f"it does not print the task's format: end it with {_fstring(missing)}"
    asked = tag_values(task)
    empty = unfilled_tags(task, output)
    if empty:
        return (
            "it prints no computed value in "
            + " ".join(f"@{t}[...]" for t in empty)
            + f": print the variables, {_fstring(empty)}"
        )
    degenerate = [t for t in answer_tags(task) if _DEGENERATE.match(found[t])]
    if degenerate:
        shown = " ".join(f"@{t}[{found[t]}]" for t in degenerate)
        return (
            f"{shown} holds no real value: a step on the way gave nothing (a field or column "
            "read from the wrong place, missing values not dropped, text not converted to "
            "numbers, or a filter that matched no row); find that step and compute the value"
        )
    repeated = {t: m for t in answer_tags(task) if (m := _REPEATED.match(found[t]))}
    if repeated:
        return "; ".join(
            f"@{t}[{_clipped(found[t], 40)}] holds {m.group('unit')!r} repeated "
            f"{len(found[t]) // len(m.group('unit'))} times: a column of text was summed "
            "(a groupby's .sum() over the group's own column or another text column joins its "
            "strings); sum only the figure's column, df.groupby(key, as_index=False)[figure]"
            ".sum()"
            for t, m in repeated.items()
        )
    shapes = misshapen(task, output)
    if shapes:
        return "; ".join(
            f"@{t}[{found[t]}] is not {what}, as the task's @{t}[{asked[t]}] asks: the "
            "program computed another quantity; fix the step that computes it, not the print"
            for t, what in shapes.items()
        )
    shaped = hand_shaped(output, earlier)
    if shaped:
        return "; ".join(
            f"@{t}[{found[t]}] is the earlier {old} with the shape's characters added "
            f"by hand: the value is still not {asked.get(t, 'what the task asks')!r}; compute "
            "it from the data (the field that holds values of that kind)"
            for t, old in shaped.items()
        )
    if printed_index(output):
        return (
            "it prints a table with pandas' index column (0, 1, 2, ...); print it without: "
            "print(table.to_string(index=False))"
        )
    return None


def unfilled_tags(task: str, output: str) -> list[str]:
    """The task's tags that ``output`` prints holding no computed value: a generic placeholder
    (``value``, ``...``) or the task's own bracket text copied (``@worst_path[/path]``)."""
    asked, found = tag_values(task), tag_values(output)
    return [
        t
        for t in answer_tags(task)
        if t in found and (_PLACEHOLDER.match(found[t]) or found[t] == asked.get(t))
    ]


def _clipped(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def misshapen(task: str, output: str) -> dict[str, str]:
    """The printed tags whose value is not of the shape the task's bracket text says, each with
    what that shape is (:func:`placeholder_shape`)."""
    asked, found = tag_values(task), tag_values(output)
    return {
        t: want[0]
        for t in answer_tags(task)
        if t in found
        and (want := placeholder_shape(asked.get(t, ""))) is not None
        and not want[1].match(found[t].strip("'\""))
    }


def _bare(value: str) -> str:
    return re.sub(r"\W+", "", value).lower()


def hand_shaped(output: str, earlier: Mapping[str, str] | None) -> dict[str, str]:
    """The tags printed in the right shape now whose value is the one an earlier program
    printed in the wrong shape, with only punctuation added (``200`` resent as ``/200``)."""
    found = tag_values(output)
    return {
        t: old
        for t, old in (earlier or {}).items()
        if t in found and found[t] != old and _bare(found[t]) == _bare(old) and _bare(old)
    }


def missing_tags(task: str, output: str) -> list[str]:
    """The task's ``@name[...]`` tags the output does not print, when it prints at least one of
    them (a partial answer: the program did some of the work; none printed is a format miss)."""
    tags = answer_tags(task)
    printed = {m.group("name") for m in _TAG.finditer(output)}
    missing = [t for t in tags if t not in printed]
    return missing if len(missing) < len(tags) else []


def unfinished(task: str, output: str, unwritten: list[str]) -> str:
    """What a program that ran cleanly left undone ("" when nothing): the named artifacts it
    did not write and the tags it did not print (:func:`missing_tags`)."""
    parts: list[str] = []
    if unwritten:
        parts.append("it did not write " + ", ".join(unwritten))
    tags = missing_tags(task, output)
    if tags:
        parts.append(f"it does not print {' '.join(f'@{t}[...]' for t in tags)}: {_fstring(tags)}")
    return "; ".join(parts)


# --- two programs' answers compared ---------------------------------------------------------

_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?(?![\w])")


def figures(text: str) -> list[str]:
    """The numbers an answer prints, as written (``1,348.5`` read as ``1348.5``)."""
    return _NUMBER.findall(re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", text))


def _decimals(number: str) -> int:
    mantissa = number.lower().split("e", 1)[0]
    return len(mantissa.split(".", 1)[1]) if "." in mantissa else 0


def same_number(a: str, b: str) -> bool:
    """Whether two printed numbers are the same figure within the coarser one's rounding
    (``0.41`` and ``0.4123``; ``150`` and ``150.4``; not ``0.41`` and ``0.42``)."""
    x, y = float(a), float(b)
    tolerance = 0.5 * 10.0 ** -min(_decimals(a), _decimals(b))
    return abs(x - y) <= tolerance + 1e-9 * max(abs(x), abs(y), 1.0)


def _same_figures(a: list[str], b: list[str]) -> bool:
    if len(a) != len(b):
        return False
    key = float
    return all(
        same_number(x, y) for x, y in zip(sorted(a, key=key), sorted(b, key=key), strict=True)
    )


def tag_values(text: str) -> dict[str, str]:
    """Each ``@name[value]`` tag of ``text`` by name, its value stripped (the last one wins)."""
    return {m.group("name"): m.group("value").strip() for m in _TAG.finditer(text)}


def same_answer(task: str, first: str, second: str) -> bool:
    """Whether two programs' answers agree: the values of the task's ``@name[...]`` tags (numbers
    within rounding, labels in any case), or, when it states no tags, every printed figure (the
    output and the artifacts' heads) as a multiset, within rounding."""
    tags = answer_tags(task)
    if tags:
        one, two = tag_values(first), tag_values(second)
        for tag in tags:
            x, y = one.get(tag), two.get(tag)
            if x is None or y is None:
                return False
            numbers = figures(x), figures(y)
            if numbers[0] or numbers[1]:
                if not _same_figures(*numbers):
                    return False
            elif x.strip(" '\"").casefold() != y.strip(" '\"").casefold():
                return False
        return True
    return _same_figures(figures(first), figures(second))
