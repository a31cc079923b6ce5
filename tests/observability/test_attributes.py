"""One name per trace key (``fleet_core.observability.attributes``): the writer writes only its
constants, their strings never change (stored traces must read back), and the Turn service's
annotations name existing keys. Pure Python: no MLflow, no store."""

from __future__ import annotations

import ast
import uuid
from pathlib import Path

import pytest

from fleet_core.events import ROOT_AGENT
from fleet_core.models import TurnError
from fleet_core.observability import attributes as attr
from fleet_core.observability.records import TraceRecord, TurnTraceStart
from fleet_core.observability.sample_turn import scripted_turn_events, scripted_turn_result
from fleet_core.observability.spans import TraceBuilder
from fleet_core.observability.traceview import build_view

CORE = Path(__file__).resolve().parents[2] / "core" / "fleet_core"

# The keys existing traces hold. Adding a key is fine (add it here too); renaming or removing
# one is not: traces written before would read back without it.
RECORDED_KEYS = {
    "fleet.kind", "fleet.session_id", "fleet.turn_id", "fleet.execution_mode",
    "fleet.configuration_digest", "fleet.compiled_program_digest", "fleet.idempotency_key",
    "fleet.model_settings", "fleet.turn_timeout_seconds", "fleet.mode", "fleet.spans_dropped",
    "fleet.dataset", "fleet.skills", "fleet.replay_sha256", "fleet.memories_proposed",
    "fleet.skills_saved", "fleet.jev_decisions", "fleet.skill_selection", "fleet.outcome",
    "fleet.usage", "fleet.sandbox_errors_observed", "fleet.budget", "fleet.duration_seconds",
    "fleet.error_traceback", "fleet.route", "fleet.route_reason", "fleet.override_reason",
    "fleet.route_evidence", "fleet.agent_id", "fleet.parent_agent_id", "fleet.depth",
    "fleet.status", "fleet.submit_rejections", "fleet.ungrounded_submits_accepted",
    "fleet.category", "fleet.duration_ms", "fleet.cell_id", "fleet.phase", "fleet.code_chars",
    "fleet.error_type", "fleet.ungrounded_figures", "fleet.submit_rejected", "fleet.tool",
    "fleet.source", "fleet.unfinished", "fleet.answer_outcome",
}  # fmt: skip
OTHER_KEYS = {"model", "mlflow.chat.tokenUsage", "mlflow.trace.session"}


def test_the_constants_are_the_recorded_keys() -> None:
    assert attr.FLEET_KEYS == RECORDED_KEYS
    constants = {
        name: value
        for name, value in vars(attr).items()
        if name.isupper() and isinstance(value, str) and name != "PREFIX"
    }
    assert set(constants.values()) == RECORDED_KEYS | OTHER_KEYS
    assert len(set(constants.values())) == len(constants)  # one name per key


def _turn_annotations() -> tuple[set[str], set[str]]:
    """The keyword names of every ``.annotate(...)`` and ``.phase(...)`` call in the core."""
    annotations: set[str] = set()
    phases: set[str] = set()
    for path in CORE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                found = {k.arg for k in node.keywords if k.arg}
                if node.func.attr == "annotate":
                    annotations |= found
                elif node.func.attr == "phase":
                    phases |= found
    return annotations, phases


def test_every_annotation_the_core_makes_is_a_constant() -> None:
    annotations, phases = _turn_annotations()
    assert {"dataset", "skills", "replay_sha256"} <= annotations  # turns.py
    for name in annotations | phases:
        assert attr.fleet_key(name) in attr.FLEET_KEYS, f"annotate({name}=...) has no constant"


def _full_trace(outcome: str = "completed") -> TraceRecord:
    """The realistic event sequence, plus every other event kind and path the builder records."""
    turn_id, session_id = uuid.uuid4().hex, "sess-keys"
    builder = TraceBuilder(
        TurnTraceStart(
            turn_id=turn_id,
            session_id=session_id,
            task="Sum revenue in files/sales.csv",
            mode="hybrid",
            configuration_digest="c" * 64,
            compiled_program_digest="p" * 64,
            idempotency_key="case-1",
            record_replay=True,
            model_settings={"root": {"temperature": 0}},
            turn_timeout_seconds=600,
        )
    )
    annotations, _ = _turn_annotations()
    with builder.phase("prepare_inputs"):
        pass
    builder.annotate(**{name: f"value-{name}" for name in sorted(annotations)})
    with pytest.raises(RuntimeError), builder.phase("capture_replay"):
        raise RuntimeError("refused")
    events = scripted_turn_events(turn_id, session_id, outcome=outcome)
    for event in events[:-2]:  # up to the budget update and the terminal event
        builder.on_event(event)
    record = builder.record
    record("code_cell", {"cell": 3, "phase": "task", "code": "SUBMIT(answer='43')"})
    record("ungrounded_submit", {"cell": 3, "figures": ["43"], "rejected": True})
    record("code_cell", {"cell": 4, "phase": "task", "code": "SUBMIT(answer='44')"})
    record("ungrounded_submit", {"cell": 4, "figures": ["44"], "rejected": False})
    submitted = {"cell": 4, "phase": "task", "ok": True, "outcome": "submitted", "duration_ms": 1}
    record("cell_output", submitted)
    record("memory_proposed", {"memory_id": "m1", "name": "units", "kind": "sandbox", "chars": 9})
    record(
        "skill_saved",
        {"name": "sum", "path": "skills/sum/SKILL.md", "size_bytes": 3, "sha256": "a" * 64,
         "replaced": False},
    )  # fmt: skip
    record(
        "jev_decision",
        {"category": "routing", "backend": "generative", "items": 1, "ok": True,
         "duration_ms": 2.0},
    )  # fmt: skip
    decision = {"skill": "sum", "decision": "no", "backend": "jev"}
    record("skill_selection", {"selected": [], "decisions": [decision]})
    record(
        "triage_decision",
        {"mode": "hybrid", "route": "rlm", "override_reason": "forced", "summary": "again"},
    )
    record("child_spawned", {"subtask": "left open", "depth": 1}, agent_id="root.2",
           parent_agent_id=ROOT_AGENT)  # fmt: skip
    record("tool_call_start", {"call_id": "t9", "tool": "read_file", "source": "dspy"})
    for event in events[-2:]:
        builder.on_event(event)
    result = scripted_turn_result(turn_id, session_id, outcome=outcome)
    if outcome == "failed":
        error = TurnError(kind="SandboxError", message="worker died", traceback="Traceback: x")
        result = result.model_copy(update={"error": error})
    return builder.finish(result)


@pytest.mark.parametrize("outcome", ["completed", "failed", "cancelled"])
def test_the_builder_writes_only_the_constants(outcome: str) -> None:
    record = _full_trace(outcome)
    written: set[str] = set()
    for span in record.spans:
        written |= set(span.attributes)
    written |= set(record.tags) | set(record.metadata)
    unknown = {k for k in written if k.startswith("fleet.") and k not in attr.FLEET_KEYS}
    assert not unknown, f"keys written that attributes.py does not define: {sorted(unknown)}"
    assert not {k for k in written if not k.startswith("fleet.")} - OTHER_KEYS
    # the sequence reaches nearly every key: a constant the writer never uses is suspect
    never = attr.FLEET_KEYS - written - {"fleet.spans_dropped", "fleet.error_traceback"}
    assert not never, f"constants no span carries: {sorted(never)}"
    root = next(s for s in record.spans if s.parent_id is None)
    assert (attr.ERROR_TRACEBACK in root.attributes) == (outcome == "failed")


def test_the_reader_reads_what_the_writer_wrote() -> None:
    record = _full_trace()
    view = build_view(record.trace_id, record.spans)
    assert (view.mode, view.route, view.outcome) == ("hybrid", "rlm", "completed")
    assert view.configuration_digest == "c" * 64 and view.compiled_program_digest == "p" * 64
    assert view.replay_sha256 == "value-replay_sha256"
    assert [p.name for p in view.phases] == ["prepare_inputs", "capture_replay"]
    assert not view.phases[1].ok
    root = view.root
    assert root is not None
    # (the events recorded here are stamped "now", the scripted ones a little later: sort)
    assert sorted(c.outcome for c in root.cells) == ["error", "error", "ok", "submitted"]
    (failed,) = [c for c in root.cells if c.error_type]
    assert failed.error_type == "ZeroDivisionError" and failed.duration_ms == 3
    assert {c.phase for c in root.cells} == {"task"}
    assert root.lm_calls[0].category == "root" and root.lm_calls[0].model == "openai/scripted"
    assert sorted(t.tool for t in root.tool_calls) == ["read_file", "spawn_agent"]
    children = {c.agent_id: c for c in root.children}
    assert children.keys() == {"root.1", "root.2"}
    assert children["root.1"].status == "succeeded" and children["root.2"].status == "failed"
    assert children["root.2"].subtask == "left open"
