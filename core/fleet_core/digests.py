"""Canonical JSON and the built-in Turn program's digest: a leaf (standard library only), so
``models.py`` can default ``TurnResult.compiled_program_digest`` without importing
``fleet_core.optimization``.

``optimization/program.py`` digests every program with :func:`canonical_json` and checks at
import that its empty ``ProgramState`` digests to :data:`DEFAULT_PROGRAM_DIGEST`.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(value: Any) -> bytes:
    """The bytes that are stored and digested: sorted keys, compact, UTF-8."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


#: The built-in default program, ``ProgramState()`` (format 1, no overrides): what a Turn
#: reports when nothing is approved.
DEFAULT_PROGRAM_DIGEST = hashlib.sha256(canonical_json({"format": 1, "components": {}})).hexdigest()
