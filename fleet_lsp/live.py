"""A rich live view of a running Turn: the agent tree, each agent's current step."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fleet_core.events import TurnEvent

ROOT = "root"


@dataclass
class _Agent:
    agent_id: str
    parent: str | None
    step: str = "starting"
    cells: int = 0
    status: str = "running"


class LiveTurnView:
    """Feed it TurnEvents (or progress values); it redraws at most 8 times a second."""

    def __init__(self, task: str) -> None:
        from rich.console import Console
        from rich.live import Live

        self.task = task.strip().splitlines()[0][:80] if task.strip() else ""
        self.agents: dict[str, _Agent] = {ROOT: _Agent(ROOT, None)}
        self.route = ""
        self.calls = ""
        self.started = time.monotonic()
        self.status = "running"
        self._live = Live(self._render(), console=Console(stderr=True), refresh_per_second=8)

    def __enter__(self) -> LiveTurnView:
        self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._live.update(self._render())
        self._live.__exit__(None, None, None)

    def on_event(self, event: TurnEvent) -> None:
        p = event.payload
        agent = self.agents.get(event.agent_id)
        if agent is None:
            agent = self.agents[event.agent_id] = _Agent(
                event.agent_id, event.parent_agent_id or ROOT
            )
        kind = event.kind
        if kind == "triage_decision":
            self.route = str(p.get("route", ""))
        elif kind == "code_cell" and p.get("phase") != "bootstrap":
            agent.cells += 1
            agent.step = f"cell {agent.cells}"
        elif kind == "tool_call_start":
            agent.step = f"tool {p.get('tool') or p.get('name') or '?'}"
        elif kind == "lm_start":
            agent.step = "calling the model"
        elif kind == "budget_update":
            used = p.get("model_calls", p.get("used"))
            limit = p.get("max_llm_calls", p.get("limit"))
            if used is not None:
                self.calls = f"{used}/{limit}" if limit is not None else str(used)
        elif kind == "child_spawned":
            child = str(p.get("agent_id") or p.get("child_id") or event.agent_id)
            self.agents.setdefault(
                child,
                _Agent(
                    child,
                    event.agent_id if child != event.agent_id else (event.parent_agent_id or ROOT),
                ),
            )
        elif kind == "child_finished":
            child = str(p.get("agent_id") or p.get("child_id") or event.agent_id)
            if child in self.agents:
                self.agents[child].status = str(p.get("status") or "done")
        elif kind in ("turn_completed", "turn_failed", "turn_cancelled"):
            self.status = kind.removeprefix("turn_")
        self._live.update(self._render())

    def update_progress(self, token_agent: str, parent: str | None, message: str) -> None:
        agent = self.agents.setdefault(token_agent, _Agent(token_agent, parent))
        agent.step = message
        self._live.update(self._render())

    def finish_agent(self, agent_id: str, status: str) -> None:
        if agent_id in self.agents:
            self.agents[agent_id].status = status
            self._live.update(self._render())

    def done(self, status: str) -> None:
        self.status = status
        for agent in self.agents.values():
            if agent.status == "running":
                agent.status = status
        self._live.update(self._render())

    def _render(self) -> Any:
        from rich.tree import Tree

        elapsed = time.monotonic() - self.started
        head = f"[bold]{self.task}[/bold]  ·  {self.status}  ·  {elapsed:.0f}s"
        if self.route:
            head += f"  ·  route {self.route}"
        if self.calls:
            head += f"  ·  {self.calls} model calls"
        tree = Tree(head)
        nodes: dict[str, Any] = {}

        def label(a: _Agent) -> str:
            return f"{a.agent_id}: {a.step} [dim]({a.status})[/dim]"

        nodes[ROOT] = tree.add(label(self.agents[ROOT]))
        pending = [a for a in self.agents.values() if a.agent_id != ROOT]
        for _ in range(len(pending) + 1):
            rest = []
            for a in pending:
                parent = nodes.get(a.parent or ROOT)
                if parent is None:
                    rest.append(a)
                else:
                    nodes[a.agent_id] = parent.add(label(a))
            pending = rest
        return tree
