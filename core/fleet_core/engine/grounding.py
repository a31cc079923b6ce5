"""Grounded SUBMIT: a submission may not carry figures the model typed but the sandbox never showed.

One ``Grounding`` per agent namespace (one ``TurnInterpreter``). It remembers the figures the agent
could have *observed* (see ``observe``) and, when a cell submits, checks the figures that were
typed as literals in that cell's code and appear in the submitted payload:

- a **figure** is a number as written: optional ``$``, digits with optional thousands separators
  (``1,234,567``), an optional decimal part, an optional exponent and an optional ``%``; a number
  preceded by a letter, digit, ``_`` or ``.``, or followed by ``.<digit>``, is part of a name,
  version or address (``x2024``, ``1.2.3``) and is not one. The
  sign is ignored (``-5.2`` and "fell by 5.2" are the same figure). Integers below 10 written
  without a decimal point (indices, counts of a few, list markers) are ignored; years are figures
  like any other (a year the task mentions is observed through the inputs).
- **typed in the code**: a numeric literal of the submitting cell (``1_000``, ``0.50``, ``1e5``;
  the text as typed, so ``0.50`` has two decimals) or a figure inside one of its string literals
  (f-string text included). Figures only computed (``SUBMIT(answer=str(total))``) are never
  checked.
- **observed**: every figure in the agent's inputs (the signature's variables: task, memory,
  manifest, ...), in every cell's printed output and trailing value, in error text the model was
  shown, and in the submitting cell's own output printed before ``SUBMIT``. A value that only
  sits in a variable is not observed until it is printed. An observed ``12.5%`` also counts as
  ``0.125``, an observed ``1,234`` also as ``1`` and ``234``. At most ``MAX_OBSERVED``
  distinct figures are kept per namespace; later ones are not added.
- **precision**: a typed figure with *d* decimals is grounded when an observed figure lies within
  half a unit of its last typed digit (``|observed - typed| <= 0.5 * 10**-d``): ``3.14`` is
  grounded by ``3.14159``, ``3.142`` is not by ``3.141``; ``1235`` is grounded by ``1234.6``.
  A typed ``12.5%`` is also grounded by an observed ``0.125`` (at *d* + 2 decimals).

The learned-note field is not checked (it is a hint, never an answer). The first
``MAX_REJECTIONS`` ungrounded submissions of a namespace are rejected (the model is told which
figures and why); later ones are accepted and flagged. The check is a guard against retyped or
invented figures, not against code that prints its own literal first.
"""

from __future__ import annotations

import ast
import json
import re
from bisect import bisect_left
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

MAX_REJECTIONS = 2
MAX_OBSERVED = 200_000
MAX_EVENT_FIGURES = 20
MAX_FIGURE_CHARS = 64
MAX_TEXT_CHARS = 2_000_000
EXEMPT_FIELDS = frozenset({"learned_skill_note"})
SMALL_INT = 10

_FIGURE = re.compile(
    r"(?<![\w.])\$?"
    r"(?P<number>\d{1,3}(?:,\d{3})+(?!\d)(?:\.\d+)?|\d+(?:\.\d+)?)(?!\.\d)"
    r"(?P<exponent>[eE][+-]?\d+(?![\w.]))?"
    r"(?P<percent>\s?%)?"
)


@dataclass(frozen=True, slots=True)
class Figure:
    """A number as written: its value (sign dropped), decimals typed and whether it had ``%``."""

    text: str
    value: Decimal
    decimals: int
    percent: bool = False
    integer_literal: bool = True  # written without a decimal point (or exponent)

    @property
    def ignored(self) -> bool:
        """Integers below 10 without a decimal point are indices and small counts, not figures."""
        return self.integer_literal and not self.percent and self.value < SMALL_INT


def _figure(text: str, number: str, exponent: str | None, percent: bool) -> Figure | None:
    if len(text) > MAX_FIGURE_CHARS:
        return None
    plain = number.replace(",", "").replace("_", "")
    try:
        value = Decimal(plain + (exponent or ""))
    except InvalidOperation:
        return None
    if not value.is_finite():
        return None
    exponent_value = value.as_tuple().exponent
    decimals = max(0, -exponent_value) if isinstance(exponent_value, int) else 0
    integer = "." not in plain and not exponent
    return Figure(text.strip(), abs(value), decimals, percent, integer)


def figures_in_text(text: str) -> list[Figure]:
    """Every figure written in ``text`` (see the module docstring)."""
    found: list[Figure] = []
    for match in _FIGURE.finditer(text[:MAX_TEXT_CHARS]):
        figure = _figure(
            match.group(0),
            match.group("number"),
            match.group("exponent"),
            bool(match.group("percent")),
        )
        if figure is not None:
            found.append(figure)
    return found


def figures_in_code(code: str) -> list[Figure]:
    """The figures typed in ``code``: numeric literals (as typed) and figures in string literals.

    Code that does not parse has no figures (it never ran, so it never submitted)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return []
    found: list[Figure] = []
    source = _Source(code)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Constant):
            continue
        value = node.value
        if isinstance(value, str):
            found.extend(figures_in_text(value))
        elif isinstance(value, int | float) and not isinstance(value, bool):
            typed = source.segment(node) or repr(value)
            figure = _literal_figure(typed, value)
            if figure is not None:
                found.append(figure)
    return found


class _Source:
    """A node's source text in constant time (``ast.get_source_segment`` splits the whole code
    on every call: quadratic in a cell of many literals). Offsets are UTF-8 bytes, as ast's."""

    def __init__(self, code: str) -> None:
        self._data = code.encode("utf-8")
        self._starts = [0]
        for line in self._data.splitlines(keepends=True):
            self._starts.append(self._starts[-1] + len(line))

    def segment(self, node: ast.expr) -> str | None:
        end_line, end_col = node.end_lineno, node.end_col_offset
        if end_line is None or end_col is None or end_line != node.lineno:
            return None  # a numeric literal is one token on one line
        start = self._starts[node.lineno - 1]
        return self._data[start + node.col_offset : start + end_col].decode("utf-8", "replace")


def _literal_figure(typed: str, value: int | float) -> Figure | None:
    """A numeric literal as typed (``0.50`` keeps two decimals; ``0x1F`` is an integer)."""
    text = typed.replace("_", "")
    if text[:2].lower() in ("0x", "0o", "0b"):
        return Figure(typed, Decimal(abs(int(value))), 0)
    try:
        number = Decimal(text)
    except InvalidOperation:
        return None
    if not number.is_finite() or len(text) > MAX_FIGURE_CHARS:
        return None
    exponent = number.as_tuple().exponent
    decimals = max(0, -exponent) if isinstance(exponent, int) else 0
    integer = not any(c in text for c in ".eE")
    return Figure(typed, abs(number), decimals, integer_literal=integer)


def _payload_text(payload: Mapping[str, Any]) -> str:
    parts: list[str] = []
    for name, value in payload.items():
        if name in EXEMPT_FIELDS:
            continue
        if isinstance(value, str):
            parts.append(value)
        else:
            try:
                parts.append(json.dumps(value, ensure_ascii=False, default=str))
            except (TypeError, ValueError):
                parts.append(repr(value))
    return "\n".join(parts)


@dataclass(frozen=True, slots=True)
class Verdict:
    """A submission's check: the ungrounded figures (as written) and whether it is rejected."""

    figures: list[str]
    rejected: bool
    attempt: int  # how many ungrounded submissions this namespace made, this one included

    @property
    def grounded(self) -> bool:
        return not self.figures

    def explanation(self) -> str:
        """What the model is told when its SUBMIT is rejected."""
        shown = ", ".join(self.figures[:MAX_EVENT_FIGURES])
        return (
            f"SUBMIT rejected ({self.attempt} of {MAX_REJECTIONS} allowed rejections): the "
            f"submission contains figures typed in this code that no output has shown: {shown}. "
            "Compute them in the sandbox and print them (or build the submission from the "
            "variables that hold them), then SUBMIT again. A figure counts as observed when it "
            "appeared in printed output, a cell's value or the inputs, at the precision you typed."
        )


@dataclass(slots=True)
class Grounding:
    """The observed figures of one namespace and its ungrounded-submission count."""

    max_observed: int = MAX_OBSERVED
    max_rejections: int = MAX_REJECTIONS
    _observed: set[Decimal] = field(default_factory=set)
    _sorted: list[Decimal] | None = None
    _seen_inputs: set[int] = field(default_factory=set)
    ungrounded: int = 0

    @property
    def observed_count(self) -> int:
        return len(self._observed)

    def observe(self, text: object) -> None:
        """Remember the figures of something the agent was shown (``str`` or any value's repr)."""
        if text is None:
            return
        if not isinstance(text, str):
            text = repr(text)
        for figure in figures_in_text(text):
            self._add(figure.value)
            if figure.percent:
                self._add(figure.value / 100)
            if "," in figure.text:  # printed "1,234" may also be the values 1 and 234 (CSV)
                for part in re.findall(r"\d+(?:\.\d+)?", figure.text):
                    self._add(Decimal(part))

    def observe_inputs(self, variables: Mapping[str, Any] | None) -> None:
        """Remember the figures of the agent's inputs (each distinct value scanned once)."""
        for value in (variables or {}).values():
            text = value if isinstance(value, str) else repr(value)
            key = hash(text)
            if key in self._seen_inputs:
                continue
            self._seen_inputs.add(key)
            self.observe(text)

    def _add(self, value: Decimal) -> None:
        if len(self._observed) >= self.max_observed or value in self._observed:
            return
        self._observed.add(value)
        self._sorted = None

    def grounded(self, figure: Figure) -> bool:
        """Whether an observed figure matches ``figure`` at its typed precision."""
        if self._near(figure.value, figure.decimals):
            return True
        return figure.percent and self._near(figure.value / 100, figure.decimals + 2)

    def _near(self, value: Decimal, decimals: int) -> bool:
        if self._sorted is None:
            self._sorted = sorted(self._observed)
        half = Decimal(5).scaleb(-(decimals + 1))
        values = self._sorted
        index = bisect_left(values, value - half)
        return index < len(values) and values[index] <= value + half

    def ungrounded_figures(self, code: str, payload: Mapping[str, Any]) -> list[str]:
        """The payload's figures that ``code`` typed as literals and nothing observed grounds."""
        typed = {f.value for f in figures_in_code(code) if not f.ignored}
        if not typed:
            return []
        found: list[str] = []
        for figure in figures_in_text(_payload_text(payload)):
            if figure.ignored or figure.value not in typed or self.grounded(figure):
                continue
            if figure.text not in found:
                found.append(figure.text)
        return found

    def check(self, code: str, payload: Mapping[str, Any]) -> Verdict:
        """Check a submission; an ungrounded one counts toward the namespace's rejections."""
        figures = self.ungrounded_figures(code, payload)
        if not figures:
            return Verdict([], rejected=False, attempt=self.ungrounded)
        self.ungrounded += 1
        return Verdict(
            figures[:MAX_EVENT_FIGURES],
            rejected=self.ungrounded <= self.max_rejections,
            attempt=self.ungrounded,
        )
