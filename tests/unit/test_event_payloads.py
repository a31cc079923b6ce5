"""TurnEvent payload models: they match what the engine emits, emitters build them (a wrong field
fails there, always), the channel takes nothing else and sends the same wire as before, consumers
read only their fields, and the published schema and protocol docs are current."""

from __future__ import annotations

import ast
import json
import re
import typing
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from fleet_core.digests import DEFAULT_PROGRAM_DIGEST
from fleet_core.engine.control import TurnControl
from fleet_core.engine.stream import EventChannel
from fleet_core.event_payloads import (
    PAYLOADS,
    ArtifactPayload,
    ArtifactReceipt,
    BudgetUpdatePayload,
    CellOutputPayload,
    ChildFinishedPayload,
    ChildSpawnedPayload,
    CodeCellPayload,
    EventKind,
    EventPayloadError,
    LmEndPayload,
    LmStartPayload,
    Payload,
    StatusPayload,
    TokenUsage,
    ToolCallEndPayload,
    ToolCallStartPayload,
    TriageDecisionPayload,
    TriageEvidence,
    TurnEndedPayload,
    TurnStartedPayload,
    check_payload,
    json_schema,
    parse_payload,
    schema_text,
    wire_payload,
)
from fleet_core.events import TurnEvent
from fleet_core.models import ArtifactRef, ProvenanceRecord, TurnError, TurnResult, Usage
from fleet_core.observability.redaction import EVENT_LIMITS, Redactor
from fleet_core.observability.sample_turn import scripted_turn_events

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


def _model(kind: str, payload: dict[str, Any] | None = None) -> Payload:
    """The model an emitter builds for ``payload`` (default: the kind's example)."""
    payload = EMITTED[kind] if payload is None else payload
    model = PAYLOADS[kind]
    if model is TurnEndedPayload:
        return TurnResult.model_validate(payload)
    return model(**payload)


def test_every_kind_has_a_model_and_an_example() -> None:
    kinds = set(typing.get_args(EventKind))
    assert set(PAYLOADS) == kinds
    assert set(EMITTED) == kinds


@pytest.mark.parametrize("kind", sorted(EMITTED))
def test_emitted_payloads_validate_strictly(kind: str) -> None:
    assert check_payload(kind, EMITTED[kind]) == []
    assert parse_payload(kind, EMITTED[kind]) is not None


@pytest.mark.parametrize("kind", sorted(EMITTED))
def test_the_model_an_emitter_builds_goes_out_as_the_dict_it_used_to_build(kind: str) -> None:
    """The wire is what the emitter set: the same keys, explicit nulls kept, unset fields left
    out, ints as ints, and (except for a TurnResult, camelCase in field order) the same order."""
    wire = wire_payload(kind, _model(kind))
    assert wire == EMITTED[kind]
    if PAYLOADS[kind] is not TurnEndedPayload:
        assert json.dumps(wire) == json.dumps(EMITTED[kind])


@pytest.mark.parametrize("kind", sorted(EMITTED))
def test_redacted_and_bounded_payloads_still_validate(kind: str) -> None:
    redactor = Redactor.from_values(["hunter2-secret"])
    payload = json.loads(json.dumps(EMITTED[kind]).replace("Chart", "hunter2-secret"))
    channel = EventChannel("t", "s", redact=lambda p: redactor.value(p, EVENT_LIMITS))
    channel.emit(kind, _model(kind, payload))
    (event,) = channel.drain()
    assert "hunter2-secret" not in json.dumps(event.payload)
    assert check_payload(kind, event.payload) == []


def test_credential_looking_tool_inputs_and_huge_values_still_validate() -> None:
    inputs = {"api_key": "sk-abcdefghijklmnopqrstuvwx", "rows": list(range(500)), "x": "y " * 10**4}
    channel = EventChannel("t", "s", redact=lambda p: Redactor().value(p, EVENT_LIMITS))
    channel.emit(
        "tool_call_start",
        _model("tool_call_start", EMITTED["tool_call_start"] | {"inputs": inputs}),
    )
    (event,) = channel.drain()
    data = event.data
    assert isinstance(data, ToolCallStartPayload)
    assert data.inputs["api_key"] == "[redacted]"


def test_coalesced_payloads_validate_and_the_latest_wins() -> None:
    channel = EventChannel("t", "s")
    for used in (1, 2, 3):
        channel.emit("budget_update", BudgetUpdatePayload(used=used, max=9, category="generation"))
    (event,) = channel.drain()
    assert event.data == BudgetUpdatePayload(used=3, max=9, category="generation")


def test_the_control_emits_through_the_channel() -> None:
    channel = EventChannel("t", "s")
    control = TurnControl(max_units=2, timeout_seconds=None, emit=channel.emit)
    control.charge(1, "triage", "agent-1")
    control.cancel()
    kinds = [(e.kind, e.agent_id, e.data is not None) for e in channel.drain()]
    assert kinds == [("budget_update", "agent-1", True), ("status", "root", True)]


def test_a_wrong_field_fails_at_the_emitter_with_a_validation_error() -> None:
    with pytest.raises(ValidationError, match=r"(?s)BudgetUpdatePayload\nlimit\n.*Extra inputs"):
        BudgetUpdatePayload(used=1, max=2, category="g", limit=2)  # type: ignore[call-arg]
    with pytest.raises(ValidationError, match=r"(?s)CellOutputPayload\nouput\n"):
        CellOutputPayload(  # type: ignore[call-arg]  # a misspelled optional field
            cell=1, phase="task", ok=True, outcome="completed", duration_ms=1.0, ouput="1\n"
        )
    with pytest.raises(ValidationError, match=r"evidence\.why"):  # nested: still at the emitter
        TriageDecisionPayload(mode="m", route="rlm", summary="s", evidence={"why": 1})
    with pytest.raises(ValidationError, match=r"(?s)subtask\n.*Field required"):
        ChildSpawnedPayload(depth=1)  # type: ignore[call-arg]
    with pytest.raises(ValidationError, match=r"(?s)outcome\n.*Input should be"):
        CellOutputPayload(cell=1, phase="task", ok=True, outcome="fine", duration_ms=1.0)


def test_the_channel_takes_only_the_kinds_model() -> None:
    """Before, a dict with an undefined key was only logged (and sent) outside the tests."""
    channel = EventChannel("t", "s")
    control = TurnControl(max_units=2, timeout_seconds=None, emit=channel.emit)
    budget = {"used": 1, "max": 2, "category": "g", "limit": 2}
    with pytest.raises(EventPayloadError, match="budget_update event takes a BudgetUpdatePayload"):
        control.emit("budget_update", budget)  # type: ignore[arg-type]
    with pytest.raises(EventPayloadError, match="not dict"):  # even a well-formed dict
        channel.emit("budget_update", {"used": 1, "max": 2, "category": "g"})  # type: ignore[arg-type]
    with pytest.raises(EventPayloadError, match="takes a BudgetUpdatePayload, not StatusPayload"):
        channel.emit("budget_update", StatusPayload(status="stopping"))
    with pytest.raises(EventPayloadError, match="turn_completed event takes a TurnResult"):
        channel.emit("turn_completed", StatusPayload(status="stopping"))
    with pytest.raises(EventPayloadError, match="unknown event kind"):
        channel.emit("child_started", StatusPayload(status="stopping"))
    parsed = BudgetUpdatePayload.model_validate(budget, extra="allow")  # as a consumer parses
    with pytest.raises(EventPayloadError, match="not fields of BudgetUpdatePayload: limit"):
        channel.emit("budget_update", parsed)
    assert channel.drain() == []


def test_consumers_tolerate_keys_a_newer_server_adds() -> None:
    budget = parse_payload("budget_update", {"used": 1, "max": 2, "category": "g", "new": 1})
    assert isinstance(budget, BudgetUpdatePayload) and budget.model_extra == {"new": 1}
    triage = parse_payload("triage_decision", EMITTED["triage_decision"] | {"evidence": {"x": 1}})
    assert isinstance(triage, TriageDecisionPayload) and triage.evidence is not None
    assert triage.evidence.model_extra == {"x": 1}
    assert check_payload("budget_update", {"used": 1, "max": 2, "category": "g", "new": 1}) == [
        "new: not a field of BudgetUpdatePayload"
    ]


def test_payload_equality_ignores_the_order_fields_were_given_in() -> None:
    a = BudgetUpdatePayload(used=1, max=2, category="g")
    b = BudgetUpdatePayload(category="g", max=2, used=1)
    assert a == b and hash(a) == hash(b)
    assert list(a.wire()) == ["used", "max", "category"]
    assert list(b.wire()) == ["category", "max", "used"]
    assert a != BudgetUpdatePayload(used=2, max=2, category="g")


@pytest.mark.parametrize("outcome", ["completed", "failed", "cancelled"])
def test_the_scripted_trace_events_have_the_engine_shapes(outcome: str) -> None:
    for event in scripted_turn_events("t1", "s1", outcome=outcome):
        assert check_payload(event.kind, event.payload) == [], event.kind


# --- the wire is unchanged ------------------------------------------------------------------

WIRE = Path(__file__).with_name("turn_events_wire.jsonl")  # captured before payloads were models
CHILD = "root.1"


def _scripted_models(outcome: str) -> list[tuple[str, Payload, str]]:
    """``scripted_turn_events`` as an emitter builds it: (kind, payload model, agent)."""
    chart = "artifacts/root.1/chart.txt"
    return [
        ("turn_started", TurnStartedPayload(mode="hybrid", task="Sum revenue"), "root"),
        (
            "lm_start",
            LmStartPayload(call_id="lm1", model="openai/scripted", category="triage"),
            "root",
        ),
        (
            "lm_end",
            LmEndPayload(
                call_id="lm1",
                model="openai/scripted",
                category="triage",
                ok=True,
                duration_ms=5,
                usage=TokenUsage(input_tokens=10, output_tokens=5),
            ),
            "root",
        ),
        (
            "triage_decision",
            TriageDecisionPayload(
                mode="hybrid",
                route="rlm",
                override_reason=None,
                summary="needs code over files/sales.csv",
                evidence=TriageEvidence(
                    raw_choice="rlm", backend="generative", effective_route="rlm"
                ),
            ),
            "root",
        ),
        (
            "lm_start",
            LmStartPayload(call_id="lm2", model="openai/scripted", category="root"),
            "root",
        ),
        (
            "lm_end",
            LmEndPayload(
                call_id="lm2",
                model="openai/scripted",
                category="root",
                ok=True,
                duration_ms=5,
                usage=TokenUsage(input_tokens=100, output_tokens=20),
            ),
            "root",
        ),
        ("code_cell", CodeCellPayload(cell=1, phase="task", code="print(1/0)"), "root"),
        (
            "cell_output",
            CellOutputPayload(
                cell=1,
                phase="task",
                ok=False,
                outcome="error",
                error_type="ZeroDivisionError",
                error="ZeroDivisionError: division by zero",
                duration_ms=3,
            ),
            "root",
        ),
        (
            "code_cell",
            CodeCellPayload(
                cell=2,
                phase="task",
                code="import pandas as pd\nprint(pd.read_csv('files/sales.csv').revenue.sum())",
            ),
            "root",
        ),
        (
            "cell_output",
            CellOutputPayload(
                cell=2, phase="task", ok=True, outcome="completed", output="42\n", duration_ms=7
            ),
            "root",
        ),
        (
            "tool_call_start",
            ToolCallStartPayload(
                call_id="t1", tool="spawn_agent", source="dspy", inputs={"subtask": "Chart revenue"}
            ),
            "root",
        ),
        (
            "child_spawned",
            ChildSpawnedPayload(subtask="Chart revenue", input_paths=["files/sales.csv"], depth=1),
            CHILD,
        ),
        (
            "lm_start",
            LmStartPayload(call_id="lm3", model="openai/scripted", category="child"),
            CHILD,
        ),
        (
            "lm_end",
            LmEndPayload(
                call_id="lm3",
                model="openai/scripted",
                category="child",
                ok=True,
                duration_ms=5,
                usage=TokenUsage(input_tokens=50, output_tokens=10),
            ),
            CHILD,
        ),
        (
            "code_cell",
            CodeCellPayload(
                cell=1, phase="task", code="open('artifacts/chart.txt','w').write('##')"
            ),
            CHILD,
        ),
        (
            "cell_output",
            CellOutputPayload(cell=1, phase="task", ok=True, outcome="completed", duration_ms=2),
            CHILD,
        ),
        (
            "artifact",
            ArtifactPayload(path=chart, sha256="ab" * 32, size_bytes=2, root_path=chart),
            CHILD,
        ),
        (
            "child_finished",
            ChildFinishedPayload(
                status="succeeded",
                artifacts=[
                    ArtifactReceipt(
                        path=chart,
                        sha256="ab" * 32,
                        agent_id=CHILD,
                        root_path="artifacts/chart.txt",
                    )
                ],
            ),
            CHILD,
        ),
        (
            "tool_call_end",
            ToolCallEndPayload(
                call_id="t1",
                tool="spawn_agent",
                source="dspy",
                ok=True,
                output="chart saved",
                duration_ms=30,
            ),
            "root",
        ),
        ("budget_update", BudgetUpdatePayload(used=3, max=150, category="generation"), "root"),
        (f"turn_{outcome}", _scripted_result(outcome), "root"),
    ]


def _scripted_result(outcome: str) -> TurnResult:
    """The TurnResult the captured sequence ends with (as ``scripted_turn_result`` built it)."""
    chart = "artifacts/root.1/chart.txt"
    artifact = ArtifactRef(
        uri=f"fleet:/sessions/s1/{chart}",
        path=chart,
        size_bytes=2,
        sha256="ab" * 32,
        turn_id="t1",
        agent_id=CHILD,
        provenance=[
            ProvenanceRecord(
                path=chart,
                root_path="artifacts/chart.txt",
                sha256="ab" * 32,
                size_bytes=2,
                agent_id=CHILD,
                parent_chain=["root"],
                turn_id="t1",
            )
        ],
    )
    errors = {
        "failed": TurnError(kind="SandboxError", message="worker died"),
        "cancelled": TurnError(kind="cancelled", message="The Turn was cancelled"),
    }
    return TurnResult(
        turn_id="t1",
        session_id="s1",
        status=outcome,  # type: ignore[arg-type]
        answer="Total revenue is 42" if outcome == "completed" else "",
        route="rlm",
        artifacts=[artifact] if outcome == "completed" else [],
        usage=Usage(
            model_calls=3,
            sandbox_errors=1,
            input_tokens=160,
            output_tokens=35,
            calls_by_category={"triage": 1, "root": 1, "child": 1},
        ),
        error=errors.get(outcome),
    )


def _wire_lines(events: list[TurnEvent]) -> list[str]:
    lines = []
    for event in events:
        wire = event.wire()
        wire.pop("at")
        lines.append(json.dumps(wire).replace(DEFAULT_PROGRAM_DIGEST, "<default-program-digest>"))
    return lines


def _through_the_channel(outcome: str) -> list[TurnEvent]:
    channel = EventChannel("t1", "s1")
    for kind, payload, agent in _scripted_models(outcome):
        parent = None if agent == "root" else "root"
        channel.emit(kind, payload, agent_id=agent, parent_agent_id=parent)
    channel.close()
    return channel.drain()


def test_the_wire_json_is_byte_identical_to_before_payloads_were_models() -> None:
    """Events emitted as payload models through the channel go out byte for byte as the dicts
    emitters built before: tests/unit/turn_events_wire.jsonl is the wire (``at`` left out) of
    ``scripted_turn_events`` (completed, then the failed and cancelled ends), captured before."""
    expected = WIRE.read_text(encoding="utf-8").splitlines()
    emitted = _wire_lines(_through_the_channel("completed"))
    emitted += [_wire_lines(_through_the_channel(o))[-1] for o in ("failed", "cancelled")]
    assert emitted == expected


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
    "fleet_lsp/cli/live.py",
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
