"""A rich live view of a running Turn: the agent tree, each agent's current step.

The view is itself the ``Live`` renderable: every refresh (8 a second) renders it afresh, so the
elapsed time ticks while a cell runs. Every text that comes from a user, a model, a file or an
error is put in ``rich.text.Text`` objects, never parsed as markup.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fleet_core.event_payloads import (
    BudgetUpdatePayload,
    ChildFinishedPayload,
    ChildSpawnedPayload,
    CodeCellPayload,
    MemoryProposedPayload,
    SkillSavedPayload,
    ToolCallStartPayload,
    TriageDecisionPayload,
    UngroundedSubmitPayload,
)
from fleet_core.events import ROOT_AGENT

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text
    from rich.tree import Tree

    from fleet_core.events import TurnEvent

TERMINAL = ("turn_completed", "turn_failed", "turn_cancelled")


@dataclass
class _Agent:
    agent_id: str
    parent: str | None
    step: str = "starting"
    cells: int = 0
    status: str = "running"
    subtask: str = ""


class LiveTurnView:
    """Feed it TurnEvents (or progress values); ``Live`` redraws it 8 times a second."""

    def __init__(
        self,
        task: str,
        *,
        console: Console | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        from rich.console import Console
        from rich.live import Live

        self.task = _first_line(task, 80)
        self.agents: dict[str, _Agent] = {ROOT_AGENT: _Agent(ROOT_AGENT, None)}
        self.route = ""
        self.calls = ""
        self.status = "running"
        self._clock = clock
        self.started = clock()
        self.finished: float | None = None
        self._lock = threading.Lock()  # events arrive on the loop; Live renders in its thread
        # what the Turn's code asked the Session to keep, and ungrounded SUBMITs (plain text)
        self.kept: list[str] = []
        self.console = console or Console(stderr=True)
        self._live = Live(self, console=self.console, refresh_per_second=8)

    def __enter__(self) -> LiveTurnView:
        self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._live.__exit__(None, None, None)
        if not self.console.is_terminal:
            self.console.line()  # a file or pipe gets the last frame without its line end

    def __rich__(self) -> Tree:
        return self.render()

    # inputs -----------------------------------------------------------------------------------

    def on_event(self, event: TurnEvent) -> None:
        with self._lock:
            self._apply(event)

    def _apply(self, event: TurnEvent) -> None:
        agent = self.agents.get(event.agent_id)
        if agent is None:
            parent = event.parent_agent_id or ROOT_AGENT
            agent = self.agents[event.agent_id] = _Agent(event.agent_id, parent)
        data = event.data
        if isinstance(data, TriageDecisionPayload):
            self.route = data.route
        elif isinstance(data, CodeCellPayload):
            if data.phase != "bootstrap":
                agent.cells += 1
                agent.step = f"cell {agent.cells}"
        elif isinstance(data, ToolCallStartPayload):
            agent.step = f"tool {_first_line(data.tool, 60)}"
        elif event.kind == "lm_start":
            agent.step = "calling the model"
        elif isinstance(data, BudgetUpdatePayload):
            self.calls = f"{data.used}/{data.max}"
        elif isinstance(data, ChildSpawnedPayload):
            agent.subtask = _first_line(data.subtask, 60)
        elif isinstance(data, ChildFinishedPayload):
            agent.status = data.status
        elif isinstance(data, MemoryProposedPayload) and len(self.kept) < 50:
            self.kept.append(
                f"memory proposed: {data.memory_id} ({data.name}, unreviewed) · review: "
                f"fleet-lsp memory review {data.memory_id} -s {event.session_id}"
            )
        elif isinstance(data, SkillSavedPayload) and len(self.kept) < 50:
            replaced = " (replaced)" if data.replaced else ""
            self.kept.append(f"skill saved: {data.path}{replaced}")
        elif isinstance(data, UngroundedSubmitPayload) and len(self.kept) < 50:
            figures = ", ".join(data.figures)
            verdict = "rejected" if data.rejected else "accepted, flagged"
            self.kept.append(
                f"ungrounded SUBMIT {verdict} ({event.agent_id}, cell {data.cell}): typed figures "
                f"no output showed: {figures}"
            )
        elif event.kind in TERMINAL:
            self._finish(event.kind.removeprefix("turn_"))

    def update_progress(self, token_agent: str, parent: str | None, message: str) -> None:
        with self._lock:
            agent = self.agents.setdefault(token_agent, _Agent(token_agent, parent))
            agent.step = message

    def finish_agent(self, agent_id: str, status: str) -> None:
        with self._lock:
            if agent_id in self.agents:
                self.agents[agent_id].status = status

    def done(self, status: str) -> None:
        with self._lock:
            self._finish(status)
            for agent in self.agents.values():
                if agent.status == "running":
                    agent.status = status

    def _finish(self, status: str) -> None:
        self.status = status
        if self.finished is None:
            self.finished = self._clock()

    # rendering --------------------------------------------------------------------------------

    def elapsed(self) -> float:
        """Seconds since the view started; frozen once the Turn ended."""
        end = self.finished if self.finished is not None else self._clock()
        return max(0.0, end - self.started)

    def render(self) -> Tree:
        """The tree as of now (called at every refresh)."""
        from rich.tree import Tree

        with self._lock:
            tree = Tree(self._head())
            nodes = {ROOT_AGENT: tree.add(_label(self.agents[ROOT_AGENT]))}
            pending = [a for a in self.agents.values() if a.agent_id != ROOT_AGENT]
            for _ in range(len(pending) + 1):
                rest = []
                for a in pending:
                    parent = nodes.get(a.parent or ROOT_AGENT)
                    if parent is None:
                        rest.append(a)
                    else:
                        nodes[a.agent_id] = parent.add(_label(a))
                pending = rest
        return tree

    def _head(self) -> Text:
        from rich.text import Text

        head = Text.assemble((self.task, "bold"), f"  ·  {self.status}  ·  {self.elapsed():.0f}s")
        if self.route:
            head.append(f"  ·  route {self.route}")
        if self.calls:
            head.append(f"  ·  {self.calls} model calls")
        return head


def _label(agent: _Agent) -> Text:
    from rich.text import Text

    label = Text(_first_line(agent.agent_id, 80))
    if agent.subtask:
        label.append(f" ({agent.subtask})", style="italic")
    label.append(f": {agent.step} ")
    label.append(f"({agent.status})", style="dim")
    return label


def _first_line(text: str, limit: int) -> str:
    """The first line of outside text, cut to ``limit`` and shown, never acted on."""
    from fleet_lsp.cli.terminal import visible

    stripped = text.strip()
    return visible(stripped.splitlines()[0][:limit]) if stripped else ""
