"""What a failed program's own variables held when it raised, shown in its repair
(docs/engine.md#the-small-model-profile).

A small model's error is often far from its bug: a table built empty two lines earlier fails
only at ``idxmax``; a dict keyed by the wrong field fails at a later lookup. The error alone
sends the repair to the failing line, and the model resends the program that built the bad
value. So, after a program raised, a host cell lists the names the program assigned (not the
prelude's, not modules, functions or classes) in the order they were made, each as one line
saying its type, its size and its first values, and an empty table or collection said so.
The repair is told that list under ``STATE_HEADING``. Bounded: ``MAX_NAMES`` names of at most
``LINE_CHARS`` characters each, ``STATE_CHARS`` in all.
"""

from __future__ import annotations

from fleet_core.engine.rewrites import PRELUDE_NAMES

MAX_NAMES = 12
VALUE_CHARS = 160  # one value's text (a first row, the first items)
LINE_CHARS = 400  # one variable's line (a table's columns and first row fit whole)
STATE_CHARS = 1_200
STATE_HEADING = (
    "What the program's variables held when it failed (a wrong or EMPTY value comes from the "
    "line that made it, which may be earlier than the line that failed):"
)
EMPTY = "EMPTY"

#: A host cell (run after a failed program, in its namespace) printing one line per variable.
STATE_CELL = f"""
def _fleet_state(limit, width, line):
    import itertools as _it, types as _t
    def _cut(text, most=width):
        text = ' '.join(str(text).split())
        return text if len(text) <= most else text[: most - 3] + '...'
    def _short(i):  # a long text is cut before its repr is made
        return repr(i[: width + 1] if isinstance(i, (str, bytes)) else i)[: width + 1]
    def _first(items):
        return _cut(', '.join(_short(i) for i in items))
    def _pairs(v):
        return _cut(', '.join(f"{{_short(k)}}: {{_short(x)}}" for k, x in _it.islice(v.items(), 4)))
    def _describe(v):
        kind = type(v).__name__
        if hasattr(v, 'columns') and hasattr(v, 'shape'):
            rows, cols = v.shape
            head = '' if rows == 0 else '; first row: ' + _cut(v.iloc[0].to_dict())
            mark = ' {EMPTY}' if rows == 0 else ''
            names = _first(_it.islice(v.columns, 12))
            return f"{{kind}}{{mark}}, {{rows}} rows; columns {{names}}{{head}}"
        if hasattr(v, 'dtype') and hasattr(v, 'index') and hasattr(v, 'iloc'):
            if len(v) == 0:
                return f"{{kind}} {EMPTY} ({{v.dtype}})"
            return f"{{kind}} of {{len(v)}} ({{v.dtype}}); first: " + _pairs(v)
        if isinstance(v, dict):
            if not v:
                return f"{{kind}} {EMPTY}"
            return f"{{kind}} of {{len(v)}} items; first: " + _pairs(v)
        if isinstance(v, (list, tuple, set, frozenset)):
            if not v:
                return f"{{kind}} {EMPTY}"
            return f"{{kind}} of {{len(v)}}; first: " + _first(_it.islice(v, 4))
        if isinstance(v, (str, bytes)):
            return f"{{kind}} " + _cut(_short(v))
        if isinstance(v, (int, float, complex, bool)) or v is None:
            return _cut(repr(v))
        return kind
    skip = (_t.ModuleType, _t.FunctionType, type, _t.BuiltinFunctionType)
    scope = globals()
    names = [n for n in scope if n not in {PRELUDE_NAMES} and not n.startswith('_')]
    names = [n for n in names if not isinstance(scope[n], skip)]
    for name in names[-limit:]:
        try:
            print(_cut(f"{{name}} = {{_describe(scope[name])}}", line))
        except Exception as exc:
            print(f"{{name}} = {{type(scope[name]).__name__}} (not shown: {{type(exc).__name__}})")
"""


def state_cell() -> str:
    """The host cell that prints the failed program's variables (``STATE_CELL``, then its
    call and the helper's removal)."""
    return (
        f"{STATE_CELL}\n_fleet_state({MAX_NAMES}, {VALUE_CHARS}, {LINE_CHARS})\ndel _fleet_state\n"
    )


def state_block(shown: str) -> str:
    """The repair's help from the cell's output: ``STATE_HEADING`` and its lines, bounded to
    ``STATE_CHARS``; "" when the program had assigned nothing."""
    lines = [line for line in shown.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    kept: list[str] = []
    used = len(STATE_HEADING)
    for line in lines:
        if used + len(line) + 1 > STATE_CHARS:
            kept.append("...")
            break
        kept.append(line)
        used += len(line) + 1
    return STATE_HEADING + "\n" + "\n".join(kept)
