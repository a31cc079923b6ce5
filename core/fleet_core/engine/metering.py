"""Metered LMs: every model call of a Turn is charged to the shared budget and reported.

``MeteredLM`` wraps a role's ``dspy.LM``: before each call it charges one unit per requested
completion to the Turn's ``TurnControl`` (which raises to end the Turn when the budget is gone),
then emits ``lm_start``/``lm_end`` with duration and the provider-reported token usage, and adds
the call's wall time (and the server's prompt-processing and generation time, when the model
reported it: :func:`report_timings`, called by the embedded model's LM) to the Turn's usage. The
call runs through ``TurnControl.interruptible``: a cancel or the deadline ends it at once, even
while the HTTP request or a retry's backoff is still waiting.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import dspy
from dspy.clients._deprecation import adapter_message_call
from dspy.primitives.facade import SandboxLM

from fleet_core.engine.control import Lineage, TurnControl
from fleet_core.event_payloads import LmEndPayload, LmStartPayload, TokenUsage
from fleet_core.localmodel.slots import CallTimings

_category: ContextVar[str | None] = ContextVar("fleet_charge_category", default=None)
_timings: ContextVar[list[CallTimings] | None] = ContextVar("fleet_server_timings", default=None)
_ids = itertools.count(1)


@contextmanager
def charged_as(category: str) -> Iterator[None]:
    """Charge model calls made in this block under ``category`` (e.g. adapter re-asks)."""
    token = _category.set(category)
    try:
        yield
    finally:
        _category.reset(token)


def report_timings(timings: CallTimings) -> None:
    """The server's time for the model call running now (the metered call collects it)."""
    sink = _timings.get()
    if sink is not None:
        sink.append(timings)


def _tokens(usage: dict[str, dict[str, Any]]) -> tuple[int | None, int | None]:
    prompt = completion = None
    for entry in usage.values():
        if isinstance(entry.get("prompt_tokens"), int):
            prompt = (prompt or 0) + entry["prompt_tokens"]
        if isinstance(entry.get("completion_tokens"), int):
            completion = (completion or 0) + entry["completion_tokens"]
    return prompt, completion


class MeteredLM(SandboxLM):  # type: ignore[misc]
    """A role LM as one agent of one Turn sees it: charged, timed and reported."""

    def __init__(
        self,
        lm: Any,
        control: TurnControl,
        *,
        category: str,
        agent_id: str = "root",
        parent_agent_id: str | None = None,
    ) -> None:
        super().__init__(lm, reserve=None)
        self._control = control
        self._category_name = category
        self._agent_id = agent_id
        self._parent = parent_agent_id

    @staticmethod
    def _check(kwargs: dict[str, Any]) -> None:  # host code may pass any option
        return None

    def _metered(self, kwargs: dict[str, Any], call: Any) -> Any:
        units = max(1, int(kwargs.get("n", self.kwargs.get("n")) or 1))
        category = _category.get() or self._category_name
        self._control.charge(units, category, self._agent_id)
        call_id = f"lm{next(_ids)}"
        model = str(getattr(self._lm, "model", "") or "")[:150]
        emit = self._control.emit
        lineage = Lineage(agent_id=self._agent_id, parent_agent_id=self._parent)
        emit("lm_start", LmStartPayload(call_id=call_id, model=model, category=category), **lineage)
        started = time.perf_counter()
        ok, error_type = True, None
        prompt = completion = None
        server: list[CallTimings] = []
        sink = _timings.set(server)
        try:
            with dspy.track_usage() as tracker:
                result = self._control.interruptible(call)  # ends at a stop or the deadline
            prompt, completion = _tokens(tracker.get_total_tokens())
            self._control.add_tokens(prompt, completion)
            return result
        except BaseException as exc:
            ok, error_type = False, type(exc).__name__
            raise
        finally:
            _timings.reset(sink)
            elapsed_ms = (time.perf_counter() - started) * 1000
            spent = sum(server, CallTimings()) if server else None
            self._control.add_model_time(
                elapsed_ms, (spent.prompt_ms, spent.generation_ms) if spent else None
            )
            usage = None
            if prompt is not None or completion is not None:
                usage = TokenUsage(input_tokens=prompt, output_tokens=completion)
            emit(
                "lm_end",
                LmEndPayload(
                    call_id=call_id,
                    model=model,
                    category=category,
                    duration_ms=round(elapsed_ms, 2),
                    ok=ok,
                    error_type=error_type,
                    usage=usage,
                ),
                **lineage,
            )

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        messages = kwargs.get("messages")
        if messages is None:
            return self._metered(kwargs, lambda: self._lm(*args, **kwargs))

        def call() -> Any:
            # the adapter's messages= call, forwarded: dspy's deprecation check expects the real LM
            with adapter_message_call(self._lm, messages):
                return self._lm(*args, **kwargs)

        return self._metered(kwargs, call)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self._metered(kwargs, lambda: self._lm.forward(*args, **kwargs))

    async def acall(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("Fleet runs DSPy programs synchronously in a worker thread")

    async def aforward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("Fleet runs DSPy programs synchronously in a worker thread")

    def copy(self, **kwargs: Any) -> MeteredLM:
        return MeteredLM(
            self._lm.copy(**kwargs),
            self._control,
            category=self._category_name,
            agent_id=self._agent_id,
            parent_agent_id=self._parent,
        )
