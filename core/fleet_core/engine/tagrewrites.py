"""A task's yes-or-no answer tags printed as booleans (docs/engine.md#the-small-model-profile).

A task that asks for ``@significant[yes or no]`` is often answered
``print(f"@significant[{p_value < 0.05}]")``: ``True``, not ``yes``. The format check then asks
the model again, and in a seed-62 ``correlation_test`` tune transcript that follow-up printed the
placeholder itself (``@significant[yes or no]``), its next step raised, and a right Turn ended
wrong. The host writes each such f-string field as ``YES_NO(value)`` before the program runs: a
boolean (Python's or numpy's) or the text ``True``/``False`` becomes ``yes``/``no``; anything
else is left as it is, so a program that already prints ``yes`` is unchanged.
"""

from __future__ import annotations

import ast
import re

from fleet_core.engine.repairs import placeholder_shape, tag_values
from fleet_core.engine.sourceedits import Edit, parse, splice

YES_NO = "_fleet_yes_no"
#: Defined in the sandbox by the code-first prelude.
YES_NO_SOURCE = f'''
def {YES_NO}(value):
    """(host) A yes-or-no answer tag's value: a boolean as yes or no, anything else as is."""
    if isinstance(value, str):
        return {{"true": "yes", "false": "no"}}.get(value.strip().lower(), value)
    if isinstance(value, bool) or type(value).__name__ in ("bool", "bool_"):  # numpy's too
        return "yes" if value else "no"
    return value
'''


def yes_no_names(task: str) -> list[str]:
    """The task's ``@name[yes or no]`` tags."""
    shapes = {name: placeholder_shape(value) for name, value in tag_values(task).items()}
    return [name for name, shape in shapes.items() if shape is not None and shape[0] == "yes or no"]


def yes_no_fields(code: str, names: list[str]) -> str:
    """``code`` with each f-string field printed in a yes-or-no tag (``@name[{expr}]``, a plain
    expression with no conversion or format spec, in a one-line f-string) written as
    ``{YES_NO(expr)}``, when the program still parses so."""
    tree = parse(code) if names else None
    if tree is None:
        return code
    tags = "|".join(re.escape(name) for name in names)
    field = re.compile(rf"(@(?:{tags})\[\{{)(?!{YES_NO}\()([^{{}}:!\n]+?)(\}}\])".encode())

    def wrap(text: bytes) -> bytes:
        return field.sub(lambda m: m[1] + f"{YES_NO}(".encode() + m[2].strip() + b")" + m[3], text)

    specs = {  # a field's format spec is an f-string inside the f-string: not its own span
        id(node.format_spec)
        for node in ast.walk(tree)
        if isinstance(node, ast.FormattedValue) and node.format_spec is not None
    }
    edits: list[Edit] = [
        (node.lineno - 1, node.col_offset, node.end_col_offset, wrap)
        for node in ast.walk(tree)
        if isinstance(node, ast.JoinedStr)
        and id(node) not in specs
        and node.lineno == node.end_lineno
        and node.end_col_offset is not None
    ]
    fixed = splice(code, edits) if edits else code
    return fixed if fixed != code and parse(fixed) is not None else code
