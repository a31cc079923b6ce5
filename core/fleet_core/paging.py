"""Opaque page cursors for listings that page (``fleet/session/list``, ``fleet/workspace/list``).

A cursor names the last item of the page before (a keyset, never an offset), so a page is the
same work however deep it is, and items added or removed meanwhile neither repeat nor shift the
others. On the wire it is opaque: base64url of a small JSON array ``[kind, ...key]``. A cursor
of the wrong kind, or one that was not made here, is an ``InvalidInput`` (-32602) that says to
pass the previous page's ``nextCursor`` or none.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from fleet_core.errors import InvalidInput

MAX_CURSOR_CHARS = 4096

SESSIONS_DEFAULT_LIMIT = 100
SESSIONS_MAX_LIMIT = 500
FILES_DEFAULT_LIMIT = 500
FILES_MAX_LIMIT = 1000


def encode(kind: str, *key: Any) -> str:
    """The cursor after the item whose sort key is ``key``."""
    raw = json.dumps([kind, *key], ensure_ascii=False, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode("utf-8")).decode("ascii").rstrip("=")


def invalid(cursor: str, kind: str) -> InvalidInput:
    """The error for a cursor that is not a ``kind`` cursor made here."""
    what = "fleet/session/list" if kind == "sessions" else "fleet/workspace/list"
    shown = str(cursor)[:40] + ("..." if len(str(cursor)) > 40 else "")
    return InvalidInput(
        f"Invalid cursor {shown!r}: pass the 'nextCursor' of the previous {what} page "
        "unchanged, or no cursor for the first page"
    )


def decode(cursor: str, kind: str, arity: int) -> list[Any]:
    """The key a cursor of ``kind`` carries (``arity`` values), or ``InvalidInput``."""
    problem = invalid(cursor, kind)
    if not isinstance(cursor, str) or not cursor or len(cursor) > MAX_CURSOR_CHARS:
        raise problem
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        value = json.loads(raw.decode("utf-8"))
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise problem from None
    if not isinstance(value, list) or len(value) != arity + 1 or value[0] != kind:
        raise problem
    if not all(isinstance(part, str) and part for part in value[1:]):
        raise problem
    return value[1:]


def check_limit(limit: int | None, default: int, maximum: int) -> int:
    """A page size: ``default`` when absent, else 1..``maximum``."""
    if limit is None:
        return default
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= maximum:
        raise InvalidInput(f"'limit' must be between 1 and {maximum}, got {limit!r}")
    return limit
