"""The code-first host's fixes to a straight-line fit before the program runs (engine/rewrites.py
applies them; docs/engine.md#the-small-model-profile). scipy's ``linregress`` returns five
figures (slope, intercept, r, p-value, standard error) and r, not r squared; the embedded model
writes ``slope, intercept, r_squared = linregress(x, y)`` as its first program on most
``linear_fit`` instances, and its repairs then take ``.rvalue`` for r squared.

- ``linregress(...)`` unpacked into names that each say which figure they want (``slope``,
  ``intercept``, ``r_value``, ``r_squared``, ``p_value``, ``std_err``, ...) gets them by name:
  the call is wrapped in ``FIT_BY_NAME``, defined by the prelude;
- a bare r (``fit.rvalue``, ``r_value``) assigned, keyed, passed or printed under a name or
  label that says r squared (``r_squared = fit.rvalue``, ``{"r2": r_value}``,
  ``f"@r_squared[{fit.rvalue:.3f}]"``) is squared.

Each edit stays on its line, so an error still points at the line the model wrote.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable

from fleet_core.engine.sourceedits import Edit, called_name, parse, splice

FIT_BY_NAME = "_fleet_fit_by_name"
#: Each figure of a ``linregress`` result, and the names (lower case, no "_") that ask for it.
FIGURE_NAMES = {
    "slope": ("slope", "m", "coef", "coefficient", "beta", "b1"),
    "intercept": ("intercept", "b", "b0", "const", "constant"),
    "r": ("r", "rvalue", "rval", "corr", "correlation"),
    "r_squared": ("rsquared", "r2", "rsq", "rsquare", "determination"),
    "p_value": ("p", "pvalue", "pval"),
    "std_err": ("stderr", "stderror", "se"),
}
#: Defined in the sandbox by the code-first prelude.
FIT_BY_NAME_SOURCE = f'''
def {FIT_BY_NAME}(result, names):
    """(host) scipy's linregress result unpacked into the names the program gave it."""
    figures = {{
        "slope": result.slope, "intercept": result.intercept, "r": result.rvalue,
        "r_squared": result.rvalue ** 2, "p_value": result.pvalue, "std_err": result.stderr,
    }}
    wanted = {FIGURE_NAMES!r}
    by_name = {{n: f for f, ns in wanted.items() for n in ns}}
    return tuple(figures[by_name[n.lower().replace("_", "")]] for n in names)
'''

_NAMES = {name for names in FIGURE_NAMES.values() for name in names}


def _figure_names(target: ast.expr) -> list[str] | None:
    """The names a tuple target unpacks into, when each says which figure it wants."""
    if not isinstance(target, ast.Tuple | ast.List):
        return None
    names = [e.id for e in target.elts if isinstance(e, ast.Name)]
    if len(names) != len(target.elts) or len(names) < 2:
        return None
    if not all(n.lower().replace("_", "") in _NAMES for n in names):
        return None
    return names


def _is_linregress(node: ast.expr) -> bool:
    if not isinstance(node, ast.Call):
        return False
    return called_name(node) == "linregress"


def fit_by_name(code: str) -> str:
    """``code`` with each ``a, b, c = linregress(...)`` (one line, every name known) unpacked by
    name: ``a, b, c = _fleet_fit_by_name(linregress(...), ('a', 'b', 'c'))``."""
    tree = parse(code)
    if tree is None:
        return code
    edits: list[Edit] = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        names = _figure_names(node.targets[0])
        call = node.value
        if names is None or not _is_linregress(call) or call.lineno != call.end_lineno:
            continue
        if call.end_col_offset is None:
            continue
        wrap = _wrapper(repr(tuple(names)))
        edits.append((call.lineno - 1, call.col_offset, call.end_col_offset, wrap))
    return splice(code, edits)


def _wrapper(names: str) -> Callable[[bytes], bytes]:
    """An edit's change: the call passed to ``FIT_BY_NAME`` with the ``names`` it unpacks to."""
    return lambda call: f"{FIT_BY_NAME}(".encode() + call + f", {names})".encode()


#: A name that says it holds r squared (``r_squared``, ``r2``, ``R_sq``, ``rsquared``).
_R_SQUARED = re.compile(r"^r_?(?:squared|sq|2)$", re.IGNORECASE)
#: A printed label that says r squared, just before the value (``@r_squared[``, ``R^2 = ``).
_R_SQUARED_LABEL = re.compile(
    r"(?:^|[^a-z0-9])r[-_ ]?(?:squared|sq|2|\^2|²)[\s\[\]:=(]*$", re.IGNORECASE
)
#: A correlation coefficient as scipy's ``linregress`` gives it (``fit.rvalue``, ``r_value``).
_R_VALUE_NAMES = ("r_value", "rvalue", "r_val")


def _is_r_value(node: ast.expr) -> bool:
    if isinstance(node, ast.Attribute):
        return node.attr == "rvalue"
    return isinstance(node, ast.Name) and node.id in _R_VALUE_NAMES


def _labelled_values(node: ast.JoinedStr) -> list[ast.expr]:
    """The values an f-string prints right after a label that says r squared."""
    found: list[ast.expr] = []
    before = ""
    for part in node.values:
        if isinstance(part, ast.Constant) and isinstance(part.value, str):
            before = part.value
        elif isinstance(part, ast.FormattedValue):
            if _R_SQUARED_LABEL.search(before):
                found.append(part.value)
            before = ""
    return found


def _r_squared_values(tree: ast.Module) -> list[ast.expr]:
    """The values assigned, keyed, passed or printed as r squared that are a bare r."""
    found: list[ast.expr] = []
    for node in ast.walk(tree):
        pairs: list[tuple[str, ast.expr | None]] = []
        if isinstance(node, ast.Assign):
            pairs = [(t.id, node.value) for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.Dict):
            pairs = [
                (k.value, v)
                for k, v in zip(node.keys, node.values, strict=True)
                if isinstance(k, ast.Constant) and isinstance(k.value, str)
            ]
        elif isinstance(node, ast.keyword) and node.arg is not None:
            pairs = [(node.arg, node.value)]
        elif isinstance(node, ast.JoinedStr):
            found += _labelled_values(node)
        found += [v for name, v in pairs if v is not None and _R_SQUARED.match(name)]
    return [v for v in found if _is_r_value(v) and v.lineno == v.end_lineno]


def squared_r(code: str) -> str:
    """``code`` with each bare correlation coefficient assigned, keyed, passed or printed as r
    squared (``r_squared = fit.rvalue``) squared: ``(fit.rvalue) ** 2``."""
    tree = parse(code)
    if tree is None:
        return code
    edits: list[Edit] = [
        (v.lineno - 1, v.col_offset, v.end_col_offset, lambda old: b"(" + old + b") ** 2")
        for v in _r_squared_values(tree)
        if v.end_col_offset is not None
    ]
    return splice(code, edits)
