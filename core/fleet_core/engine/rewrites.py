"""The code-first host's fixes to a program before it runs, each for a slip a small model makes
often and a repair rarely mends (docs/engine.md#the-small-model-profile). Each keeps the
program's line numbers, so an error still points at the line the model wrote, and the task
cell shows the program as it ran.

- a statistics or log helper imported (``from scipy.stats import normality``: the helpers are
  defined by the prelude, not importable) has that name dropped from its import;
- a pandas result whose index holds labels (from ``groupby``, ``pivot_table``, ``value_counts``,
  ... with no ``reset_index`` or ``as_index=False`` after) written with ``to_csv(...,
  index=False)`` keeps them: the receiver is wrapped in ``KEEP_LABELS``, defined by the
  prelude, which resets a named index into columns and leaves anything else as it is;
- a legacy offset alias given to ``resample``, ``asfreq``, ``Grouper``, ``date_range`` or
  ``bdate_range`` (``'M'``, ``'Y'``, ``'A'``, ``'Q'``, ``'H'``, ``'T'``, ``'S'``, ...: pandas 3
  rejects them with "Invalid frequency") is written with its pandas 3 name (``'ME'``,
  ``'YE'``, ``'QE'``, ``'h'``, ``'min'``, ``'s'``); period aliases (``to_period('M')``) stay;
- a top-level ``def`` of a helper's name and required parameters (``def
  log_fields(line):``, the program's own version) is renamed ``_own_log_fields``, so the calls
  reach the prelude's helper;
- a variable named after an answer tag (``@server_errors = ...``, a SyntaxError) loses its
  ``@`` wherever it is used as a name, when that makes the program parse;
- a format spec written after a value outside an f-string (``{"p": p_value:.4f}``, a
  SyntaxError) becomes ``round(p_value, 4)``, when that makes the program parse;
- scipy's ``linregress`` result unpacked by the names it was given, and r taken for r squared
  squared (engine/fitrewrites.py).

And one fix to the session a program runs in: a new whole program after one that raised
starts from the prelude's names, ``FRESH_NAMESPACE`` dropping what earlier programs of the Turn
defined (modules stay imported), so a repair that uses a variable it no longer defines fails
with a ``NameError`` instead of reading a half-run program's value. After a program that ran
to its end (a doubt, a format follow-up) or a continuation step the names stay: its state is
whole, and the model was told a continuation's variables are kept.
"""

from __future__ import annotations

import ast
import inspect
import re
from collections.abc import Callable

from fleet_core.engine import loghelpers, stathelpers
from fleet_core.engine.fitrewrites import fit_by_name, squared_r
from fleet_core.engine.loghelpers import LOG_HELPER
from fleet_core.engine.sourceedits import INPUT_READS, Edit, called_name, parse, splice
from fleet_core.engine.stathelpers import SIGNATURES

HELPER_IMPORT_NOTE = "a helper is already defined, not imported"
HELPERS = frozenset([*SIGNATURES, LOG_HELPER])  # defined by the prelude, never importable
KEEP_LABELS = "_fleet_keep_labels"
#: Defined in the sandbox by the code-first prelude.
KEEP_LABELS_SOURCE = f'''
def {KEEP_LABELS}(table):
    """(host) A table whose index holds labels, written with index=False, keeps them."""
    try:
        names = [n for n in table.index.names if n is not None]
        columns = list(getattr(table, "columns", []))
        if names and not any(n in columns for n in names):
            return table.reset_index()
    except Exception:
        pass
    return table
'''

FRESH_NAMESPACE = "_fleet_fresh_namespace"
PRELUDE_NAMES = "_fleet_prelude_names"
#: Defined at the prelude's end, which then records its own names in ``PRELUDE_NAMES``.
FRESH_NAMESPACE_SOURCE = f'''
def {FRESH_NAMESPACE}():
    """(host) A new program starts from the prelude's names; imported modules stay."""
    scope = globals()
    added = [n for n in scope if n not in {PRELUDE_NAMES}]
    for name in [n for n in added if type(scope[n]).__name__ != "module"]:
        del scope[name]
{PRELUDE_NAMES} = frozenset([*globals(), "{PRELUDE_NAMES}"])
'''


def reads_inputs(code: str) -> bool:
    """Whether ``code`` reads a file itself (a reader such as ``pd.read_csv`` or ``json.load``,
    or ``open`` not for writing): a whole program, not a fragment continuing an earlier one."""
    tree = parse(code)
    return tree is not None and _reads(tree)


def _reads(tree: ast.Module) -> bool:
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    return any(called_name(c) in INPUT_READS or _opens_to_read(c) for c in calls)


def rederived(code: str, earlier: str) -> str:
    """A whole program (``reads_inputs``) that uses a name it never binds, which the programs
    whose names the session holds (``earlier``) bound with one top-level assignment on one
    line (``rows_kept = len(latest)``): that assignment put before the first top-level line
    that uses the name, when every name it reads of ``earlier``'s the program binds before that
    line; so a figure is computed from this program's data, not printed from an earlier
    program's. ``code`` unchanged otherwise; the line numbers stay."""
    tree = parse(code) if earlier else None
    before = parse(earlier) if tree is not None and _reads(tree) else None
    if tree is None or before is None:
        return code
    definitions = {
        s.targets[0].id: s
        for s in before.body
        if isinstance(s, ast.Assign)
        and len(s.targets) == 1
        and isinstance(s.targets[0], ast.Name)
        and s.lineno == s.end_lineno
    }
    known, own = _bound(before), _bound(tree)
    lines = code.splitlines()
    bound: set[str] = set()
    for statement in tree.body:
        loads = sorted(
            (n for n in ast.walk(statement) if isinstance(n, ast.Name)),
            key=lambda n: (n.lineno, n.col_offset),
        )
        used = [n.id for n in loads if n.id not in bound and n.id not in own]
        inserts = []
        for name in dict.fromkeys(used):
            definition = definitions.get(name)
            needs = _loaded(definition) & known if definition is not None else set()
            if definition is None or not needs <= bound:
                continue
            inserts.append(ast.get_source_segment(earlier, definition))
            bound.add(name)
        row = statement.lineno - 1
        if inserts and not isinstance(statement, _COMPOUND) and lines[row] == lines[row].lstrip():
            lines[row] = "; ".join([*(i for i in inserts if i), lines[row]])
        bound |= _bound(statement)
    return "\n".join(lines)


_COMPOUND = (
    ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try, ast.Match,
    ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
)  # fmt: skip
"""Statements a ``x = ...;`` cannot go before on their line."""


def _loaded(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _bound(node: ast.AST) -> set[str]:
    """The names ``node`` binds anywhere in it (assigned, defined, imported, parameters)."""
    names: set[str] = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            names.add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(n.name)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in n.names}
        elif isinstance(n, ast.arg):
            names.add(n.arg)
    return names


def _opens_to_read(call: ast.Call) -> bool:
    if called_name(call) != "open" or not isinstance(call.func, ast.Name):
        return False
    modes = [*call.args[1:2], *(k.value for k in call.keywords if k.arg == "mode")]
    mode = modes[0] if modes else None
    return not (isinstance(mode, ast.Constant) and set(str(mode.value)) & set("wax+"))


def drop_helper_imports(code: str) -> str:
    """``code`` without the helpers' names in its one-line ``from ... import`` statements (a
    statement importing nothing else becomes ``pass``, which keeps an indented block whole)."""
    tree = parse(code)
    if tree is None:
        return code
    lines = code.splitlines()
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or node.lineno != node.end_lineno:
            continue
        kept = [a for a in node.names if a.name not in HELPERS]
        if len(kept) == len(node.names):
            continue
        line = lines[node.lineno - 1]
        indent = line[: len(line) - len(line.lstrip())]
        if kept:
            names = ", ".join(a.name + (f" as {a.asname}" if a.asname else "") for a in kept)
            module = "." * node.level + (node.module or "")
            lines[node.lineno - 1] = f"{indent}from {module} import {names}"
        else:
            lines[node.lineno - 1] = f"{indent}pass  # (host: {HELPER_IMPORT_NOTE})"
    return "\n".join(lines)


SHADOW_PREFIX = "_own_"  # a program's own definition of a helper's name is renamed with it
_DEF = re.compile(rb"def\s+")  # a definition's keyword, where its node starts


def _required(function: Callable[..., object]) -> int:
    """How many parameters a call of ``function`` must pass."""
    parameters = inspect.signature(function).parameters.values()
    return sum(p.default is p.empty and p.kind is p.POSITIONAL_OR_KEYWORD for p in parameters)


#: Each helper's name and the parameters a call of it must pass.
HELPER_ARITY = {
    name: _required(getattr(module, name))
    for module, names in ((stathelpers, SIGNATURES), (loghelpers, (LOG_HELPER,)))
    for name in names
}


def _same_shape(node: ast.FunctionDef) -> bool:
    """Whether ``node`` defines a helper's name with the helper's required parameters (a call
    meant for it then fits the helper; a definition of another shape is left alone)."""
    required = len(node.args.args) - len(node.args.defaults)
    return HELPER_ARITY.get(node.name) == required


def unshadowed_helpers(code: str) -> str:
    """``code`` with each top-level ``def`` of a helper's name and shape (``def
    log_fields(line):``: the program's own version, which would replace the prelude's) renamed
    ``_own_<name>``, so the program's calls reach the helper the prompt described."""
    tree = parse(code)
    if tree is None:
        return code
    lines = code.splitlines()
    edits: list[Edit] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and _same_shape(node):
            row = node.lineno - 1
            keyword = _DEF.match(lines[row].encode("utf-8"), node.col_offset)
            if keyword is None:
                continue
            start = keyword.end()
            end = start + len(node.name.encode())
            edits.append((row, start, end, lambda old: SHADOW_PREFIX.encode() + old))
    return splice(code, edits)


def _drops_index(node: ast.AST) -> bool:
    """Whether ``node`` is a call ``<receiver>.to_csv(..., index=False)``."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "to_csv"
        and any(
            k.arg == "index" and isinstance(k.value, ast.Constant) and k.value.value is False
            for k in node.keywords
        )
    )


#: The pandas calls that put labels in a result's index.
INDEXING = ("groupby(", "pivot_table(", "pivot(", "value_counts(", "set_index(", "crosstab(")
#: The ones that take them out again.
UNINDEXING = ("reset_index(", "as_index=False")


def _labelled(source: str) -> bool:
    """Whether an expression's source makes an index of labels and keeps it."""
    squeezed = source.replace(" ", "")
    return any(op in squeezed for op in INDEXING) and not any(op in squeezed for op in UNINDEXING)


def _assigned(tree: ast.Module, code: str) -> dict[str, str]:
    """Each simply assigned name's last value, as source."""
    found: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                found[target.id] = ast.get_source_segment(code, node.value) or ""
    return found


def keep_index_labels(code: str, context: str = "") -> str:
    """``code`` with the receiver of each one-line ``.to_csv(..., index=False)`` wrapped in
    ``KEEP_LABELS(...)`` when it is (or names) a result with labels in its index; a name may
    also be assigned in ``context``, the steps a continuation follows."""
    tree = parse(code)
    if tree is None:
        return code
    earlier = parse(context) if context else None
    assigned = {**(_assigned(earlier, context) if earlier else {}), **_assigned(tree, code)}
    spans: list[tuple[int, int, int]] = []  # line index, receiver's start and end byte
    for node in ast.walk(tree):
        if not _drops_index(node):
            continue
        receiver = node.func.value  # type: ignore[attr-defined]
        source = ast.get_source_segment(code, receiver) or ""
        if isinstance(receiver, ast.Name):
            source = assigned.get(receiver.id, "")
        one_line = receiver.lineno == receiver.end_lineno and receiver.end_col_offset is not None
        if one_line and _labelled(source):
            spans.append((receiver.lineno - 1, receiver.col_offset, receiver.end_col_offset))
    wrap = f"{KEEP_LABELS}(".encode()
    edits: list[Edit] = [(*span, lambda old: wrap + old + b")") for span in spans]
    return splice(code, edits)


#: pandas 3 rejects the offset aliases older pandas took (and a model learned): their names now.
LEGACY_FREQUENCIES = {
    "M": "ME",
    "Y": "YE",
    "A": "YE",
    "Q": "QE",
    "BM": "BME",
    "BQ": "BQE",
    "BA": "BYE",
    "BY": "BYE",
    "SM": "SME",
    "H": "h",
    "BH": "bh",
    "T": "min",
    "S": "s",
    "L": "ms",
    "U": "us",
    "N": "ns",
}
_LEGACY = re.compile(r"^(?P<n>\d*)(?P<alias>[A-Z]{1,2})(?P<anchor>-[A-Z]{3})?$")
#: The calls whose frequency is an offset (not a period: ``to_period('M')`` is still right).
OFFSET_CALLS = {
    "resample": "rule",
    "asfreq": "freq",
    "Grouper": "freq",
    "date_range": "freq",
    "bdate_range": "freq",
}


def _frequency_literal(node: ast.Call) -> ast.Constant | None:
    """The string literal given as an offset call's frequency (``resample('M')``,
    ``Grouper(freq='M')``), if it is one."""
    name = called_name(node)
    keyword = OFFSET_CALLS.get(name)
    if keyword is None:
        return None
    positional = node.args[0] if node.args and name in ("resample", "asfreq") else None
    named = next((k.value for k in node.keywords if k.arg == keyword), None)
    value = named if named is not None else positional
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        return value
    return None


def modern_frequency(alias: str) -> str | None:
    """The alias pandas 3 takes for a legacy offset alias (``'M'`` -> ``'ME'``, ``'2H'`` ->
    ``'2h'``, ``'A-DEC'`` -> ``'YE-DEC'``); None when ``alias`` is not a legacy one."""
    match = _LEGACY.match(alias)
    if match is None or match["alias"] not in LEGACY_FREQUENCIES:
        return None
    return f"{match['n']}{LEGACY_FREQUENCIES[match['alias']]}{match['anchor'] or ''}"


def _quoted(text: str) -> Callable[[bytes], bytes]:
    """An edit's change: ``text`` in the quotes of the literal it replaces."""
    return lambda old: old[-1:] + text.encode() + old[-1:]


def modern_frequencies(code: str) -> str:
    """``code`` with each legacy offset alias literal of ``resample``, ``asfreq``, ``Grouper``,
    ``date_range`` and ``bdate_range`` replaced by its pandas 3 name (each such call would
    raise "Invalid frequency"); one-line literals only, so the line numbers stay."""
    tree = parse(code)
    if tree is None:
        return code
    edits: list[Edit] = []
    for node in ast.walk(tree):
        literal = _frequency_literal(node) if isinstance(node, ast.Call) else None
        if literal is None or literal.lineno != literal.end_lineno:
            continue
        modern = modern_frequency(str(literal.value))
        if modern is not None and literal.end_col_offset is not None:
            row, start, end = literal.lineno - 1, literal.col_offset, literal.end_col_offset
            edits.append((row, start, end, _quoted(modern)))
    return splice(code, edits)


#: A format spec written after a value outside an f-string (``"p": p_value:.4f``).
_STRAY_SPEC = re.compile(r"(?<![{\w.])([A-Za-z_]\w*(?:\.\w+)*(?:\[[^\]\n]*\])?):\.(\d+)f\b")


def stray_format_specs(code: str) -> str:
    """``code`` with each format spec written after a value outside an f-string (a
    SyntaxError: ``json.dump({"p": p_value:.4f}, f)``) turned into ``round(p_value, 4)``, when
    the program does not parse as it is and does once they are."""
    if parse(code) is not None:
        return code
    fixed = _STRAY_SPEC.sub(lambda m: f"round({m.group(1)}, {m.group(2)})", code)
    return fixed if fixed != code and parse(fixed) is not None else code


_TAG_ASSIGNED = re.compile(r"^[ \t]*@([A-Za-z_]\w*)[ \t]*=(?!=)", re.M)


def tag_named_variables(code: str) -> str:
    """``code`` with each variable named after an answer tag (``@server_errors = ...``, then
    ``{@server_errors}``: a SyntaxError) written without its ``@``, when the program does not
    parse as it is and does once they are; the tags themselves (``@server_errors[``) stay."""
    names = set(_TAG_ASSIGNED.findall(code))
    if not names or parse(code) is not None:
        return code
    used = re.compile(rf"@({'|'.join(sorted(map(re.escape, names)))})\b(?!\[)")
    fixed = used.sub(r"\1", code)
    return fixed if parse(fixed) is not None else code


def prepare(code: str, context: str = "") -> str:
    """The program (or a continuation step of ``context``) as the host runs it: every fix
    above applied."""
    parsed = unshadowed_helpers(stray_format_specs(tag_named_variables(code)))
    fixed = modern_frequencies(keep_index_labels(drop_helper_imports(parsed), context))
    return fit_by_name(squared_r(fixed))
