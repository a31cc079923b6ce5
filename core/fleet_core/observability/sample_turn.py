"""A realistic TurnEvent sequence for tests and demos of tracing (no engine needed): the payloads
have the engine's shapes (``fleet_core.event_payloads``; a unit test checks them).

``scripted_turn_events`` yields what the engine emits for a hybrid Turn that triages to ``rlm``,
runs a failing then a succeeding sandbox cell, spawns one child agent (which runs a cell and
promotes an artifact) and submits ``answer``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from fleet_core.events import ROOT_AGENT, TurnEvent
from fleet_core.models import (
    TURN_CANCELLED,
    ArtifactRef,
    ProvenanceRecord,
    TurnError,
    TurnResult,
    Usage,
)
from fleet_core.outcomes import TurnFacts, completed_outcome, failed_outcome


def scripted_turn_events(
    turn_id: str,
    session_id: str,
    *,
    answer: str = "Total revenue is 42",
    outcome: str = "completed",
    extra_text: str = "",
) -> list[TurnEvent]:
    start = datetime.now(UTC)
    seq = 0
    events: list[TurnEvent] = []

    def emit(
        kind: str, payload: dict[str, Any], agent: str = ROOT_AGENT, parent: str | None = None
    ) -> None:
        nonlocal seq
        seq += 1
        events.append(
            TurnEvent(
                turn_id=turn_id,
                session_id=session_id,
                seq=seq,
                agent_id=agent,
                parent_agent_id=parent,
                kind=kind,
                payload=payload,
                at=start + timedelta(milliseconds=10 * seq),
            )
        )

    child = "root.1"
    emit("turn_started", {"mode": "hybrid", "task": "Sum revenue"})
    emit("lm_start", {"call_id": "lm1", "model": "openai/scripted", "category": "triage"})
    emit(
        "lm_end",
        {
            "call_id": "lm1",
            "model": "openai/scripted",
            "category": "triage",
            "ok": True,
            "duration_ms": 5,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        },
    )
    emit(
        "triage_decision",
        {
            "mode": "hybrid",
            "route": "rlm",
            "override_reason": None,
            "summary": "needs code over files/sales.csv",
            "evidence": {"raw_choice": "rlm", "backend": "generative", "effective_route": "rlm"},
        },
    )
    emit("lm_start", {"call_id": "lm2", "model": "openai/scripted", "category": "root"})
    emit(
        "lm_end",
        {
            "call_id": "lm2",
            "model": "openai/scripted",
            "category": "root",
            "ok": True,
            "duration_ms": 5,
            "usage": {"input_tokens": 100, "output_tokens": 20},
        },
    )
    emit("code_cell", {"cell": 1, "phase": "task", "code": "print(1/0)" + extra_text})
    emit(
        "cell_output",
        {
            "cell": 1,
            "phase": "task",
            "ok": False,
            "outcome": "error",
            "error_type": "ZeroDivisionError",
            "error": "ZeroDivisionError: division by zero" + extra_text,
            "duration_ms": 3,
        },
    )
    emit(
        "code_cell",
        {
            "cell": 2,
            "phase": "task",
            "code": "import pandas as pd\nprint(pd.read_csv('files/sales.csv').revenue.sum())",
        },
    )
    emit(
        "cell_output",
        {
            "cell": 2,
            "phase": "task",
            "ok": True,
            "outcome": "completed",
            "output": "42\n",
            "duration_ms": 7,
        },
    )
    emit(
        "tool_call_start",
        {
            "call_id": "t1",
            "tool": "spawn_agent",
            "source": "dspy",
            "inputs": {"subtask": "Chart revenue"},
        },
    )
    emit(
        "child_spawned",
        {"subtask": "Chart revenue", "input_paths": ["files/sales.csv"], "depth": 1},
        child,
        ROOT_AGENT,
    )
    emit(
        "lm_start",
        {"call_id": "lm3", "model": "openai/scripted", "category": "child"},
        child,
        ROOT_AGENT,
    )
    emit(
        "lm_end",
        {
            "call_id": "lm3",
            "model": "openai/scripted",
            "category": "child",
            "ok": True,
            "duration_ms": 5,
            "usage": {"input_tokens": 50, "output_tokens": 10},
        },
        child,
        ROOT_AGENT,
    )
    emit(
        "code_cell",
        {"cell": 1, "phase": "task", "code": "open('artifacts/chart.txt','w').write('##')"},
        child,
        ROOT_AGENT,
    )
    emit(
        "cell_output",
        {"cell": 1, "phase": "task", "ok": True, "outcome": "completed", "duration_ms": 2},
        child,
        ROOT_AGENT,
    )
    emit(
        "artifact",
        {
            "path": "artifacts/root.1/chart.txt",
            "sha256": "ab" * 32,
            "size_bytes": 2,
            "root_path": "artifacts/root.1/chart.txt",
        },
        child,
        ROOT_AGENT,
    )
    emit(
        "child_finished",
        {
            "status": "succeeded",
            "artifacts": [
                {
                    "path": "artifacts/root.1/chart.txt",
                    "sha256": "ab" * 32,
                    "agent_id": child,
                    "root_path": "artifacts/chart.txt",
                }
            ],
        },
        child,
        ROOT_AGENT,
    )
    emit(
        "tool_call_end",
        {
            "call_id": "t1",
            "tool": "spawn_agent",
            "source": "dspy",
            "ok": True,
            "output": "chart saved",
            "duration_ms": 30,
        },
    )
    emit("budget_update", {"used": 3, "max": 150, "category": "generation"})
    result = scripted_turn_result(turn_id, session_id, answer=answer, outcome=outcome)
    emit(f"turn_{outcome}", result.wire())
    return events


def scripted_turn_result(
    turn_id: str,
    session_id: str,
    *,
    answer: str = "Total revenue is 42",
    outcome: str = "completed",
) -> TurnResult:
    artifact = ArtifactRef(
        uri=f"fleet:/sessions/{session_id}/artifacts/root.1/chart.txt",
        path="artifacts/root.1/chart.txt",
        size_bytes=2,
        sha256="ab" * 32,
        turn_id=turn_id,
        agent_id="root.1",
        provenance=[
            ProvenanceRecord(
                path="artifacts/root.1/chart.txt",
                root_path="artifacts/chart.txt",
                sha256="ab" * 32,
                size_bytes=2,
                agent_id="root.1",
                parent_chain=["root"],
                turn_id=turn_id,
            )
        ],
    )
    error = None
    if outcome == "failed":
        error = TurnError(kind="SandboxError", message="worker died")
    elif outcome == "cancelled":
        error = TurnError(kind=TURN_CANCELLED, message="The Turn was cancelled")
    return TurnResult(
        turn_id=turn_id,
        session_id=session_id,
        status=outcome,
        answer=answer if outcome == "completed" else "",
        route="rlm",
        artifacts=[artifact] if outcome == "completed" else [],
        usage=Usage(
            model_calls=3,
            sandbox_errors=1,
            input_tokens=160,
            output_tokens=35,
            calls_by_category={"triage": 1, "root": 1, "child": 1},
        ),
        error=error,
        outcome=(
            failed_outcome(error, sandbox_errors=1)
            if error is not None
            else completed_outcome(TurnFacts(reached="submitted", answer=answer, sandbox_errors=1))
        ),
    )
