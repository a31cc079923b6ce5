"""Handlers' replies and their one serialization (``protocol.to_wire``): every reply model sends
exactly the fields of the result TypedDict the schema documents, and the JSON is what the
server sent before replies were typed (same keys, order, camelCase and omissions)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NotRequired, get_origin, get_type_hints

import attrs
import pytest

from fleet_core.api import OptimizationRun
from fleet_core.api.evaluation import LabelResult
from fleet_core.evaluation.labels import TraceLabels
from fleet_core.models import Memory, ProvenanceRecord, SessionInfo, WorkspaceFile
from fleet_lsp import protocol
from fleet_lsp.documents import optimization_report_uri
from fleet_lsp.features.optimize import _run_reply
from fleet_lsp.protocol import (
    ArtifactEntry,
    ArtifactListReply,
    FolderAttachReply,
    SessionListReply,
    SessionReply,
    TraceReply,
    to_wire,
)
from fleet_lsp.traces import label_reply, label_result_wire

#: Each attrs reply model and the result (or item) TypedDict it is sent as.
REPLIES: list[tuple[type, type]] = [
    (protocol.SessionListReply, protocol.SessionListResult),
    (protocol.HistoryReply, protocol.HistoryResult),
    (protocol.FolderAttachReply, protocol.AttachResult),
    (protocol.WorkspaceListReply, protocol.WorkspaceListResult),
    (protocol.ArtifactEntry, protocol.ArtifactWire),
    (protocol.ArtifactListReply, protocol.ArtifactListResult),
    (protocol.ArtifactOpenReply, protocol.ArtifactOpenResult),
    (protocol.ArtifactSaveReply, protocol.ArtifactSaveResult),
    (protocol.TraceReply, protocol.TraceResult),
    (protocol.TraceEntry, protocol.TraceSummaryWire),
    (protocol.TraceListReply, protocol.TraceListResult),
    (protocol.TraceLabelReply, protocol.TraceLabelResult),
    (protocol.MemoryListReply, protocol.MemoryListResult),
    (protocol.MemoryAddReply, protocol.MemoryAddResult),
    (protocol.OptimizeStatusReply, protocol.OptimizeStatusResult),
    (protocol.OptimizeRunReply, protocol.OptimizeRunResult),
    (protocol.DebugInfoReply, protocol.DebugInfoResult),
]


def _optional_keys(wire: type) -> set[str]:
    hints = get_type_hints(wire, include_extras=True)
    return {name for name, tp in hints.items() if get_origin(tp) is NotRequired}


@pytest.mark.parametrize(("reply", "wire"), REPLIES, ids=lambda t: t.__name__)
def test_a_reply_sends_the_fields_of_its_result_type(reply: type, wire: type) -> None:
    fields = {protocol.json_name(f): f for f in attrs.fields(reply)}
    assert set(fields) == set(wire.__annotations__)
    optional = _optional_keys(wire)
    for name, field in fields.items():
        if field.default is None:  # left out while None: the TypedDict must allow that
            assert name in optional, f"{reply.__name__}.{field.name} may be absent"
        if name not in optional:  # required on the wire: always sent
            assert field.default is attrs.NOTHING, f"{reply.__name__}.{field.name} is required"


def test_every_reply_model_is_paired_with_its_result_type() -> None:
    paired = {reply for reply, _ in REPLIES} | {protocol.SessionReply}
    models = {
        value
        for name, value in vars(protocol).items()
        if isinstance(value, type) and name.endswith(("Reply", "Entry")) and attrs.has(value)
    }
    assert models == paired


NOW = datetime(2026, 12, 1, 12, 0, 0, 123456, tzinfo=UTC)


def test_a_none_field_is_left_out_only_where_the_result_type_allows_it() -> None:
    doc = TraceReply(
        trace_id="tr-1", turn_id="t1", session_id="s1", uri="u", markdown="# x", source="mlflow"
    )
    assert to_wire(doc) == {
        "traceId": "tr-1",
        "turnId": "t1",
        "sessionId": "s1",
        "uri": "u",
        "markdown": "# x",
        "source": "mlflow",
    }
    status = protocol.OptimizeStatusReply(
        session_id="s1", active_digest="d", active_version=None, candidates=[]
    )
    assert to_wire(status) == {
        "sessionId": "s1",
        "activeDigest": "d",
        "activeVersion": None,  # required: null is sent
        "candidates": [],
    }


def test_records_are_sent_by_their_own_wire_form() -> None:
    info = SessionInfo(
        session_id="s1", mode="rlm", created_at=NOW, updated_at=NOW, selections={"root": "m"}
    )
    page = SessionListReply(sessions=[SessionReply(info)], next_cursor="c1")
    expected = info.wire()
    del expected["selections"]  # server-side detail
    assert to_wire(page) == {"sessions": [expected], "nextCursor": "c1"}
    assert expected["createdAt"] == "2026-12-01T12:00:00.123456Z"  # pydantic's form, kept
    memory = Memory(memory_id="m1", kind="user", content="c", created_at=NOW)
    assert to_wire(protocol.MemoryAddReply(memory=memory)) == {"memory": memory.wire()}
    assert to_wire({"a": [memory]}) == {"a": [memory.wire()]}  # inside a TypedDict too


def test_an_artifact_entry_is_the_hand_built_dict_it_replaces() -> None:
    record = ProvenanceRecord(
        path="artifacts/a.csv",
        root_path="artifacts/a.csv",
        sha256="h",
        size_bytes=3,
        agent_id="root",
    )
    entry = ArtifactEntry(
        uri="fleet:/sessions/s1/artifacts/a.csv",
        path="artifacts/a.csv",
        size_bytes=3,
        sha256="h",
        agent_id="root",
        provenance=[record],
    )
    before = {
        "uri": "fleet:/sessions/s1/artifacts/a.csv",
        "path": "artifacts/a.csv",
        "sizeBytes": 3,
        "sha256": "h",
        "agentId": "root",
        "provenance": [record.wire()],
    }
    assert json.dumps(to_wire(ArtifactListReply(artifacts=[entry]))) == json.dumps(
        {"artifacts": [before]}
    )


def test_a_folder_attach_keeps_its_key_order() -> None:
    file = WorkspaceFile(path="files/d/a.txt", size_bytes=1, sha256="h")
    reply = FolderAttachReply(path="files/d", size_bytes=1, sha256="d", files=[file], skipped=[])
    assert list(to_wire(reply)) == ["path", "sizeBytes", "sha256", "files", "skipped"]


def test_an_optimization_run_reply_is_the_json_sent_before() -> None:
    run = OptimizationRun(
        version="s1-" + "a" * 32,
        gate_passed=True,
        gate=[("holdout", True, "ok")],
        changed_components=["triage"],
        candidate_digest="c",
        report_path=Path("/r.md"),
        mlflow_run_id=None,
        rollouts=12,
        host_seconds=1.23456,
        dataset_sizes={"train": 3},
        notes=["n"],
    )
    before: dict[str, Any] = {
        "sessionId": "s1",
        "version": run.version,
        "gatePassed": True,
        "gate": [{"name": "holdout", "passed": True, "detail": "ok"}],
        "changedComponents": ["triage"],
        "candidateDigest": "c",
        "reportUri": optimization_report_uri("s1", run.version),
        "rollouts": 12,
        "hostSeconds": 1.235,
        "datasetSizes": {"train": 3},
        "mlflowRunId": None,
        "notes": ["n"],
    }
    assert json.dumps(to_wire(_run_reply("s1", run))) == json.dumps(before)


@pytest.mark.parametrize(
    ("session_id", "turn_id", "uri"),
    [
        ("s 1#%", "t1", "fleet:/sessions/s%201%23%25/traces/tr-1.md"),
        (None, None, None),  # a trace whose Session is unknown: no document URI, nulls sent
    ],
)
def test_a_label_reply_is_the_json_the_server_and_the_cli_sent_before(
    session_id: str | None, turn_id: str | None, uri: str | None
) -> None:
    labels = TraceLabels(
        source_group="g", expected_answer="42", expected_values=["42"], route="rlm", critical=True
    )
    result = LabelResult(
        trace_id="tr-1",
        labels=labels,
        eligible=False,
        ineligible_reason="why",
        turn_id=turn_id,
        session_id=session_id,
        messages=["m"],
    )
    before = {
        "traceId": "tr-1",
        "turnId": turn_id,
        "sessionId": session_id,
        "labels": {
            "status": "approved",
            "group": "g",
            "answer": "42",
            "values": ["42"],
            "route": "rlm",
            "critical": True,
            "expectations": None,
            "reviewer": "human",
        },
        "eligible": False,
        "ineligibleReason": "why",
        "messages": ["m"],
        "uri": uri,
    }
    server = json.dumps(to_wire(label_reply(result)))  # fleet/trace/label
    cli = json.dumps(label_result_wire(result), indent=2)  # fleet-lsp eval label --json
    assert server == json.dumps(before)
    assert cli == json.dumps(before, indent=2)


def test_what_has_no_wire_form_is_a_bug_not_a_silent_answer() -> None:
    with pytest.raises(TypeError, match="no wire form for object"):
        to_wire(object())
