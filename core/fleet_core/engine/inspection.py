"""The host's look at the artifacts a code-first program wrote: one host cell per attempt.

The cell runs in the sandbox (the files are there) and prints one marked JSON line: for each
file the task names, its sha256 (absent: not written), its first lines (the answer shows them),
a *problem* the program must repair (a JSON artifact that does not parse or lacks the task's
template keys) and a *doubt* the host raises until the same program is sent again, since the
content may be meant: the file is empty (or a CSV header with no rows), or a copy of every line
of an input, or one column of numbers without their labels, or, where the task asks for a figure
per group, one row (every row in one group) or about one row per input line (every line its own
group); where it asks for rows with all their columns, a CSV lacking some of its input's
columns (and then no per-group doubt: such rows are not groups); where it is about duplicates
or things typed differently, rows whose text differs only in case, spaces or punctuation and
that agree on every categorical column (docs/engine.md#code-first-flex).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

MARK = "@@fleet-inspect "
HEAD_LINES = 12  # of each artifact, for the answer
SHAPE_SAMPLE_CHARS = 200  # of a misshapen JSON artifact, in the repair message
CHECK_BYTES = 4_000_000  # read of an artifact or input for the checks (the hash reads it all)
INPUTS_MAX = 10  # inputs compared with an artifact
PER_LINE_MIN = 8  # groups, at least, before a table of about one group per input line is doubted

_SOURCE = r"""
def _fleet_inspect(targets, shapes, inputs, head_lines, sample, cap, grouped, per_line_min,
                   group_words, whole_rows, variants):
    import csv, hashlib, io, json, os

    def digest(path):
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        return h.hexdigest()

    def text(path):
        with open(path, "rb") as f:
            return f.read(cap).decode("utf-8", "replace")

    def lines(t):
        return [l.strip() for l in t.splitlines() if l.strip()]

    read = {}  # each input's lines, read once per cell

    def input_lines(source):
        if source not in read:
            read[source] = lines(text(source))
        return read[source]

    def number(t):
        try:
            float(t)
            return True
        except ValueError:
            return False

    def problem(path, t):
        keys = shapes.get(path)
        if keys is None:
            return ""
        try:
            value = json.loads(t)
        except ValueError as e:
            return f"wrote {path}, which is not valid JSON ({type(e).__name__}: {e})"
        if keys and not (isinstance(value, dict) and all(k in value for k in keys)):
            shown = json.dumps(value, default=str)[:sample]
            want = ", ".join(json.dumps(k) for k in keys)
            return (f"wrote {path} as {shown}; the task asks for one JSON object with the "
                    f"keys {want}")
        return ""

    def first_lines(source):
        shown = [l[:160] for l in text(source).splitlines()[:3]]
        return f"The first lines of {source}:\n" + "\n".join(shown) + "\n"

    def input_head():
        source = next((s for s in inputs if os.path.isfile(s)), None)
        return first_lines(source) if source else ""

    named = set(group_words)

    def names_group(h):
        # a header holding a word the task names after per/by/each
        return bool(set(h.lower().replace("_", " ").split()) & named)

    def repeated_group(path, rows):
        # the columns the task groups by
        keys = [i for i, h in enumerate(rows[0]) if names_group(h)]
        if not keys or len(rows) < 3 or any(len(r) != len(rows[0]) for r in rows):
            return ""
        seen = {}
        for r in rows[1:]:
            label = tuple(r[i] for i in keys)
            seen[label] = seen.get(label, 0) + 1
        label, times = max(seen.items(), key=lambda item: item[1])
        if times < 2:
            return ""
        grouped_by[path] = [rows[0][i] for i in keys]
        names = " and ".join(rows[0][i] for i in keys)
        return (f"{len(rows) - 1} rows but {len(seen)} distinct {names} values "
                f"({', '.join(label)[:60]} is on {times} rows): the task asks for one row per "
                f"{names}, and the program saved the rows before grouping them. Group and "
                "aggregate first, for example table = df.groupby([...], as_index=False)[...]"
                ".sum(), and save that table")

    def header(source):
        first = input_lines(source)[:1]
        return [h.strip() for h in next(csv.reader(io.StringIO(first[0])), [])] if first else []

    def narrowed(path, rows):
        # the task asks for whole rows: the columns of the input they come from that they lack
        have = {h.strip() for h in rows[0]}
        headers = {s: header(s) for s in inputs if s.lower().endswith(".csv") and os.path.isfile(s)}
        tables = [(len(have & set(h)), s) for s, h in headers.items() if h]
        if not tables:
            return ""
        source = max(tables)[1]
        columns = headers[source]
        missing = [c for c in columns if c not in have]
        if not missing:
            return ""
        rows_from[path] = source
        return (f"wrote {path} with the columns {', '.join(rows[0])[:120]}, but the task asks "
                f"for the rows with all their columns, and {source} has {len(columns)}: "
                f"{', '.join(columns)[:200]} ({', '.join(missing)[:120]} missing). Save whole "
                "rows of the table, for example rows = df[condition] and then "
                "rows.to_csv(path, index=False), not the values of one column")

    def folded(value):
        return "".join(ch for ch in value.lower() if ch.isalnum())

    def respelled_rows(path, rows):
        # the task is about duplicates: rows whose text differs only in case, spaces or
        # punctuation, and that agree on every categorical column, are one thing kept twice
        head = rows[0]
        body = [r for r in rows[1:] if len(r) == len(head)]
        if len(body) < 2:
            return ""
        texts = [i for i in range(len(head))
                 if not all(number(r[i]) for r in body if r[i].strip())]
        few = max(2, len(body) // 2)
        kinds = [i for i in texts if len({r[i] for r in body}) <= few]
        for i in texts:
            seen = {}
            for r in body:
                label = folded(r[i])
                if not label:
                    continue
                first = seen.setdefault((label,) + tuple(r[j] for j in kinds if j != i), r[i])
                if first != r[i]:
                    same = ", ".join(f"{head[j]} {r[j]}" for j in kinds if j != i)[:80]
                    both = f", both with {same}" if same else ""
                    # the other columns the task keys on ("each item in each warehouse")
                    also = [head[j] for j in kinds if j != i and names_group(head[j])]
                    on = ", ".join(repr(c) for c in ["key", *also])
                    return (f"wrote {path} with rows whose {head[i]} differ only in case, spaces "
                            f"or punctuation ({first.strip()!r} and {r[i].strip()!r}{both}), "
                            "so the same one is kept twice. Compare a normalized key column: "
                            f"df['key'] = df[{head[i]!r}].str.strip().str.upper()"
                            ".str.replace(r'[^0-9A-Z]', '', regex=True); then deduplicate or "
                            f"group on [{on}] (for the latest or earliest row, sort by the date "
                            "column first), and drop the key column before saving")
        return ""

    def doubt(path, t):
        if not t.strip() or (path in shapes and t.strip() in ("[]", "{}", "null", '""')):
            head = input_head()
            return (f"wrote {path} empty. If the task's answer is not empty, the program's "
                    f"condition matches nothing. {head}Check the condition against them")
        got = lines(t)
        for source in inputs:
            if os.path.isfile(source) and len(got) >= 2 and got == input_lines(source):
                return (f"wrote {path} with every line of {source} unchanged; keep only what "
                        f"the task asks for. {first_lines(source)}Check the program's "
                        "condition against them")
        if path.lower().endswith(".csv"):
            rows = [r for r in csv.reader(io.StringIO(t)) if r]
            if len(rows) == 1:
                head = input_head()
                return (f"wrote {path} with its header ({','.join(rows[0])[:80]}) and no rows. "
                        "If the task's answer is not empty, a table the program built is empty "
                        f"(a wrong condition, field or constructor). {head}Check each step "
                        "against them")
            if whole_rows:
                narrow = narrowed(path, rows)
                if narrow:
                    return narrow
            if variants:
                twice = respelled_rows(path, rows)
                if twice:
                    return twice
            if grouped and len(rows) == 2 and len(rows[0]) >= 2:
                head = input_head()
                return (f"wrote {path} with one row ({','.join(rows[1])[:80]}): the task asks "
                        "for a figure per group, and every row fell in one group. If the input "
                        "has more than one group, the program reads the group from the wrong "
                        f"field or column. {head}Check which field holds the group")
            if grouped and len(rows) >= 2 and len(rows[0]) >= 2:
                for source in inputs:
                    if not os.path.isfile(source):
                        continue
                    count = len(input_lines(source))
                    if len(rows) - 1 >= max(per_line_min, (count - 1) // 2):
                        return (f"wrote {path} with {len(rows) - 1} rows for the {count} lines "
                                f"of {source}: the task asks for a figure per group, and "
                                "almost every line became a group of its own. The program "
                                "reads the group from a field that differs on every line (a "
                                "time, an id, a number). "
                                f"{first_lines(source)}Check which field holds the group")
            repeated = repeated_group(path, rows) if grouped else ""
            if repeated:
                return f"wrote {path} with {repeated}"
            if len(rows) >= 3 and all(len(r) == 1 for r in rows) and all(
                    number(r[0]) for r in rows[1:]):
                return (f"wrote {path} as one column of numbers ({rows[0][0]!r}) without their "
                        "labels; keep the label of each value: a pandas Series loses its index "
                        "in to_csv(index=False), so save a DataFrame instead: "
                        "table = series.reset_index(), then table.to_csv(path, index=False)")
        return ""

    rows_from = {}  # an artifact that lacks its input's columns: the input
    grouped_by = {}  # an artifact whose group columns repeat a value: those columns
    report = []
    for path in targets:
        entry = {"path": path, "sha256": None, "head": "", "problem": "", "doubt": ""}
        if os.path.isfile(path):
            t = text(path)
            entry["sha256"] = digest(path)
            entry["head"] = "\n".join(t.splitlines()[:head_lines]).rstrip()
            entry["problem"] = problem(path, t)
            entry["doubt"] = "" if entry["problem"] else doubt(path, t)
            entry["rows_from"] = rows_from.get(path, "") if entry["doubt"] else ""
            entry["grouped_by"] = grouped_by.get(path, []) if entry["doubt"] else []
        report.append(entry)
    print(MARK + json.dumps(report))
"""


@dataclass(frozen=True, slots=True)
class ArtifactReport:
    """One named artifact as the host found it after a program ran."""

    path: str
    sha256: str | None = None  # None: the program did not write it
    head: str = ""
    problem: str = ""  # must be repaired
    doubt: str = ""  # questioned until the same program is sent again
    rows_from: str = ""  # the input whose whole rows the task asks for, which this lacks columns of
    grouped_by: tuple[str, ...] = ()  # its group columns, where they repeat a value

    @property
    def written(self) -> bool:
        return self.sha256 is not None


#: A task that asks for a figure per group ("count the requests per status code").
_PER_GROUP = re.compile(r"\b(?:per|each|by)\b", re.I)
#: The words that name a group: up to four after "per", "each" or "by" (not "sorted by"),
#: up to the next punctuation.
_GROUP_WORDS = re.compile(
    r"(?<!sorted )(?<!ordered )(?<!ranked )(?<!divided )(?<!multiplied )"
    r"\b(?:per|each|by)\s+((?:[\w-]+\s*){1,4})",
    re.I,
)
_NOT_GROUP_WORDS = frozenset({"a", "an", "the", "and", "of", "its", "their", "calendar"})
#: A task that asks for whole input rows ("save those rows with all their columns").
_WHOLE_ROWS = re.compile(
    r"\ball (?:of )?(?:their|its|the|the original) columns\b|\ball columns\b"
    r"|\bevery column\b|\b(?:whole|full|entire) rows?\b",
    re.I,
)
#: A task about duplicates, or values typed more than one way.
_VARIANTS = re.compile(
    r"\b(?:duplicat\w*|dedup\w*|more than once|the same way|typed|spelled|ignoring case"
    r"|(?:upper|lower)[ -]?case|capital (?:letters?)?)",
    re.I,
)
_AGGREGATE = re.compile(r"\b(?:count|number of|how many|total|sum|mean|average|median)", re.I)


def asks_per_group(task: str) -> bool:
    """Whether the task asks for an aggregate per group (a one-row table is then doubted)."""
    return bool(_PER_GROUP.search(task) and _AGGREGATE.search(task))


def asks_whole_rows(task: str) -> bool:
    """Whether the task asks to save input rows with all their columns."""
    return bool(_WHOLE_ROWS.search(task))


def asks_about_variants(task: str) -> bool:
    """Whether the task is about duplicates or values typed more than one way."""
    return bool(_VARIANTS.search(task))


def group_words(task: str) -> set[str]:
    """The words after "per", "each" or "by" in ``task``: a named artifact's column that holds
    one of them is the group, so its values may not repeat."""
    words = {w.lower() for m in _GROUP_WORDS.finditer(task) for w in m.group(1).split()}
    return words - _NOT_GROUP_WORDS


def inspection_cell(
    targets: list[str],
    shapes: list[tuple[str, list[str]]],
    inputs: list[str],
    *,
    grouped: bool = False,
    keys: set[str] | frozenset[str] = frozenset(),
    whole_rows: bool = False,
    variants: bool = False,
) -> str:
    """The host cell that inspects ``targets`` (``shapes``: the JSON ones and their keys;
    ``inputs``: the workspace's input files, for the copy check; ``grouped``: the task asks for
    a figure per group, so a CSV of one row is doubted; ``keys``: the words that name its group,
    so a CSV whose group column repeats a value is doubted; ``whole_rows``: the task asks for
    input rows with all their columns, so a CSV lacking some is doubted; ``variants``: the task
    is about duplicates, so rows differing only in case or punctuation are doubted)."""
    arguments = (
        f"{targets!r}, {dict(shapes)!r}, {inputs[:INPUTS_MAX]!r}, {HEAD_LINES}, "
        f"{SHAPE_SAMPLE_CHARS}, {CHECK_BYTES}, {grouped!r}, {PER_LINE_MIN}, "
        f"{sorted(keys)!r}, {whole_rows!r}, {variants!r}"
    )
    source = _SOURCE.replace("MARK + ", f"{MARK!r} + ")
    return f"{source}\n_fleet_inspect({arguments})\ndel _fleet_inspect"


def parse_inspection(output: str, targets: list[str]) -> list[ArtifactReport]:
    """The reports in an inspection cell's output; every target unwritten when it has none."""
    for line in reversed(output.splitlines()):
        if line.startswith(MARK):
            try:
                rows = json.loads(line[len(MARK) :])
                reports = [
                    ArtifactReport(**{**row, "grouped_by": tuple(row.get("grouped_by", ()))})
                    for row in rows
                ]
            except (ValueError, TypeError):
                break
            if [r.path for r in reports] == targets:
                return reports
            break
    return [ArtifactReport(path=p) for p in targets]
