"""What the CLI prints to a terminal: outside text made visible, never acted on.

Answers, file names, trace text and error messages come from users, models, files and services.
A terminal acts on C0 controls (ESC starts a sequence that can move the cursor, clear the
screen, set the title or write the clipboard), on C1 controls (U+009B is a one-character CSI,
U+009D an OSC) and shows bidi overrides (U+202A–U+202E, U+2066–U+2069) reordered, so a name can
read as something it is not. Two layers:

- :func:`visible` at each place outside text is printed: every such character becomes a visible
  escape (``\\x1b``, ``\\x9b``, ``<U+202E>``); newlines and tabs stay.
- :class:`VisibleStream` around the CLI's stdout and stderr, for whatever a print site missed: it
  makes C1 controls, bidi controls and C0 controls other than newline, tab, carriage return and
  the SGR/cursor sequences rich itself writes visible. Rich writes none of the others.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Mapping
from typing import Any, TextIO

from fleet_core.errors import REPORTED

_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_UNSAFE = re.compile(f"[\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f{_BIDI}]")
# What rich writes itself: SGR styles and the cursor/erase moves of its live display.
_RICH_SEQUENCE = re.compile(r"\x1b\[(?:[0-9;]*m|\?25[hl]|[0-9]*[ABCDGK])")
_STREAM_UNSAFE = re.compile(
    f"\\x1b\\[[0-9;?]*[A-Za-z]|[\\x00-\\x08\\x0b\\x0c\\x0e-\\x1f\\x7f-\\x9f{_BIDI}]"
)


def visible(text: object) -> str:
    """``text`` with every control and bidi character as a visible escape (newline, tab kept)."""
    return _UNSAFE.sub(_escape, str(text).replace("\r\n", "\n"))


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"<U+{code:04X}>"


def _stream_escape(match: re.Match[str]) -> str:
    found = match.group()
    if found.startswith("\x1b[") and _RICH_SEQUENCE.fullmatch(found):
        return found
    return "".join(_escape(m) if (m := _UNSAFE.fullmatch(c)) else c for c in found)


class VisibleStream:
    """A text stream that writes through to ``inner`` with :mod:`terminal`'s safety net."""

    def __init__(self, inner: TextIO) -> None:
        self._inner = inner

    def write(self, text: str) -> int:
        self._inner.write(_STREAM_UNSAFE.sub(_stream_escape, text))
        return len(text)

    def __getattr__(self, name: str) -> Any:  # flush, fileno, isatty, buffer, encoding, ...
        return getattr(self._inner, name)


def install() -> None:
    """Wrap this process's stdout and stderr (the CLI's; never the server's protocol stream)."""
    if not isinstance(sys.stdout, VisibleStream):
        sys.stdout = VisibleStream(sys.stdout)
    if not isinstance(sys.stderr, VisibleStream):
        sys.stderr = VisibleStream(sys.stderr)


class _CliLogFilter(logging.Filter):
    """At the default level: fleet's own warnings once each, libraries from ERROR, and nothing
    a result already reports (``fleet_core.errors.REPORTED``); every record shown visible."""

    def __init__(self, debug: bool) -> None:
        super().__init__()
        self.debug = debug

    def filter(self, record: logging.LogRecord) -> bool:
        if self.debug:
            return True
        if getattr(record, REPORTED, False):
            return False
        own = record.name.split(".", 1)[0] in ("fleet_core", "fleet_lsp")
        return record.levelno >= (logging.WARNING if own else logging.ERROR)


class _CliFormatter(logging.Formatter):
    """``warning: <message>`` on one line; the traceback only at DEBUG."""

    def __init__(self, debug: bool) -> None:
        super().__init__()
        self.debug = debug

    def format(self, record: logging.LogRecord) -> str:
        message = visible(record.getMessage())
        if not self.debug:
            return f"{record.levelname.lower()}: {' '.join(message.split())}"
        text = f"{record.levelname} {record.name}: {message}"
        stack = record.exc_text or (
            self.formatException(record.exc_info) if record.exc_info else ""
        )
        return f"{text}\n{visible(stack)}" if stack else text  # exc_text: redacted already


def configure_cli_logging(environ: Mapping[str, str] = os.environ) -> None:
    """The CLI's log on stderr: ``FLEET_LOG_LEVEL`` (default WARNING; DEBUG shows every
    library's records and the tracebacks)."""
    level = logging.getLevelName(environ.get("FLEET_LOG_LEVEL", "WARNING").upper())
    level = level if isinstance(level, int) else logging.WARNING
    debug = level <= logging.DEBUG
    handler = logging.StreamHandler()
    handler.setFormatter(_CliFormatter(debug))
    handler.addFilter(_CliLogFilter(debug))
    root = logging.getLogger()
    root.handlers = [h for h in root.handlers if not getattr(h, "fleet_cli", False)]
    handler.fleet_cli = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(min(level, logging.WARNING))
