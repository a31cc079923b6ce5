"""The CLI's live Turn view: ``used/max`` model calls, an elapsed time that ticks while nothing
happens, and user/model text shown literally (never read as rich markup)."""

from __future__ import annotations

import io

from rich.console import Console

from fleet_lsp.cli.live import LiveTurnView
from tests.unit.event_support import event


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def view(task: str = "Revenue by region") -> tuple[LiveTurnView, Clock]:
    clock = Clock()
    console = Console(file=io.StringIO(), width=200, color_system=None, record=True)
    return LiveTurnView(task, console=console, clock=clock), clock


def shown(live: LiveTurnView) -> str:
    live.console.print(live)
    return live.console.export_text()


def test_the_call_limit_shows() -> None:
    live, _ = view()
    live.on_event(event(1, "budget_update", {"used": 3, "max": 150, "category": "generation"}))
    assert "3/150 model calls" in shown(live)


def test_the_elapsed_time_ticks_while_a_cell_runs() -> None:
    live, clock = view()
    live.on_event(event(1, "code_cell", {"cell": 1, "phase": "task", "code": "sleep(20)"}))
    clock.now += 1
    assert "·  1s" in shown(live)
    clock.now += 19  # no event in between: the next refresh renders the new time
    assert "·  20s" in shown(live)
    assert live._live.get_renderable() is live  # Live re-renders the view at each refresh


def test_the_elapsed_time_stops_when_the_turn_ends() -> None:
    live, clock = view()
    clock.now += 5
    live.done("completed")
    clock.now += 60
    text = shown(live)
    assert "completed  ·  5s" in text and "65s" not in text


def test_markup_in_user_and_model_text_is_shown_literally() -> None:
    live, _ = view("Revenue by region [[x:y]] [bold]not bold[/bold]")
    live.on_event(event(1, "triage_decision", {"mode": "hybrid", "route": "rlm", "summary": "s"}))
    live.on_event(
        event(2, "child_spawned", {"depth": 1, "subtask": "check [red]North[/red]"}, "agent-1")
    )
    live.on_event(
        event(3, "tool_call_start", {"call_id": "c", "tool": "[llm]", "source": "dspy"}, "agent-1")
    )
    live.update_progress("agent-2", "root", "error: [/] unbalanced [dim]")
    text = shown(live)
    assert "Revenue by region [[x:y]] [bold]not bold[/bold]" in text
    assert "check [red]North[/red]" in text
    assert "tool [llm]" in text
    assert "error: [/] unbalanced [dim]" in text


def test_the_tree_nests_children_under_their_parents() -> None:
    live, _ = view()
    live.on_event(event(1, "child_spawned", {"depth": 1, "subtask": "North"}, "agent-1"))
    live.on_event(event(2, "child_finished", {"status": "succeeded"}, "agent-1"))
    live.on_event(event(3, "code_cell", {"cell": 1, "phase": "bootstrap", "code": "x"}, "agent-1"))
    lines = shown(live).splitlines()
    child = next(line for line in lines if "agent-1" in line)
    root = next(line for line in lines if "root:" in line)
    assert "(North)" in child and "(succeeded)" in child
    assert child.index("agent-1") > root.index("root")
