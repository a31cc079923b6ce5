"""Scripted LMs for tests, benchmarks and ``demo --scripted`` harnesses (the only model stand-in).

A ``ScriptedEngine`` is a dspy custom engine: each call returns the next reply of a script as raw
text, so it serves both adapter-parsed predictors (RLM actions, triage, direct answers) and
``llm_query``. Rules route replies by a substring of the request, which keeps concurrent children
deterministic. Build LMs with ``scripted_lm(...)`` and pass them through ``StaticLmProvider``::

    root = scripted_lm([route("rlm"), action("print(1)"), action("SUBMIT(answer='1', ...)")])
    runtime = await FleetRuntime.open(config, lm_provider=StaticLmProvider(root))
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import dspy
from dspy.lm15 import Message, Response, TextPart, Usage


class ModelReply:
    """A reply rendered from the model id the call named (``request.model``), e.g. to show in
    an answer which model a Session's selection made the Turn call."""

    def __init__(self, render: Callable[[str], str]) -> None:
        self.render = render


Reply = str | Callable[[str], str] | ModelReply


def submit_model(note: str = "") -> ModelReply:
    """An RLM action that submits the id of the model it was asked as (``'openai/<id>'``)."""
    return ModelReply(lambda model: submit(repr(model), note))


def action(code: str, reasoning: str = "Next step.") -> str:
    """One RLM action reply (ChatAdapter form) running ``code``."""
    return (
        f"[[ ## reasoning ## ]]\n{reasoning}\n\n[[ ## code ## ]]\n```python\n{code.strip()}\n```"
        "\n\n[[ ## completed ## ]]"
    )


def fields(**values: Any) -> str:
    """A ChatAdapter reply with the given output fields (direct answers, extract fallback)."""
    body = "\n\n".join(f"[[ ## {k} ## ]]\n{v}" for k, v in values.items())
    return body + "\n\n[[ ## completed ## ]]"


def route(label: str) -> str:
    """A triage reply choosing ``label``."""
    return fields(route=label)


def submit(answer: str, note: str = "") -> str:
    """An RLM action that submits ``answer`` (a Python expression) and a note."""
    return action(f"SUBMIT(answer={answer}, learned_skill_note={note!r})", "Submit.")


def request_text(request: Any) -> str:
    parts = [str(getattr(request, "system", "") or "")]
    for message in getattr(request, "messages", ()) or ():
        parts.append(str(getattr(message, "text", "") or ""))
    return "\n".join(parts)


class ScriptedEngine:
    """A thread-safe dspy engine replying from a script (see the module docstring).

    ``replies`` are consumed in order by calls no rule matches. ``rules`` map a substring of the
    request text to a queue of replies (or one reply reused forever when given as a plain string or
    callable). ``latency`` seconds are slept before each reply, like a hosted model.
    """

    def __init__(
        self,
        replies: Iterable[Reply] = (),
        *,
        rules: Mapping[str, Reply | list[Reply]] | None = None,
        latency: float = 0.0,
        default: Reply = "[[ ## answer ## ]]\nNo more scripted replies\n\n[[ ## completed ## ]]",
    ) -> None:
        self._replies: deque[Reply] = deque(replies)
        self._rules: list[tuple[str, deque[Reply] | Reply]] = [
            (key, deque(value) if isinstance(value, list) else value)
            for key, value in (rules or {}).items()
        ]
        self.latency = latency
        self.default = default
        self.requests: list[str] = []
        self.models: list[str] = []  # the model id each call named, in order
        self._lock = threading.Lock()

    @property
    def remaining(self) -> int:
        return len(self._replies)

    def _next(self, text: str) -> Reply:
        with self._lock:
            self.requests.append(text)
            for key, value in self._rules:
                if key in text:
                    if isinstance(value, deque):
                        if value:
                            return value.popleft()
                        continue
                    return value
            return self._replies.popleft() if self._replies else self.default

    def complete(self, request: Any) -> Response:
        text = request_text(request)
        with self._lock:
            self.models.append(str(request.model))
        reply = self._next(text)
        if self.latency:
            time.sleep(self.latency)
        if isinstance(reply, ModelReply):
            body = reply.render(str(request.model))
        else:
            body = reply(text) if callable(reply) else reply
        return Response(
            id=None,
            model=request.model,
            message=Message.assistant([TextPart(body)]),
            finish_reason="stop",
            usage=Usage(input_tokens=10, output_tokens=5, total_tokens=15),
        )

    def close(self) -> None:
        return None


def scripted_lm(
    replies: Iterable[Reply] = (),
    *,
    model: str = "openai/scripted",
    rules: Mapping[str, Reply | list[Reply]] | None = None,
    latency: float = 0.0,
) -> Any:
    """A ``dspy.LM`` (cache off) over a ``ScriptedEngine``; the engine is ``lm.engine_script``."""
    engine = ScriptedEngine(replies, rules=rules, latency=latency)
    lm = dspy.LM(model, engine=engine, cache=False)
    lm.engine_script = engine
    return lm


class SwitchableLms:
    """An ``LmProvider`` whose role LMs a test sets (``lms.root = scripted_lm([...])``) while the
    runtime is open; ``sub`` falls back to ``root``."""

    def __init__(self) -> None:
        self.root: Any = None
        self.sub: Any = None

    def check(self, *roles: str) -> None:
        return None

    def lm(self, role: str) -> Any:
        if role == "root":
            return self.root
        return self.sub if self.sub is not None else self.root

    def uses_embedded(self, role: str) -> bool:
        return False
