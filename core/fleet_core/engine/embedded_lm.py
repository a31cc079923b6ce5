"""The embedded model's ``dspy.LM``: before every request it proves that the socket on the
server's port still belongs to the server the supervisor started (docs/security.md, "Another
local user and the embedded model"), so a Turn never sends a prompt to another process that
took the port after the server stopped; the call then fails with ``ModelUnavailable`` and
nothing is sent.

Only ``__call__`` and ``acall`` are wrapped (every DSPy adapter and the engine call these): an
override of ``forward`` would turn DSPy's native lm15 path into its legacy one. DSPy's own
retries are off (they would send the request again, a second later, without a new proof: just
when a dead server's port may have been taken); this class retries transient failures itself,
proving the server before each attempt.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import dspy
from dspy.utils.exceptions import is_retryable_lm_error


class EmbeddedLM(dspy.LM):  # type: ignore[misc]
    """A ``dspy.LM`` on the embedded server ``server = (port, server_pid, server_start)``."""

    def __init__(
        self,
        model: str,
        *,
        server: tuple[int, int | None, int | None],
        num_retries: int = 0,
        **kwargs: Any,
    ) -> None:
        super().__init__(model, num_retries=0, **kwargs)
        self.fleet_server = server  # plain ints: copies and pickles keep it
        self.fleet_retries = num_retries

    def _prove(self) -> None:
        from fleet_core.localmodel.supervisor import verify_server

        port, server_pid, server_start = self.fleet_server
        verify_server(port, server_pid, server_start)

    def _retry(self, exc: Exception, attempt: int) -> float | None:
        """Seconds to wait before the next attempt, or ``None`` to give up (DSPy's backoff)."""
        if attempt >= self.fleet_retries or not is_retryable_lm_error(exc):
            return None
        return float(min(2**attempt, 60))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        attempt = 0
        while True:
            self._prove()
            try:
                return super().__call__(*args, **kwargs)
            except Exception as exc:
                wait = self._retry(exc, attempt)
                if wait is None:
                    raise
            attempt += 1
            time.sleep(wait)

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
