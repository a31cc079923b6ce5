"""TurnEvent payload models: they match what the engine emits, the emission point enforces them,
consumers read only their fields, and the published schema and protocol docs are current."""

from __future__ import annotations

import ast
import json
import logging
import re
import typing
from pathlib import Path
from typing import Any

import pytest

from fleet_core.engine.control import TurnControl
from fleet_core.engine.stream import EventChannel
from fleet_core.event_payloads import (
    PAYLOADS,
    BudgetUpdatePayload,
    ChildSpawnedPayload,
    EventKind,
    EventPayloadError,
    ToolCallStartPayload,
    TurnEndedPayload,
    check_payload,
    json_schema,
    parse_payload,
    schema_text,
)
from fleet_core.events import TurnEvent
from fleet_core.models import TurnResult
from fleet_core.observability.redaction import EVENT_LIMITS, Redactor
from fleet_core.observability.testing import scripted_turn_events

REPO = Path(__file__).resolve().parents[2]
SCHEMA = REPO / "docs" / "schema" / "turn-events.schema.json"
PROTOCOL = REPO / "docs" / "protocol.md"
RESULT = TurnResult(turn_id="t1", session_id="s1", status="completed", answer="42").wire()

# One payload per kind, shaped exactly as the engine builds it (see the emitters named).
EMITTED: dict[str, dict[str, Any]] = {
    "turn_started": {"task": "Sum revenue", "mode": "hybrid"},  # turns.py
    "triage_decision": {  # engine/program.py RouteDecision.payload
        "mode": "hybrid",
        "route": "rlm",
        "override_reason": "selected_context",
        "summary": "Route rlm: a dataset is selected, so a code route is required",
        "evidence": {
            "raw_choice": "rlm",
            "backend": "generative",
            "model": "openai/m",
            "effective_route": "rlm",
            "override_reason": "selected_context",
            "error": None,
        },
    },
    "module_start": {"call_id": "c1", "module": "RLM", "iteration": "1/16"},  # engine/callbacks
    "module_end": {
        "call_id": "c1",
        "module": "RLM",
        "duration_ms": 1.5,
        "ok": False,
        "error_type": "ValueError",
    },
    "lm_start": {"call_id": "lm1", "model": "openai/m", "category": "triage"},  # engine/metering
    "lm_end": {
        "call_id": "lm1",
        "model": "openai/m",
        "category": "triage",
        "duration_ms": 3.0,
        "ok": True,
        "error_type": None,
        "usage": {"input_tokens": 10, "output_tokens": 2},
    },
    "code_cell": {"cell": 1, "phase": "task", "code": "print(1)"},  # engine/interpreter
    "cell_output": {
        "cell": 1,
        "phase": "task",
        "ok": True,
        "outcome": "completed",
        "output": "1\n",
        "duration_ms": 4.2,
    },
    "tool_call_start": {  # engine/callbacks
        "call_id": "t1",
        "tool": "spawn_agent",
        "source": "dspy",
        "inputs": {"args": [], "kwargs": {"subtask": "Chart revenue"}},
    },
    "tool_call_end": {
        "call_id": "t1",
        "tool": "spawn_agent",
        "source": "dspy",
        "duration_ms": 10.0,
        "ok": True,
        "error_type": None,
        "output": {"findings": "ok", "artifacts": []},
    },
    "child_spawned": {"depth": 1, "subtask": "Chart revenue", "input_paths": None},  # program
    "child_finished": {
        "status": "succeeded",
        "artifacts": [
            {
                "path": "artifacts/a.txt",
                "sha256": "ab" * 32,
                "agent_id": "agent-1",
                "root_path": "x",
            }
        ],
    },
    "artifact": {"path": "artifacts/a.txt"},  # reserved: no emitter today
    "budget_update": {"used": 3, "max": 150, "category": "generation"},  # engine/control
    "status": {"status": "stopping", "reason": "cancelled", "message": "The Turn was cancelled"},
    "sandbox_environment_incomplete": {"missing": ["sympy"], "python": "3.12.3"},  # turns.py
    "jev_decision": {  # engine/decisions.py Decider
        "category": "other_decisions",
        "backend": "jev",
        "model": "jev-latest",
        "items": 3,
        "ok": True,
        "duration_ms": 41.5,
        "usage": {"input_tokens": 21, "output_tokens": 3},
    },
    "skill_selection": {  # engine/preload.py
        "selected": ["tabular-analysis"],
        "decisions": [
            {
                "skill": "tabular-analysis",
                "decision": "relevant",
                "raw_choice": "relevant",
                "probabilities": {"relevant": 0.9, "not_relevant": 0.1},
                "confidence": 0.9,
                "backend": "jev",
                "model": "jev-latest",
            }
        ],
    },
    "ungrounded_submit": {"cell": 3, "figures": ["499500"], "rejected": True},  # interpreter
    "memory_proposed": {"memory_id": "ab12", "name": "units", "kind": "sandbox", "chars": 42},
    "skill_saved": {  # engine/learning.py
        "name": "csv-cleanup",
        "path": "skills/csv-cleanup/SKILL.md",
        "size_bytes": 120,
        "sha256": "ab" * 32,
        "replaced": False,
    },
    "turn_completed": RESULT | {"durationSeconds": 1.25},  # turns.py: result.wire() | duration
    "turn_failed": RESULT | {"status": "failed", "error": {"kind": "X", "message": "m"}},
    "turn_cancelled": RESULT | {"status": "cancelled", "replayed": True},
}


def test_every_kind_has_a_model_and_an_example() -> None:
    kinds = set(typing.get_args(EventKind))
    assert set(PAYLOADS) == kinds
    assert set(EMITTED) == kinds


@pytest.mark.parametrize("kind", sorted(EMITTED))
def test_emitted_payloads_validate_strictly(kind: str) -> None:
    assert check_payload(kind, EMITTED[kind]) == []
    assert parse_payload(kind, EMITTED[kind]) is not None


@pytest.mark.parametrize("kind", sorted(EMITTED))
def test_redacted_and_bounded_payloads_still_validate(kind: str) -> None:
    redactor = Redactor.from_values(["hunter2-secret"])
    payload = json.loads(json.dumps(EMITTED[kind]).replace("Chart", "hunter2-secret"))
    channel = EventChannel("t", "s", redact=lambda p: redactor.value(p, EVENT_LIMITS), strict=True)
    channel.emit(kind, payload)
    (event,) = channel.drain()
    assert "hunter2-secret" not in json.dumps(event.payload)
    assert check_payload(kind, event.payload) == []


def test_credential_looking_tool_inputs_and_huge_values_still_validate() -> None:
    inputs = {"api_key": "sk-abcdefghijklmnopqrstuvwx", "rows": list(range(500)), "x": "y " * 10**4}
    channel = EventChannel(
        "t", "s", redact=lambda p: Redactor().value(p, EVENT_LIMITS), strict=True
    )
    channel.emit("tool_call_start", EMITTED["tool_call_start"] | {"inputs": inputs})
    (event,) = channel.drain()
    data = event.data
    assert isinstance(data, ToolCallStartPayload)
    assert data.inputs["api_key"] == "[redacted]"


def test_coalesced_payloads_validate_and_the_latest_wins() -> None:
    channel = EventChannel("t", "s", strict=True)
    for used in (1, 2, 3):
        channel.emit("budget_update", {"used": used, "max": 9, "category": "generation"})
    (event,) = channel.drain()
    assert event.data == BudgetUpdatePayload(used=3, max=9, category="generation")


def test_the_control_emits_through_a_strict_channel() -> None:
    channel = EventChannel("t", "s", strict=True)
    control = TurnControl(max_units=2, timeout_seconds=None, emit=channel.emit)
    control.charge(1, "triage", "agent-1")
    control.cancel()
    kinds = [(e.kind, e.agent_id, e.data is not None) for e in channel.drain()]
    assert kinds == [("budget_update", "agent-1", True), ("status", "root", True)]


def test_a_strict_channel_rejects_an_undefined_key_at_the_emitter() -> None:
    channel = EventChannel("t", "s", strict=True)
    with pytest.raises(EventPayloadError, match=r"limit: not a field of BudgetUpdatePayload"):
        channel.emit("budget_update", {"used": 1, "max": 2, "category": "g", "limit": 2})
    with pytest.raises(EventPayloadError, match=r"evidence.why"):
        channel.emit("triage_decision", EMITTED["triage_decision"] | {"evidence": {"why": 1}})
    with pytest.raises(EventPayloadError, match="subtask"):
        channel.emit("child_spawned", {"depth": 1})
    with pytest.raises(EventPayloadError, match="unknown event kind"):
        channel.emit("child_started", {})
    assert channel.drain() == []


def test_a_lenient_channel_sends_the_payload_unchanged_and_logs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    channel = EventChannel("t", "s", strict=False)
    payload = {"used": 1, "max": 2, "category": "g", "new_field": True}
    with caplog.at_level(logging.WARNING, logger="fleet_core.event_payloads"):
        channel.emit("budget_update", payload)
    (event,) = channel.drain()
    assert event.payload == payload  # the wire is what the emitter sent
    assert "new_field" in caplog.text


def test_the_tests_run_strict() -> None:
    assert EventChannel("t", "s").strict  # tests/conftest.py sets FLEET_STRICT_EVENTS=1


@pytest.mark.parametrize("outcome", ["completed", "failed", "cancelled"])
def test_the_scripted_trace_events_have_the_engine_shapes(outcome: str) -> None:
    for event in scripted_turn_events("t1", "s1", outcome=outcome):
        assert check_payload(event.kind, event.payload) == [], event.kind


def test_parse_payload_drops_invalid_fields_and_gives_up_without_required_ones() -> None:
    spawned = parse_payload("child_spawned", {"depth": "[omitted]", "subtask": "x", "more": 1})
    assert spawned is None  # depth is required
    budget = parse_payload("budget_update", {"used": 1, "max": 2, "category": 3})
    assert budget is None
    ended = parse_payload("turn_failed", RESULT | {"usage": "[omitted: size limit]"})
    assert isinstance(ended, TurnEndedPayload) and ended.usage.model_calls == 0
    child = parse_payload("child_spawned", {"depth": 1, "subtask": "x", "input_paths": 3})
    assert child == ChildSpawnedPayload(depth=1, subtask="x")
    assert parse_payload("no_such_kind", {}) is None


def test_event_data_is_typed_and_the_wire_payload_is_untouched() -> None:
    payload = EMITTED["lm_end"]
    event = TurnEvent(turn_id="t", session_id="s", seq=1, kind="lm_end", payload=payload)
    wire = event.wire()
    assert wire["payload"] == payload  # snake_case keys stay as emitted
    assert wire["version"] == 1
    data = event.data
    assert data is not None and data.model_dump(exclude_unset=True) == payload


def test_turn_ended_payload_carries_every_turn_result_field() -> None:
    fields = {f.alias or n for n, f in TurnEndedPayload.model_fields.items()}
    result = set(TurnResult.model_json_schema(by_alias=True)["properties"])
    assert result <= fields


# --- the published schema and the protocol document ----------------------------------------


def test_the_committed_schema_is_current() -> None:
    """Regenerate: uv run python -m fleet_core.event_payloads docs/schema/turn-events.schema.json"""
    assert SCHEMA.read_text(encoding="utf-8") == schema_text(), "regenerate the schema (docstring)"


def test_the_schema_maps_every_kind_to_its_payload() -> None:
    schema = json_schema()
    mapped = {
        b["properties"]["kind"]["const"]: b["properties"]["payload"]["$ref"]
        for b in schema["oneOf"]
    }
    assert set(mapped) == set(PAYLOADS)
    for kind, ref in mapped.items():
        assert ref == f"#/$defs/{PAYLOADS[kind].__name__}"
        assert PAYLOADS[kind].__name__ in schema["$defs"]


def _did_emit_section() -> str:
    text = PROTOCOL.read_text(encoding="utf-8")
    start = text.index("### `fleet/turn/didEmit` payloads")
    end = text.find("\n## ", start)
    return text[start : end if end != -1 else len(text)]


@pytest.mark.parametrize("kind", sorted(PAYLOADS))
def test_the_protocol_documents_each_kind_and_field(kind: str) -> None:
    section = _did_emit_section()
    row = next((line for line in section.splitlines() if line.startswith(f"| `{kind}`")), None)
    assert row is not None, f"docs/protocol.md: no row for {kind}"
    model = PAYLOADS[kind]
    if model is TurnEndedPayload:
        assert "TurnResult" in row and "durationSeconds" in row
        return
    for name, field in model.model_fields.items():
        assert re.search(rf"`{name}[?]?`", row), f"docs/protocol.md: {kind} lacks {name}"
        if field.is_required():
            assert f"`{name}?`" not in row, f"{kind}.{name} is required"


# --- consumers read fields, never guessed keys -----------------------------------------------

CONSUMERS = [
    "fleet_lsp/progress.py",
    "fleet_lsp/live.py",
    "fleet_lsp/documents.py",
    "core/fleet_core/observability/traceview.py",
    "core/fleet_core/observability/spans.py",
]
DICT_NAMES = {"p", "payload"}


def _dict_reads(tree: ast.AST) -> list[tuple[int, str]]:
    """Dict-style payload reads: ``x.payload`` (except into ``parse_payload``), ``p.get(...)``,
    ``payload[...]``, ``_pick(...)``."""
    allowed: set[int] = set()
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = node.func.id if isinstance(node.func, ast.Name) else ""
            if name == "parse_payload":
                allowed.update(id(arg) for arg in node.args)
            if name == "_pick":
                found.append((node.lineno, "_pick(...)"))
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr == "get":
                target = func.value
                if isinstance(target, ast.Name) and target.id in DICT_NAMES:
                    found.append((node.lineno, f"{target.id}.get(...)"))
        elif isinstance(node, ast.Subscript):
            target = node.value
            if isinstance(target, ast.Name) and target.id in DICT_NAMES:
                found.append((node.lineno, f"{target.id}[...]"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "payload" and id(node) not in allowed:
            found.append((node.lineno, ".payload"))
    return found


@pytest.mark.parametrize("relative", CONSUMERS)
def test_consumers_read_typed_fields_not_payload_keys(relative: str) -> None:
    path = REPO / relative
    if not path.exists():
        pytest.skip(f"{relative} does not exist")
    found = _dict_reads(ast.parse(path.read_text(encoding="utf-8")))
    assert found == [], f"{relative} reads payload keys; use event.data / parse_payload: {found}"


def test_the_consumer_check_catches_guessing() -> None:
    source = (
        "def f(event, p):\n"
        "    a = event.payload.get('max_llm_calls')\n"
        "    b = p['limit']\n"
        "    c = _pick(p, 'name', 'task')\n"
        "    d = parse_payload(event.kind, event.payload)\n"
    )
    kinds = sorted(kind for _, kind in _dict_reads(ast.parse(source)))
    assert kinds == [".payload", "_pick(...)", "p[...]"]
