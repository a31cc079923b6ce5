"""The progress mapper (TurnEvents → ``$/progress``) with a fake server: child titles are their
subtasks, reports show ``used/max`` model calls, and ``fleet/turn/didEmit`` forwards the event."""

from __future__ import annotations

import asyncio
from typing import Any

from lsprotocol import types

from fleet_core.events import TurnEvent
from fleet_core.models import TurnResult
from fleet_lsp.progress import TurnProgress
from fleet_lsp.protocol import NOTIFY_TURN_EVENT
from tests.unit.event_support import event


class FakeProtocol:
    def __init__(self) -> None:
        self.notes: list[tuple[str, Any]] = []

    def notify(self, method: str, params: Any) -> None:
        self.notes.append((method, params))


class FakeWorkDone:
    def __init__(self) -> None:
        self.tokens: dict[Any, Any] = {}
        self.created: list[Any] = []

    async def create_async(self, token: Any) -> None:
        self.created.append(token)


class FakeServer:
    def __init__(self) -> None:
        self.protocol = FakeProtocol()
        self.work_done_progress = FakeWorkDone()

    def progress(self) -> list[tuple[Any, dict[str, Any]]]:
        return [(p.token, p.value) for m, p in self.protocol.notes if m == types.PROGRESS]


def turn_events() -> list[TurnEvent]:
    result = TurnResult(turn_id="t1", session_id="s1", status="completed").wire()
    north, south = "agent-n", "agent-s"
    return [
        event(1, "turn_started", {"task": "Revenue by region", "mode": "hybrid"}),
        event(2, "budget_update", {"used": 3, "max": 25, "category": "generation"}),
        event(3, "child_spawned", {"depth": 1, "subtask": "REGION=North check\nthen more"}, north),
        event(4, "child_spawned", {"depth": 1, "subtask": "S" * 80, "input_paths": []}, south),
        event(5, "code_cell", {"cell": 1, "phase": "task", "code": "1"}, north),
        event(6, "child_finished", {"status": "succeeded", "artifacts": []}, north),
        event(7, "child_finished", {"status": "failed", "error": "boom"}, south),
        event(8, "turn_completed", result | {"durationSeconds": 1.0}),
    ]


async def run_progress(server: FakeServer, events: list[TurnEvent]) -> TurnProgress:
    async def seq_lookup(turn_id: str) -> int:
        return 4

    progress = TurnProgress(
        server,  # type: ignore[arg-type]
        session_id="s1",
        task="Revenue by region",
        client_token="tok",
        supports_create=True,
        turn_events=True,
        supports_content_refresh=False,
        reports_per_second=1e6,
        seq_lookup=seq_lookup,
    )
    await progress.start()
    for item in events:
        progress.on_event(item)
        await asyncio.sleep(0)
    await progress.finish("completed", "t1")
    return progress


async def test_child_titles_are_their_subtasks() -> None:
    server = FakeServer()
    await run_progress(server, turn_events())
    begins = {tok: v for tok, v in server.progress() if v["kind"] == "begin"}
    assert begins["tok"]["title"] == "Turn 4: Revenue by region"
    assert begins["tok/agent/agent-n"]["title"] == "↳ REGION=North check"
    assert begins["tok/agent/agent-s"]["title"] == "↳ " + "S" * 59 + "…"
    assert begins["tok/agent/agent-n"]["parentAgentId"] == "root"
    ends = {tok: v["message"] for tok, v in server.progress() if v["kind"] == "end"}
    assert ends == {
        "tok/agent/agent-n": "succeeded",
        "tok/agent/agent-s": "failed",
        "tok": "completed",
    }


async def test_a_child_without_a_subtask_is_titled_by_its_id() -> None:
    server = FakeServer()
    events = [
        event(1, "turn_started", {"task": "x", "mode": "rlm"}),
        event(2, "lm_start", {"call_id": "lm1", "model": "m", "category": "sub_query"}, "agent-z"),
    ]
    await run_progress(server, events)
    begins = {tok: v for tok, v in server.progress() if v["kind"] == "begin"}
    assert begins["tok/agent/agent-z"]["title"] == "↳ agent-z"


async def test_reports_show_used_of_max_model_calls() -> None:
    server = FakeServer()
    await run_progress(server, turn_events())
    reports = [
        v["message"] for tok, v in server.progress() if tok == "tok" and v["kind"] == "report"
    ]
    assert any("3/25 model calls" in r for r in reports), reports


async def test_did_emit_forwards_the_event_with_its_payload_and_version() -> None:
    server = FakeServer()
    events = turn_events()
    await run_progress(server, events)
    emitted = [p for m, p in server.protocol.notes if m == NOTIFY_TURN_EVENT]
    assert [e["seq"] for e in emitted] == [e.seq for e in events]
    spawned = emitted[2]
    assert spawned["payload"] == events[2].payload
    assert spawned["agentId"] == "agent-n" and spawned["parentAgentId"] == "root"
    assert spawned["version"] == 1


def root_reports(server: FakeServer) -> list[str]:
    return [v["message"] for tok, v in server.progress() if tok == "tok" and v["kind"] == "report"]


async def test_reports_use_plain_words_and_right_plurals() -> None:
    """No placeholder before the first real step (the begin says "starting"), no DSPy class name
    (``Predict``), one running cell said once, and "1 cell" / "1 child agent" in the singular."""
    server = FakeServer()
    events = [
        event(1, "turn_started", {"task": "x", "mode": "rlm"}),
        event(2, "module_start", {"call_id": "m1", "module": "Predict"}),
        event(3, "lm_start", {"call_id": "lm1", "model": "m", "category": "routing"}),
        event(4, "code_cell", {"cell": 1, "phase": "task", "code": "1"}),
        event(5, "tool_call_start", {"call_id": "c1", "tool": "spawn_agents", "source": "dspy"}),
        event(6, "child_spawned", {"depth": 1, "subtask": "North"}, "agent-n"),
        event(7, "lm_start", {"call_id": "lm2", "model": "m", "category": "generation"}),
    ]
    await run_progress(server, events)
    begin = next(v for tok, v in server.progress() if tok == "tok" and v["kind"] == "begin")
    assert begin["message"] == "starting"
    reports = root_reports(server)
    assert reports[0] == "choosing a route", reports
    assert "running cell 1" in reports, reports
    assert "starting child agents · 1 cell so far" in reports, reports
    assert "starting child agents · 1 cell so far · 1 child agent running" in reports, reports
    assert reports[-1] == "calling the model · 1 cell so far · 1 child agent running", reports
    joined = "\n".join(reports)
    for leaked in (
        "working",
        "Predict",
        "spawn_agents",
        "1 cells",
        "1 child agents",
        "cell 1 · 1 cell",
    ):
        assert leaked not in joined, (leaked, reports)
