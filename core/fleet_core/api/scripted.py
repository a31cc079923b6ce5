"""The ``FLEET_TEST_SCRIPT`` hook: scripted models for the server and CLI processes, the one
stand-in for a model (end-to-end tests, ``demo`` harnesses; never configured by a user).

When ``FLEET_TEST_SCRIPT`` names a JSON file, the server (and ``fleet-lsp turn``/``demo``) open
the runtime with a ``StaticLmProvider`` over ``fleet_core.engine.scripted_lm`` scripted LMs instead
of the configured endpoint, so end-to-end tests run real Turns whose code really runs in the
sandbox, with deterministic model replies. Script format::

    {"latency": 0.0,
     "root": {"replies": [REPLY, ...], "rules": {"substring": REPLY | [REPLY, ...]}},
     "sub":  {...},            # optional; defaults to root
     "judge": {...},           # optional (fleet-lsp eval run); defaults to root
     "reflection": {...}}      # optional (GEPA's proposals); defaults to root

``replies``/``rules`` may also sit at the top level (root). A REPLY is raw text or one of
``{"route": "rlm"}``, ``{"action": "<python>", "reasoning": "..."}``,
``{"submit": "<python expr>", "note": "..."}``, ``{"submitModel": true}`` (submits the model id
the call named, e.g. ``'openai/gpt-x'``), ``{"fields": {"answer": "..."}}`` or
``{"verdict": true|false, "critique": "..."}`` (a judge reply: correct, safe, critique, and the
relevance judge's relevant, relevance_score and rationale = the critique).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

TEST_SCRIPT_ENV = "FLEET_TEST_SCRIPT"


def script_path(environ: Mapping[str, str] = os.environ) -> str | None:
    """The script ``FLEET_TEST_SCRIPT`` names, or None when the hook is off."""
    return environ.get(TEST_SCRIPT_ENV) or None


def provider_from_environment(environ: Mapping[str, str] = os.environ) -> Any:
    """The scripted models of the hook's script (blocking: reads it), or None when it is off."""
    path = script_path(environ)
    return scripted_provider(path) if path else None


def _reply(spec: Any) -> Any:
    from fleet_core.engine import scripted_lm as t

    if isinstance(spec, str):
        return spec
    if not isinstance(spec, dict):
        raise ValueError(f"script reply must be text or an object, got {spec!r}")
    if "route" in spec:
        return t.route(str(spec["route"]))
    if "action" in spec:
        return t.action(str(spec["action"]), str(spec.get("reasoning", "Next step.")))
    if "submitModel" in spec:
        return t.submit_model(str(spec.get("note", "")))
    if "submit" in spec:
        return t.submit(str(spec["submit"]), str(spec.get("note", "")))
    if "fields" in spec:
        return t.fields(**spec["fields"])
    if "verdict" in spec:
        return t.fields(
            reasoning="Scripted judge.",
            correct=bool(spec["verdict"]),
            safe=bool(spec.get("safe", True)),
            critique=str(spec.get("critique", "scripted verdict")),
            relevant=bool(spec.get("relevant", spec["verdict"])),
            relevance_score=float(spec.get("relevance", 1.0 if spec["verdict"] else 0.0)),
            rationale=str(spec.get("critique", "the scripted judge's verdict")),
        )
    raise ValueError(f"unknown script reply {spec!r}")


def _lm(section: dict[str, Any], latency: float) -> Any:
    from fleet_core.engine.scripted_lm import scripted_lm

    replies = [_reply(r) for r in section.get("replies", [])]
    rules: dict[str, Any] = {}
    for key, value in (section.get("rules") or {}).items():
        rules[key] = [_reply(v) for v in value] if isinstance(value, list) else _reply(value)
    return scripted_lm(replies, rules=rules, latency=float(section.get("latency", latency)))


def scripted_provider(path: str | Path) -> Any:
    """A ``StaticLmProvider`` built from the JSON script at ``path``."""
    from fleet_core.engine.lm import StaticLmProvider

    script = json.loads(Path(path).read_text(encoding="utf-8"))
    latency = float(script.get("latency", 0.0))
    root = _lm(script.get("root", script), latency)
    sub = _lm(script["sub"], latency) if "sub" in script else None
    others = {
        role: _lm(script[role], latency) for role in ("judge", "reflection") if role in script
    }
    return StaticLmProvider(root, sub, **others)
