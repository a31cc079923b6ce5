"""The Fleet chat adapter: tolerant of bare code replies, re-asks once, never falls back to JSON."""

from __future__ import annotations

import ast
import re
from typing import Any

import dspy
from dspy.utils.exceptions import AdapterParseError

from fleet_core.engine.metering import charged_as

_FENCE = re.compile(r"```(?:python|py|python3|py3)?[ \t]*\n(.*?)```", re.DOTALL)
_THINK_END = "</think>"
#: Output fields a reply may leave out: they default to "" instead of failing the parse.
OPTIONAL_OUTPUTS = ("learned_skill_note",)
REASK_NOTE = (
    "\n\nFORMAT CORRECTION: your previous reply could not be parsed. Reply with every output "
    "field, each introduced by its exact `[[ ## field ## ]]` header, and end with "
    "`[[ ## completed ## ]]`."
)


class FleetChatAdapter(dspy.ChatAdapter):  # type: ignore[misc]
    """ChatAdapter that accepts a bare fenced python block for (reasoning, code) outputs.

    A reply that still cannot be parsed is re-asked once with a format correction; the re-ask is an
    ordinary (metered) LM call, recategorized as ``reask`` in the Turn's usage.
    """

    def __init__(self, *, reasks: int = 1) -> None:
        super().__init__(use_json_adapter_fallback=False)
        self._reasks = reasks

    def parse(self, signature: Any, completion: str) -> dict[str, Any]:
        if _THINK_END in completion:
            completion = completion.split(_THINK_END, 1)[1]
        try:
            return dict(super().parse(signature, completion))
        except AdapterParseError:
            bare = self._bare_code(signature, completion)
            if bare is not None:
                return bare
            optional = [n for n in OPTIONAL_OUTPUTS if n in signature.output_fields]
            if not optional or len(optional) == len(signature.output_fields):
                raise
            required = signature
            for name in optional:
                required = required.delete(name)
            parsed = dict(super().parse(required, completion))  # raises if a required one lacks
            return parsed | {name: "" for name in optional}

    @staticmethod
    def _bare_code(signature: Any, completion: str) -> dict[str, Any] | None:
        """A reply that is only code: a fenced python block, or (no fence, no field headers)
        text that parses as Python, for a ``(reasoning, code)`` or ``(code)`` step."""
        fields = set(signature.output_fields)
        if fields not in ({"reasoning", "code"}, {"code"}):
            return None
        match = _FENCE.search(completion)
        if match is not None:
            code, before = match.group(1).strip(), completion[: match.start()].strip()
        elif "[[ ##" not in completion and _is_python(completion):
            code, before = completion.strip(), ""
        else:
            return None
        if fields == {"code"}:
            return {"code": code}
        return {"reasoning": before or "(no reasoning given)", "code": code}

    def __call__(
        self,
        lm: Any,
        lm_kwargs: dict[str, Any],
        signature: Any,
        demos: list[dict[str, Any]],
        inputs: dict[str, Any],
    ) -> list[dict[str, Any]]:
        try:
            return list(super().__call__(lm, lm_kwargs, signature, demos, inputs))
        except AdapterParseError:
            if self._reasks < 1:
                raise
        signature = signature.with_instructions(signature.instructions + REASK_NOTE)
        with charged_as("reask"):
            return list(super().__call__(lm, lm_kwargs, signature, demos, inputs))


def _is_python(text: str) -> bool:
    stripped = text.strip()
    if not stripped or len(stripped) > 100_000:
        return False
    try:
        ast.parse(stripped)
    except (SyntaxError, ValueError):
        return False
    return True
