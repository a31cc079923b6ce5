"""The embedded model's ``dspy.LM``: before every request it proves that the socket on the
server's port still belongs to the server the supervisor started (docs/security.md, "Another
local user and the embedded model"), so a Turn never sends a prompt to another process that
took the port after the server stopped; the call then fails with ``ModelUnavailable`` and
nothing is sent.

Only ``__call__`` and ``acall`` are wrapped (every DSPy adapter and the engine call these): an
override of ``forward`` would turn DSPy's native lm15 path into its legacy one. DSPy's own
retries are off (they would send the request again, a second later, without a new proof: just
when a dead server's port may have been taken); this class retries transient failures itself,
proving the server before each attempt. Inside a Turn, the wait before a retry ends at the Turn's
cancel or deadline (``fleet_core.engine.control.running_control``), so a stopped Turn sends no
more requests.

Around each call it also keeps the server's KV state across restarts and reports the call's time
on the server (:mod:`fleet_core.localmodel.slots`): the slot keeper restores the state saved for
the call's system prompt before a new server's first call and saves it after the first call that
has none; the call's ``timings`` (from the response, or from the server's ``/metrics`` when the
caller gets only text) go to :func:`fleet_core.engine.metering.report_timings`.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import dspy
from dspy.utils.exceptions import is_retryable_lm_error

from fleet_core.engine.control import running_control
from fleet_core.engine.metering import report_timings
from fleet_core.localmodel.slots import (
    CallTimings,
    SlotKeeper,
    metrics_delta,
    response_timings,
)


class EmbeddedLM(dspy.LM):  # type: ignore[misc]
    """A ``dspy.LM`` on the embedded server ``server = (port, server_pid, server_start)``."""

    def __init__(
        self,
        model: str,
        *,
        server: tuple[int, int | None, int | None],
        num_retries: int = 0,
        slots: SlotKeeper | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(model, num_retries=0, **kwargs)
        self.fleet_server = server  # plain ints: copies and pickles keep it
        self.fleet_retries = num_retries
        self.fleet_slots = slots  # shared by copies (SlotKeeper.__deepcopy__)

    def _prove(self) -> None:
        from fleet_core.localmodel.supervisor import verify_server

        port, server_pid, server_start = self.fleet_server
        verify_server(port, server_pid, server_start)

    def _retry(self, exc: Exception, attempt: int) -> float | None:
        """Seconds to wait before the next attempt, or ``None`` to give up (DSPy's backoff)."""
        if attempt >= self.fleet_retries or not is_retryable_lm_error(exc):
            return None
        return float(min(2**attempt, 60))

    def _before(
        self, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[str, dict[str, float]]:
        """The call's system prompt (its state restored on a new server's first call) and, when
        the caller gets only text, the server's counters before it."""
        keeper = self.fleet_slots
        system = _system_text(args, kwargs)
        if keeper is None:
            return system, {}
        keeper.before(system)
        return system, ({} if _is_request(args, kwargs) else keeper.metrics())

    def _after(self, result: Any, system: str, counters: dict[str, float]) -> None:
        keeper = self.fleet_slots
        timings: CallTimings | None = response_timings(getattr(result, "provider_data", None))
        if timings is None and keeper is not None and counters:
            timings = metrics_delta(counters, keeper.metrics())
        if timings is not None:
            report_timings(timings)
        if keeper is not None:
            keeper.after(system)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        attempt = 0
        while True:
            self._prove()
            system, counters = self._before(args, kwargs)
            try:
                result = super().__call__(*args, **kwargs)
            except Exception as exc:
                wait = self._retry(exc, attempt)
                if wait is None:
                    raise
            else:
                self._after(result, system, counters)
                return result
            attempt += 1
            _backoff(wait)

    async def acall(self, *args: Any, **kwargs: Any) -> Any:
        attempt = 0
        while True:
            self._prove()
            try:
                return await super().acall(*args, **kwargs)
            except Exception as exc:
                wait = self._retry(exc, attempt)
                if wait is None:
                    raise
            attempt += 1
            await asyncio.sleep(wait)


def _backoff(seconds: float) -> None:
    """Wait before a retry; inside a Turn's model call, end at once (raising the Turn's error)
    when the Turn is cancelled or past its deadline, so no request is sent after it stopped."""
    control = running_control()
    if control is None:
        time.sleep(seconds)
        return
    control.pause(seconds)


def _is_request(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    first = args[0] if args else kwargs.get("prompt")
    return first is not None and not isinstance(first, str) and hasattr(first, "messages")


def _system_text(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """The system prompt of an lm15 ``Request`` or of OpenAI-style ``messages`` ('' if none)."""
    if _is_request(args, kwargs):
        system = getattr(args[0] if args else kwargs.get("prompt"), "system", None)
        if isinstance(system, str):
            return system
        parts = getattr(system, "parts", None) or (system if isinstance(system, tuple) else ())
        return "".join(str(getattr(part, "text", "") or "") for part in parts)
    for message in kwargs.get("messages") or ():
        if isinstance(message, dict) and message.get("role") == "system":
            content = message.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                return "".join(
                    str(part.get("text", "")) for part in content if isinstance(part, dict)
                )
    return ""
