"""TurnEvents → ``$/progress`` (one token per Turn and per child agent) and ``fleet/turn/didEmit``.

- The Turn's token is the client's ``workDoneToken`` when given, else a server-created
  ``fleet/turn/<uuid>`` (only if the client supports ``window.workDoneProgress``).
- ``begin`` goes out when the Turn starts (``turn_started``), carrying ``turnId``/``sessionId``.
- Each child agent gets its own server-created token ``<turn token>/agent/<agentId>``; its values
  carry ``turnId``, ``agentId`` and ``parentAgentId``. Child tokens end before the parent's end.
- ``report``s are rate-limited per token (default 10/s): a report inside the interval replaces
  the pending one, which is flushed when the interval has passed (so the latest state shows).
- A ``window/workDoneProgress/cancel`` on the Turn's token calls ``on_cancel``.
- Every token this Turn used is removed from pygls' token table at the end (pygls never does).

All methods run on the event loop; ``on_event`` hops there itself when called from a thread.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fleet_core.event_payloads import (
    AnyPayload,
    ArtifactPayload,
    BudgetUpdatePayload,
    ChildFinishedPayload,
    ChildSpawnedPayload,
    CodeCellPayload,
    LmStartPayload,
    ModuleStartPayload,
    StatusPayload,
    ToolCallStartPayload,
    TriageDecisionPayload,
)
from fleet_core.events import ROOT_AGENT
from fleet_core.workspace import artifact_uri
from fleet_lsp.protocol import NOTIFY_ARTIFACT_CHANGE, NOTIFY_TURN_EVENT

if TYPE_CHECKING:
    from pygls.lsp.server import LanguageServer

    from fleet_core.events import TurnEvent

log = logging.getLogger(__name__)
CREATE_TIMEOUT = 5.0


@dataclass
class _Token:
    token: int | str
    agent_id: str
    parent_agent_id: str | None
    last_report: float = -1e9
    pending: dict[str, Any] | None = None
    timer: asyncio.TimerHandle | None = None
    ended: bool = False
    begun: bool = False
    children: list[str] = field(default_factory=list)


class TurnProgress:
    """Progress and event notifications for one Turn."""

    def __init__(
        self,
        server: LanguageServer,
        *,
        session_id: str,
        task: str,
        client_token: int | str | None,
        supports_create: bool,
        turn_events: bool,
        supports_content_refresh: bool,
        reports_per_second: float = 10.0,
        on_cancel: Callable[[], None] | None = None,
        seq_lookup: Callable[[str], Awaitable[int | None]] | None = None,
    ) -> None:
        self.server = server
        self.session_id = session_id
        self.task = task
        self.turn_id: str | None = None
        self.turn_seq: int | None = None
        self.interval = 1.0 / reports_per_second
        self._client_token = client_token
        self._supports_create = supports_create
        self._turn_events = turn_events
        self._supports_refresh = supports_content_refresh
        self._on_cancel = on_cancel
        self._seq_lookup = seq_lookup
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._queue: asyncio.Queue[TurnEvent | None] = asyncio.Queue()
        self._pump_task: asyncio.Task[None] | None = None
        self.root: _Token | None = None
        self.agents: dict[str, _Token] = {}
        self.sent: list[tuple[int | str, dict[str, Any]]] = []  # kept short; for debugging
        self._started_turn = asyncio.Event()
        self._route: str | None = None
        self._step: str | None = None
        self._cells = 0
        self._calls: str | None = None
        self._running_children: set[str] = set()
        self._artifacts_seen: set[str] = set()

    # lifecycle --------------------------------------------------------------------------------

    async def start(self) -> None:
        """Claim the Turn's token (create it on the client when the server picks it)."""
        token: int | str | None = self._client_token
        if token is None and self._supports_create:
            token = f"fleet/turn/{uuid.uuid4().hex}"
            if not await self._create(token):
                token = None
        if token is not None:
            self.root = _Token(token, ROOT_AGENT, None)
            future = self._progress.tokens.setdefault(token, Future())
            future.add_done_callback(self._cancelled_by_client)
        self._pump_task = asyncio.ensure_future(self._pump())

    def _cancelled_by_client(self, future: Future[Any]) -> None:
        if future.cancelled() and self._on_cancel is not None:
            self._loop.call_soon_threadsafe(self._on_cancel)

    @property
    def token(self) -> int | str | None:
        return self.root.token if self.root else None

    @property
    def _progress(self) -> Any:
        return self.server.work_done_progress

    def on_event(self, event: TurnEvent) -> None:
        """The Turn's ``on_event`` callback (any thread)."""
        if threading.get_ident() != self._loop_thread:
            self._loop.call_soon_threadsafe(self.on_event, event)
            return
        if self._turn_events:
            self.server.protocol.notify(NOTIFY_TURN_EVENT, _event_wire(event))
        self._queue.put_nowait(event)

    async def finish(
        self, status: str, turn_id: str | None = None, outcome: str | None = None
    ) -> None:
        """Drain pending events, end child tokens, then end the Turn's token (with the answer's
        ``outcome`` kind, when known); forget tokens."""
        if turn_id and not self.turn_id:
            self.turn_id = turn_id
        self._queue.put_nowait(None)
        if self._pump_task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._pump_task), timeout=10)
            except (TimeoutError, asyncio.CancelledError):
                self._pump_task.cancel()
        for agent in reversed(list(self.agents)):
            self._end(self.agents[agent], status)
        if self.root is not None:
            if not self.root.begun and self.turn_id:
                self._begin_root()
            self._end(self.root, status, outcome)
        self._forget()

    def _forget(self) -> None:
        tokens = self._progress.tokens
        for tok in [self.root, *self.agents.values()]:
            if tok is not None:
                tokens.pop(tok.token, None)

    # event handling ---------------------------------------------------------------------------

    async def _pump(self) -> None:
        while True:
            event = await self._queue.get()
            if event is None:
                return
            try:
                await self._handle(event)
            except Exception:  # progress must never break a Turn
                log.exception("progress: cannot handle %s", event.kind)

    async def _handle(self, event: TurnEvent) -> None:
        kind, data = event.kind, event.data
        if kind == "turn_started":
            self.turn_id = event.turn_id
            await self._lookup_seq(event.turn_id)
            if self.root is not None and not self.root.begun:
                self._begin_root()
            return
        if self.turn_id is None:
            self.turn_id = event.turn_id
        if kind in ("turn_completed", "turn_failed", "turn_cancelled"):
            return  # finish() ends the tokens with the result's status
        if kind in ("child_spawned", "child_finished"):
            await self._on_child(event, data)
            return
        if isinstance(data, ArtifactPayload):
            self.artifact_changed(data.path)
        if event.agent_id != ROOT_AGENT:
            tok = self.agents.get(event.agent_id)
            if tok is None:
                await self._open_child(event.agent_id, event.parent_agent_id or ROOT_AGENT, None)
                tok = self.agents.get(event.agent_id)
            if tok is not None and not tok.ended:
                message = _describe(kind, data)
                if message:
                    self._report(tok, {"message": f"{event.agent_id}: {message}"})
            return
        self._track_root(kind, data)
        self._report_root()

    async def _lookup_seq(self, turn_id: str) -> None:
        """The Turn's number in its Session, for the title (``turn_started`` does not carry it)."""
        if self._seq_lookup is None:
            return
        try:
            seq = await asyncio.wait_for(self._seq_lookup(turn_id), timeout=2)
        except Exception:
            seq = None
        self.turn_seq = seq if isinstance(seq, int) else None

    async def _on_child(self, event: TurnEvent, data: AnyPayload | None) -> None:
        """``child_spawned``/``child_finished``: the event's agent is the child."""
        child = event.agent_id
        if child == ROOT_AGENT:
            return
        if event.kind == "child_spawned":
            self._running_children.add(child)
            spawned = data if isinstance(data, ChildSpawnedPayload) else None
            await self._open_child(child, event.parent_agent_id or ROOT_AGENT, spawned)
        else:
            self._running_children.discard(child)
            tok = self.agents.get(child)
            if tok is not None:
                status = data.status if isinstance(data, ChildFinishedPayload) else "completed"
                for grandchild in tok.children:
                    if grandchild in self.agents:
                        self._end(self.agents[grandchild], status)
                self._end(tok, status)
        self._report_root()

    def _track_root(self, kind: str, data: AnyPayload | None) -> None:
        if isinstance(data, TriageDecisionPayload):
            self._route = data.route
        elif isinstance(data, CodeCellPayload) and data.phase != "bootstrap":
            self._cells += 1
            self._step = CELL_STEP
        elif isinstance(data, BudgetUpdatePayload):
            self._calls = f"{data.used}/{data.max}"
        else:
            described = _describe(kind, data)
            if described:
                self._step = described

    def _report_root(self) -> None:
        if self.root is None or not self.root.begun:
            return
        message = root_message(
            route=self._route,
            step=self._step,
            cells=self._cells,
            calls=self._calls,
            children_running=len(self._running_children),
        )
        if message:  # nothing known yet: the begin's "starting" stays, no placeholder report
            self._report(self.root, {"message": message})

    def artifact_changed(self, path: str) -> None:
        """Tell the client an artifact changed (refresh + ``fleet/artifact/didChange``)."""
        uri = artifact_uri(self.session_id, path)
        self._artifacts_seen.add(uri)
        self.server.protocol.notify(
            NOTIFY_ARTIFACT_CHANGE,
            {"uri": uri, "sessionId": self.session_id, "turnId": self.turn_id},
        )
        if self._supports_refresh:
            from lsprotocol import types

            future = self.server.protocol.send_request(
                types.WORKSPACE_TEXT_DOCUMENT_CONTENT_REFRESH,
                types.TextDocumentContentRefreshParams(uri=uri),
            )
            future.add_done_callback(lambda f: f.cancelled() or f.exception())

    # tokens -----------------------------------------------------------------------------------

    async def _create(self, token: int | str) -> bool:
        try:
            await asyncio.wait_for(self._progress.create_async(token), timeout=CREATE_TIMEOUT)
            return True
        except Exception as exc:
            log.warning("progress: the client refused token %s: %s", token, exc)
            return False

    def _begin_root(self) -> None:
        assert self.root is not None
        head = self.task.strip().splitlines()[0] if self.task.strip() else ""
        head = head if len(head) <= 60 else head[:59] + "…"
        number = f"Turn {self.turn_seq}" if self.turn_seq else "Turn"
        self._send(
            self.root,
            {
                "kind": "begin",
                "title": f"{number}: {head}",
                "message": "starting",
                "cancellable": True,
                "turnId": self.turn_id,
                "sessionId": self.session_id,
            },
        )
        self.root.begun = True

    async def _open_child(
        self, agent_id: str, parent: str, spawned: ChildSpawnedPayload | None
    ) -> None:
        if agent_id in self.agents or agent_id == ROOT_AGENT or self.root is None:
            return
        if not self._supports_create:
            return
        token = f"{self.root.token}/agent/{agent_id}"
        if not await self._create(token):
            return
        tok = _Token(token, agent_id, parent)
        self.agents[agent_id] = tok
        if parent in self.agents:
            self.agents[parent].children.append(agent_id)
        self._send(
            tok,
            {
                "kind": "begin",
                "title": f"↳ {_child_title(agent_id, spawned)}",
                "cancellable": False,
                "turnId": self.turn_id,
                "agentId": agent_id,
                "parentAgentId": parent,
            },
        )
        tok.begun = True

    def _report(self, tok: _Token, value: dict[str, Any]) -> None:
        if tok.ended or not tok.begun:
            return
        value = {"kind": "report", **value, "turnId": self.turn_id, "agentId": tok.agent_id}
        if tok.parent_agent_id:
            value["parentAgentId"] = tok.parent_agent_id
        now = time.monotonic()
        if now - tok.last_report >= self.interval and tok.timer is None:
            tok.last_report = now
            self._send(tok, value)
            return
        tok.pending = value
        if tok.timer is None:
            delay = max(0.0, tok.last_report + self.interval - now)
            tok.timer = self._loop.call_later(delay, self._flush, tok)

    def _flush(self, tok: _Token) -> None:
        tok.timer = None
        if tok.pending is not None and not tok.ended:
            value, tok.pending = tok.pending, None
            tok.last_report = time.monotonic()
            self._send(tok, value)

    def _end(self, tok: _Token, status: str, outcome: str | None = None) -> None:
        if tok.ended or not tok.begun:
            return
        if tok.timer is not None:
            tok.timer.cancel()
            tok.timer = None
        tok.pending = None
        tok.ended = True
        value: dict[str, Any] = {"kind": "end", "message": status, "turnId": self.turn_id}
        if outcome is not None:
            value["outcome"] = outcome
        if tok.agent_id != ROOT_AGENT:
            value["agentId"] = tok.agent_id
            value["parentAgentId"] = tok.parent_agent_id
        self._send(tok, value)

    def _send(self, tok: _Token, value: dict[str, Any]) -> None:
        from lsprotocol import types

        self.server.protocol.notify(
            types.PROGRESS, types.ProgressParams(token=tok.token, value=value)
        )
        if len(self.sent) < 500:
            self.sent.append((tok.token, value))


def _child_title(agent_id: str, spawned: ChildSpawnedPayload | None) -> str:
    """A child token's title: the first line of its subtask (at most 60 characters)."""
    subtask = spawned.subtask.strip() if spawned is not None else ""
    if not subtask:
        return agent_id
    head = subtask.splitlines()[0]
    return head if len(head) <= 60 else head[:59] + "…"


CELL_STEP = "running a cell"
ROUTING_CATEGORIES = ("triage", "routing")
# the sandbox's child-agent tools, in words (their names are the program's, not the user's)
SPAWN_STEPS = {
    "spawn_agent": "starting a child agent",
    "spawn_agents": "starting child agents",
}  # the engine charges triage calls as "routing"


def plural(count: int, noun: str) -> str:
    """``1 cell``, ``2 cells``, ``0 cells``."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def root_message(
    *, route: str | None, step: str | None, cells: int, calls: str | None, children_running: int
) -> str:
    """The root token's report text, in plain words for any client: ``route rlm · running cell 3
    · 12/150 model calls · 1 child agent running``; "" while nothing is known."""
    parts = []
    if route:
        parts.append(f"route {route}")
    if step == CELL_STEP and cells:
        parts.append(f"running cell {cells}")
    else:
        if step:
            parts.append(step)
        if cells:
            parts.append(f"{plural(cells, 'cell')} so far")
    if calls:
        parts.append(f"{calls} model calls")
    if children_running:
        parts.append(f"{plural(children_running, 'child agent')} running")
    return " · ".join(parts)


def _describe(kind: str, data: AnyPayload | None) -> str | None:
    """A short step description for a report, in plain words (never a DSPy class name such as
    ``Predict``; ``None``: the event changes no step)."""
    if isinstance(data, LmStartPayload):
        return "choosing a route" if data.category in ROUTING_CATEGORIES else "calling the model"
    if kind == "code_cell":
        return CELL_STEP
    if isinstance(data, ModuleStartPayload):
        return None
    if isinstance(data, ToolCallStartPayload):
        return SPAWN_STEPS.get(data.tool, f"tool {data.tool}")
    if isinstance(data, StatusPayload):
        return data.message or data.status
    if isinstance(data, ArtifactPayload):
        return f"artifact {data.path}"
    if isinstance(data, TriageDecisionPayload):
        return f"route {data.route}"
    return None


def _event_wire(event: TurnEvent) -> dict[str, Any]:
    wire = event.wire()
    return {
        "turnId": wire["turnId"],
        "sessionId": wire["sessionId"],
        "seq": wire["seq"],
        "agentId": wire.get("agentId", ROOT_AGENT),
        **({"parentAgentId": wire["parentAgentId"]} if wire.get("parentAgentId") else {}),
        "kind": wire["kind"],
        "payload": wire.get("payload", {}),
        "at": wire.get("at"),
        "version": wire["version"],
    }


class OptimizeProgress:
    """``$/progress`` for one ``fleet/optimize/run``: ``begin`` when the run starts, a
    ``report`` per change of phase or count (``phase``, ``done`` of ``total`` rollouts,
    ``bestScore`` so far), ``end`` with ``done | cancelled | failed``. The token is the client's
    ``workDoneToken``, else a server-created ``fleet/optimize/<uuid>``; a
    ``window/workDoneProgress/cancel`` on it calls ``on_cancel``. Runs on the event loop."""

    def __init__(
        self,
        server: LanguageServer,
        *,
        session_id: str,
        client_token: int | str | None,
        supports_create: bool,
        on_cancel: Callable[[], None],
    ) -> None:
        self.server = server
        self.session_id = session_id
        self._client_token = client_token
        self._supports_create = supports_create
        self._on_cancel = on_cancel
        self._loop = asyncio.get_running_loop()
        self.token: int | str | None = None
        self._last: tuple[Any, ...] | None = None
        self._ended = False

    async def start(self, title: str) -> None:
        token = self._client_token
        if token is None and self._supports_create:
            token = f"fleet/optimize/{uuid.uuid4().hex}"
            try:
                await asyncio.wait_for(
                    self.server.work_done_progress.create_async(token), timeout=CREATE_TIMEOUT
                )
            except Exception as exc:
                log.warning("progress: the client refused token %s: %s", token, exc)
                token = None
        self.token = token
        if token is None:
            return
        future = self.server.work_done_progress.tokens.setdefault(token, Future())
        future.add_done_callback(self._cancelled_by_client)
        self._send(
            {
                "kind": "begin",
                "title": title,
                "cancellable": True,
                "message": "dataset",
                "sessionId": self.session_id,
            }
        )

    def _cancelled_by_client(self, future: Future[Any]) -> None:
        if future.cancelled():
            self._loop.call_soon_threadsafe(self._on_cancel)

    def report(self, record: Any) -> None:
        """One ``OptimizationProgress`` of the facade (on the event loop)."""
        key = (record.phase, record.done, record.total, record.best_score)
        if self.token is None or self._ended or key == self._last:
            return
        self._last = key
        value: dict[str, Any] = {
            "kind": "report",
            "message": describe_optimization(record),
            "phase": record.phase,
            "done": record.done,
            "total": record.total,
            "bestScore": record.best_score,
            "sessionId": self.session_id,
        }
        if record.total:
            value["percentage"] = min(100, int(100 * record.done / record.total))
        self._send(value)

    def finish(self, status: str, version: str | None = None) -> None:
        if self.token is None or self._ended:
            return
        self._ended = True
        value: dict[str, Any] = {"kind": "end", "message": status, "sessionId": self.session_id}
        if version:
            value["version"] = version
        self._send(value)
        self.server.work_done_progress.tokens.pop(self.token, None)

    def _send(self, value: dict[str, Any]) -> None:
        from lsprotocol import types

        assert self.token is not None
        self.server.protocol.notify(
            types.PROGRESS, types.ProgressParams(token=self.token, value=value)
        )


def describe_optimization(record: Any) -> str:
    """One line for an optimization progress record (the CLI shows the same words)."""
    best = f" · best {record.best_score:.3f}" if record.best_score is not None else ""
    if record.phase == "search":
        return f"search · {record.done}/{record.total} rollouts{best}"
    if record.phase == "validation":
        return f"validation passes · {record.done}/{record.total} replays{best}"
    if record.message:
        return f"{record.phase} · {record.message}"
    return str(record.phase)
