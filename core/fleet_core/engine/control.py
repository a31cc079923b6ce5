"""One Turn's shared limits: model-call budget, deadline, cancel scope, agent-tree capacity, usage.

Root and every child agent share one ``TurnControl``. Everything that waits or spends checks it:
the metered LMs charge it before each call, the interpreter checks it before and after each cell,
and the delegation tools reserve child capacity from it. ``cancel`` and ``expire`` may be called
from any thread; they run the registered interrupt hooks (sandbox cells, children) at once.

A model call is not a cell: it blocks its thread in an HTTP read (or in a retry's backoff), where
no check runs. ``interruptible`` runs such a call in a helper thread and returns as soon as the
Turn stops or its deadline passes, whichever comes first (the deadline expires the Turn there, so
the stop hooks run on time even if nothing else notices); waits inside the call (the embedded
LM's backoff) use ``running_control()`` to end at the stop too.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypedDict, TypeVar

from fleet_core.errors import FleetError
from fleet_core.event_payloads import BudgetUpdatePayload, Payload, StatusPayload
from fleet_core.models import TURN_CANCELLED, Usage

Terminal = Literal["cancelled", "deadline", "budget"]
T = TypeVar("T")

_running: contextvars.ContextVar[TurnControl | None] = contextvars.ContextVar(
    "fleet_running_control", default=None
)


def running_control() -> TurnControl | None:
    """The Turn whose ``interruptible`` call runs in this context (None outside one): what a
    wait inside a model call (a retry's backoff) ends at."""
    return _running.get()


class Emit(Protocol):
    """How the engine emits an event: ``emit(kind, payload)``, the payload being the kind's model
    (``fleet_core.event_payloads``; ``EventChannel.emit``, or ``tee_emit`` of it)."""

    def __call__(
        self,
        kind: str,
        payload: Payload,
        /,
        *,
        agent_id: str = ...,
        parent_agent_id: str | None = ...,
    ) -> None: ...


class Lineage(TypedDict):
    """The agent an event is about (``emit(kind, payload, **lineage)``)."""

    agent_id: str
    parent_agent_id: str | None


class TurnStopped(FleetError):
    """The Turn as a whole must end (cancellation, deadline or budget); never returned as data."""

    kind = "TurnStopped"
    status: Literal["failed", "cancelled"] = "failed"


class TurnCancelled(TurnStopped):
    kind = TURN_CANCELLED
    status = "cancelled"


class TurnDeadlineExceeded(TurnStopped):
    kind = "TurnDeadlineExceeded"


class BudgetExhausted(TurnStopped):
    kind = "BudgetExhausted"


class ChildCapacityError(FleetError):
    """A spawn was refused (depth or capacity); returned to the model as a tool error."""

    kind = "ChildCapacity"


@dataclass(frozen=True, slots=True)
class AgentLimits:
    max_depth: int = 3
    max_children: int = 8
    max_live_children: int = 4


class _Hooks:
    def __init__(self) -> None:
        self._next = 0
        self._items: dict[int, Callable[[], None]] = {}

    def add(self, fn: Callable[[], None]) -> int:
        self._next += 1
        self._items[self._next] = fn
        return self._next

    def pop(self, key: int) -> None:
        self._items.pop(key, None)

    def all(self) -> list[Callable[[], None]]:
        return list(self._items.values())


def _noop_emit(*args: Any, **kwargs: Any) -> None:
    return None


class TurnControl:
    """Budget, deadline, cancellation, capacity and host-observed usage of one Turn."""

    def __init__(
        self,
        *,
        max_units: int,
        timeout_seconds: float | None,
        limits: AgentLimits | None = None,
        emit: Emit | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_units = max_units
        self.limits = limits or AgentLimits()
        self.emit: Emit = emit or _noop_emit
        self._clock = clock
        self.started_at = clock()
        self.deadline_at = (
            self.started_at + timeout_seconds if timeout_seconds and timeout_seconds > 0 else None
        )
        self._lock = threading.Lock()
        self._terminal: Terminal | None = None
        self._reason = ""
        self._stopped = threading.Event()
        self._hooks = _Hooks()
        # usage
        self.units = 0
        self.by_category: dict[str, int] = {}
        self.jev_by_category: dict[str, int] = {}  # decisions Jev answered (fleet_core.engine.jev)
        self.sandbox_errors = 0
        self.submit_rejections = 0
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None
        self.model_ms = 0.0  # wall time inside model calls
        self.server_ms: tuple[float, float] | None = None  # the server's prompt, generation ms
        self.sandbox_ms = 0.0  # wall time running cells
        self.model_start_ms: float | None = None  # getting the models (the embedded server's start)
        # agent tree
        self.children_started = 0
        self.live_children = 0

    # --- state -------------------------------------------------------------------------------

    @property
    def terminal(self) -> Terminal | None:
        return self._terminal

    @property
    def stopped(self) -> threading.Event:
        """Set once the Turn is cancelled, past its deadline or out of budget."""
        return self._stopped

    def remaining_seconds(self) -> float | None:
        if self.deadline_at is None:
            return None
        return max(0.0, self.deadline_at - self._clock())

    def elapsed(self) -> float:
        return self._clock() - self.started_at

    def check(self) -> None:
        """Raise the Turn-ending error if the Turn was stopped or its deadline passed."""
        deadline = self.deadline_at
        if self._terminal is None and deadline is not None and self._clock() >= deadline:
            self.expire()
        terminal = self._terminal
        if terminal is None:
            return
        raise self.error()

    def error(self) -> TurnStopped:
        if self._terminal == "cancelled":
            return TurnCancelled(self._reason or "The Turn was cancelled")
        if self._terminal == "deadline":
            return TurnDeadlineExceeded(self._reason or "The Turn ran past its deadline")
        return BudgetExhausted(self._reason or "The Turn's model-call budget is exhausted")

    def _stop(self, terminal: Terminal, reason: str) -> bool:
        with self._lock:
            if self._terminal is not None:
                return False
            self._terminal = terminal
            self._reason = reason
            hooks = self._hooks.all()
        self._stopped.set()
        self.emit("status", StatusPayload(status="stopping", reason=terminal, message=reason))
        for hook in hooks:
            try:
                hook()
            except Exception:  # noqa: S112 - an interrupt hook failing must not stop the others
                continue
        return True

    def cancel(self, reason: str = "The Turn was cancelled") -> bool:
        return self._stop("cancelled", reason)

    def expire(self) -> bool:
        seconds = 0.0 if self.deadline_at is None else self.deadline_at - self.started_at
        return self._stop("deadline", f"The Turn ran past its {seconds:g}-second deadline")

    @contextmanager
    def on_stop(self, hook: Callable[[], None]) -> Iterator[None]:
        """Run ``hook`` (from any thread) if the Turn stops while the block runs."""
        with self._lock:
            key = self._hooks.add(hook)
            already = self._terminal is not None
        try:
            if already:
                hook()
            yield
        finally:
            with self._lock:
                self._hooks.pop(key)

    def interruptible(self, call: Callable[[], T]) -> T:
        """``call()``, run in a helper thread, or the Turn-ending error as soon as the Turn stops
        or its deadline passes (the deadline expires the Turn here). A call cut short is left
        to finish in its thread; its own waits end at the stop (``running_control``)."""
        self.check()
        wake = threading.Event()
        box: dict[str, Any] = {}
        context = contextvars.copy_context()

        def run() -> None:
            _running.set(self)
            try:
                box["value"] = call()
            except BaseException as exc:  # re-raised in the caller's thread
                box["error"] = exc
            finally:
                wake.set()

        helper = threading.Thread(target=context.run, args=(run,), daemon=True)
        with self.on_stop(wake.set):
            helper.start()
            while not wake.wait(self.remaining_seconds()):
                self.check()  # the deadline passed: expire (stop hooks run) and raise
        if "error" in box:
            raise box["error"]
        if "value" not in box:
            raise self.error()
        return box["value"]  # type: ignore[no-any-return]

    def pause(self, seconds: float) -> None:
        """Sleep ``seconds``, or raise the Turn-ending error as soon as the Turn stops or its
        deadline passes."""
        remaining = self.remaining_seconds()
        self._stopped.wait(seconds if remaining is None else min(seconds, remaining))
        self.check()

    # --- budget ------------------------------------------------------------------------------

    def charge(self, units: int, category: str, agent_id: str = "root") -> None:
        """Spend ``units`` model-call units or end the Turn with ``BudgetExhausted``."""
        self.check()
        with self._lock:
            if self.units + units > self.max_units:
                over = True
            else:
                over = False
                self.units += units
                self.by_category[category] = self.by_category.get(category, 0) + units
            used = self.units
        if over:
            self._stop(
                "budget",
                f"The Turn's model-call budget is exhausted ({used} of {self.max_units} units "
                f"used; {units} more requested for {category})",
            )
            raise self.error()
        self.emit(
            "budget_update",
            BudgetUpdatePayload(used=used, max=self.max_units, category=category),
            agent_id=agent_id,
        )

    def add_tokens(self, input_tokens: int | None, output_tokens: int | None) -> None:
        with self._lock:
            if input_tokens is not None:
                self.input_tokens = (self.input_tokens or 0) + input_tokens
            if output_tokens is not None:
                self.output_tokens = (self.output_tokens or 0) + output_tokens

    def add_model_time(self, call_ms: float, server: tuple[float, float] | None) -> None:
        """One model call's wall time and, when the server reported them, its prompt-processing
        and generation milliseconds."""
        with self._lock:
            self.model_ms += call_ms
            if server is not None:
                prompt, generation = self.server_ms or (0.0, 0.0)
                self.server_ms = (prompt + server[0], generation + server[1])

    def add_model_start_time(self, ms: float) -> None:
        """Time spent getting a model before its calls (starting or proving the embedded
        server), which is inside no model call."""
        with self._lock:
            self.model_start_ms = (self.model_start_ms or 0.0) + ms

    def add_sandbox_time(self, ms: float) -> None:
        with self._lock:
            self.sandbox_ms += ms

    def refund(self, units: int, category: str) -> None:
        """Give back units charged for a call that produced nothing (a failed Jev call, whose
        decisions the sub LM then makes and charges)."""
        with self._lock:
            back = min(units, self.by_category.get(category, 0), self.units)
            self.units -= back
            self.by_category[category] = self.by_category.get(category, 0) - back

    def note_jev_decisions(self, category: str, count: int) -> None:
        """``count`` decisions of ``category`` answered by Jev (their units already charged)."""
        with self._lock:
            self.jev_by_category[category] = self.jev_by_category.get(category, 0) + count

    def note_sandbox_error(self) -> None:
        with self._lock:
            self.sandbox_errors += 1

    def note_submit_rejection(self) -> None:
        with self._lock:
            self.submit_rejections += 1

    def usage(self) -> Usage:
        with self._lock:
            return Usage(
                model_calls=self.units,
                sandbox_errors=self.sandbox_errors,
                submit_rejections=self.submit_rejections,
                input_tokens=self.input_tokens,
                output_tokens=self.output_tokens,
                calls_by_category={k: v for k, v in self.by_category.items() if v},
                jev_decisions_by_category=dict(self.jev_by_category),
                model_seconds=round(self.model_ms / 1000, 3) if self.units else None,
                prompt_seconds=round(self.server_ms[0] / 1000, 3) if self.server_ms else None,
                generation_seconds=round(self.server_ms[1] / 1000, 3) if self.server_ms else None,
                sandbox_seconds=round(self.sandbox_ms / 1000, 3) if self.sandbox_ms else None,
                model_start_seconds=(
                    None if self.model_start_ms is None else round(self.model_start_ms / 1000, 3)
                ),
            )

    # --- agent tree --------------------------------------------------------------------------

    @contextmanager
    def child_slot(self, parent_depth: int) -> Iterator[int]:
        """Reserve a child at ``parent_depth + 1``; refuse (never queue) when over capacity."""
        self.check()
        limits = self.limits
        with self._lock:
            self._check_depth(parent_depth)
            if self.children_started >= limits.max_children:
                raise ChildCapacityError(
                    f"Child sandbox capacity exhausted: this Turn already started "
                    f"{self.children_started} of {limits.max_children} children"
                )
            if self.live_children >= limits.max_live_children:
                raise ChildCapacityError(
                    f"Child sandbox capacity exhausted: {self.live_children} children are running "
                    f"(the limit is {limits.max_live_children}); spawn refused to avoid a "
                    "wait cycle"
                )
            self.children_started += 1
            self.live_children += 1
        try:
            yield parent_depth + 1
        finally:
            with self._lock:
                self.live_children -= 1

    def reserve_children(self, parent_depth: int, count: int) -> None:
        """Check up front that ``count`` children can run together (``spawn_agents``)."""
        limits = self.limits
        with self._lock:
            self._check_depth(parent_depth)
            if self.children_started + count > limits.max_children:
                raise ChildCapacityError(
                    f"Child sandbox capacity exhausted: {count} more children would exceed "
                    f"{limits.max_children} per Turn ({self.children_started} already started)"
                )

    def _check_depth(self, parent_depth: int) -> None:
        if parent_depth >= self.limits.max_depth:
            raise ChildCapacityError(
                f"Agent recursion depth exhausted: depth {parent_depth} may not spawn "
                f"(the limit is {self.limits.max_depth})"
            )
