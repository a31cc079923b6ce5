"""A Turn's event stream: thread-safe, bounded, never blocking the producer.

Producers (the worker thread, tool threads, children) call ``emit``; it assigns the sequence number
and queues the event. A consumer task on the event loop drains the queue and calls ``on_event``.
Progress-like kinds (``budget_update``, ``status``) are coalesced: a newer one replaces a pending
one of the same kind and agent. When the queue is full, non-essential events are dropped and
counted, so a slow consumer can never stall the Turn. With ``redact`` every payload is redacted
(credentials, configured secrets) in the producer's thread before it is queued.

``emit`` is the single point every event passes, and it takes the kind's payload model
(``fleet_core.event_payloads``), never a dict: the model was validated when the emitter built it,
``emit`` checks that it is the kind's model (``EventPayloadError`` in the emitter otherwise) and
serializes it once (``wire_payload``) into the payload that goes out, redacted and bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from fleet_core.event_payloads import Payload, StatusPayload, wire_payload
from fleet_core.events import ROOT_AGENT, TurnEvent

log = logging.getLogger(__name__)
COALESCED = frozenset({"budget_update", "status"})
ESSENTIAL = frozenset(
    {
        "turn_started",
        "triage_decision",
        "child_spawned",
        "child_finished",
        "ungrounded_submit",
        "turn_completed",
        "turn_failed",
        "turn_cancelled",
    }
)
MAX_PENDING = 1_000
MAX_TEXT = 20_000


def clip(value: Any, limit: int = 4_000) -> Any:
    """Bound strings (recursively) so event payloads stay small."""
    if isinstance(value, str):
        return value if len(value) <= limit else value[:limit] + f"... [{len(value) - limit} more]"
    if isinstance(value, dict):
        return {str(k): clip(v, limit) for k, v in list(value.items())[:100]}
    if isinstance(value, list | tuple):
        return [clip(v, limit) for v in list(value)[:100]]
    if value is None or isinstance(value, bool | int | float):
        return value
    return clip(repr(value), limit)


class EventChannel:
    """Sequence, queue and deliver one Turn's events."""

    def __init__(
        self,
        turn_id: str,
        session_id: str,
        *,
        max_pending: int = MAX_PENDING,
        redact: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> None:
        self.turn_id = turn_id
        self.redact = redact
        self.session_id = session_id
        self.max_pending = max_pending
        self._lock = threading.Lock()
        self._queue: deque[TurnEvent] = deque()
        self._seq = 0
        self._dropped = 0
        self._closed = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self.delivered = 0

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._wake = asyncio.Event()

    def emit(
        self,
        kind: str,
        payload: Payload,
        *,
        agent_id: str = ROOT_AGENT,
        parent_agent_id: str | None = None,
    ) -> None:
        """Queue an event (any thread); never blocks. ``payload`` is the kind's model; anything
        else raises ``EventPayloadError`` here, in the emitter."""
        wire = wire_payload(kind, payload)  # the one serialization
        try:
            if self.redact is not None:  # in the producer's thread, before anything leaves
                wire = self.redact(wire)
            self._emit(kind, clip(wire), agent_id, parent_agent_id)
        except Exception:  # pragma: no cover - emission must never break a Turn
            log.exception("dropping a %s event", kind)

    def _emit(self, kind: str, payload: dict[str, Any], agent_id: str, parent: str | None) -> None:
        with self._lock:
            if self._closed:
                return
            if kind in COALESCED:
                for index in range(len(self._queue) - 1, -1, -1):
                    pending = self._queue[index]
                    if pending.kind == kind and pending.agent_id == agent_id:
                        self._queue[index] = pending.model_copy(update={"payload": payload})
                        return
            if len(self._queue) >= self.max_pending and kind not in ESSENTIAL:
                self._dropped += 1
                return
            self._seq += 1
            event = TurnEvent(
                turn_id=self.turn_id,
                session_id=self.session_id,
                seq=self._seq,
                agent_id=agent_id,
                parent_agent_id=parent,
                kind=kind,
                payload=payload,
            )
            self._queue.append(event)
        self._notify()

    def _notify(self) -> None:
        loop, wake = self._loop, self._wake
        if loop is None or wake is None:
            return
        with contextlib.suppress(RuntimeError):  # the loop is closed
            loop.call_soon_threadsafe(wake.set)

    def drain(self) -> list[TurnEvent]:
        with self._lock:
            items = list(self._queue)
            self._queue.clear()
            dropped, self._dropped = self._dropped, 0
        if dropped:
            items.append(self._synthetic_drop(dropped))
        return items

    def _synthetic_drop(self, dropped: int) -> TurnEvent:
        with self._lock:
            self._seq += 1
            seq = self._seq
        return TurnEvent(
            turn_id=self.turn_id,
            session_id=self.session_id,
            seq=seq,
            kind="status",
            payload=wire_payload("status", StatusPayload(status="events_dropped", dropped=dropped)),
        )

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self._notify()

    async def pump(self, on_event: Callable[[TurnEvent], None] | None) -> None:
        """Deliver events on the loop until cancelled (call ``flush`` afterwards)."""
        assert self._wake is not None, "bind() the channel to the loop first"
        while True:
            await self._wake.wait()
            self._wake.clear()
            self.flush(on_event)

    def flush(self, on_event: Callable[[TurnEvent], None] | None) -> None:
        for event in self.drain():
            self.delivered += 1
            if on_event is None:
                continue
            try:
                on_event(event)
            except Exception:
                log.exception("on_event raised for %s #%d", event.kind, event.seq)
