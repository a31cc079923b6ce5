from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from fleet_core.api import FleetRuntime
from fleet_core.evaluation.labels import (
    LabelInvalid,
    LabelService,
    LabelSyncError,
    LabelUpdate,
    load_expectations_file,
)
from fleet_core.observability.replay import capture_replay, encode_replay
from fleet_core.observability.sample_turn import scripted_turn_events, scripted_turn_result
from fleet_core.observability.tracing import MlflowTracer, TurnTraceStart
from fleet_core.store import TurnOutcome

from .conftest import make_config


@pytest.fixture
async def runtime(mlflow_state: Path) -> AsyncIterator[FleetRuntime]:
    rt = await FleetRuntime.open(make_config(mlflow_state / f"rt-{uuid.uuid4().hex[:6]}"))
    await rt.new_session("label-s")
    yield rt
    await rt.close()


def _turn(runtime: FleetRuntime, tracer: MlflowTracer, *, replay: bool) -> tuple[str, str]:
    claim = runtime.store.claim_turn("label-s", "Sum revenue", None)
    trace = tracer.start(
        TurnTraceStart(
            turn_id=claim.turn_id,
            session_id="label-s",
            task="Sum revenue",
            mode="hybrid",
            configuration_digest="c" * 64,
            record_replay=replay,
        )
    )
    blob = None
    if replay:
        snap = capture_replay(
            turn_id=claim.turn_id,
            session_id="label-s",
            task="Sum revenue",
            mode="hybrid",
            workspace_manifest="",
            files={"files/a.csv": b"x,1\n"},
            configuration=runtime.config,
        )
        blob = encode_replay(snap)
        trace.annotate(replay_sha256=blob[0])
    for event in scripted_turn_events(claim.turn_id, "label-s"):
        trace.on_event(event)
    result = scripted_turn_result(claim.turn_id, "label-s")
    runtime.store.finish_turn(
        claim.turn_id,
        TurnOutcome(
            status="completed",
            result={},
            answer=result.answer,
            trace_id=trace.trace_id,
            replay=blob,
        ),
    )
    tracer.export(trace.finish(result))
    assert trace.trace_id
    return trace.trace_id, claim.turn_id


async def test_labels_land_in_both_stores_and_merge(
    runtime: FleetRuntime, tracer: MlflowTracer
) -> None:
    trace_id, turn_id = _turn(runtime, tracer, replay=True)
    service = LabelService(runtime.store, tracer.backend)
    first = await service.label(
        trace_id, LabelUpdate(expected_answer="42", expected_values=["42"], route="rlm")
    )
    assert first.eligible and first.turn_id == turn_id
    assert first.labels.source_group == "label-s"
    second = await service.label(trace_id, LabelUpdate(critical=True, source_group="g1"))
    assert second.labels.expected_answer == "42" and second.labels.route == "rlm"  # kept
    assert second.labels.critical and second.labels.source_group == "g1"
    row = runtime.store.get_trace_labels(trace_id)
    assert row is not None and row["labels"] == second.labels.wire() and row["eligible"]
    assert tracer.backend.read_labels(trace_id) == second.labels.wire()
    raw = tracer.backend._get_trace(trace_id)
    names = {a.name for a in raw.info.assessments}
    assert {"fleet.labels", "expected_response", "expected_facts"} <= names
    assert tracer.load_trace(trace_id).labels["critical"] is True


async def test_label_without_replay_is_ineligible(
    runtime: FleetRuntime, tracer: MlflowTracer
) -> None:
    trace_id, _ = _turn(runtime, tracer, replay=False)
    result = await LabelService(runtime.store, tracer.backend).label(
        trace_id, LabelUpdate(expected_values=["42"])
    )
    assert not result.eligible and "not replay-captured" in (result.ineligible_reason or "")
    assert result.messages == [result.ineligible_reason]


async def test_validation_errors(
    runtime: FleetRuntime, tracer: MlflowTracer, tmp_path: Path
) -> None:
    trace_id, _ = _turn(runtime, tracer, replay=False)
    service = LabelService(runtime.store, tracer.backend)
    with pytest.raises(LabelInvalid, match="approved label needs"):
        await service.label(trace_id, LabelUpdate(route="rlm"))
    with pytest.raises(LabelInvalid, match="critical label needs"):
        await service.label(trace_id, LabelUpdate(expected_answer="x", critical=True))
    bad = tmp_path / "e.json"
    bad.write_text(
        json.dumps(
            {
                "schema_version": 1,
                "artifacts": [{"path": "artifacts/a.csv", "kind": "csv", "expected": []}],
            }
        )
    )
    with pytest.raises(LabelInvalid, match="key_columns"):
        load_expectations_file(bad)
    bad.write_text(json.dumps({"schema_version": 1, "artifacts": [], "extra": 1}))
    with pytest.raises(LabelInvalid, match="unknown field 'extra'"):
        load_expectations_file(bad)
    bad.write_text(
        json.dumps({"schema_version": 1, "children": [{"input_paths": ["../etc/passwd"]}]})
    )
    with pytest.raises(LabelInvalid, match="normalized"):
        load_expectations_file(bad)
    good = tmp_path / "g.json"
    good.write_text(
        json.dumps(
            {
                "schema_version": 1,
                "artifacts": [
                    {
                        "path": "artifacts/revenue.csv",
                        "kind": "csv",
                        "key_columns": ["region"],
                        "tolerance": 0.01,
                        "expected": [{"region": "N", "revenue": "42"}],
                    }
                ],
                "children": [{"input_paths": ["files/sales.csv"], "artifacts": ["chart.txt"]}],
            }
        )
    )
    result = await service.label(
        trace_id,
        LabelUpdate(expected_values=["42"], structured_expectations=load_expectations_file(good)),
    )
    assert result.labels.structured_expectations is not None


async def test_store_failure_is_reported_and_rerun_repairs(
    runtime: FleetRuntime, tracer: MlflowTracer, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace_id, _ = _turn(runtime, tracer, replay=False)
    service = LabelService(runtime.store, tracer.backend)

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("database is locked")

    monkeypatch.setattr(runtime.store, "upsert_trace_labels", broken)
    with pytest.raises(LabelSyncError, match="saved in MLflow but the store write failed"):
        await service.label(trace_id, LabelUpdate(expected_values=["7"]))
    monkeypatch.undo()
    assert runtime.store.get_trace_labels(trace_id) is None
    again = await service.label(trace_id, LabelUpdate(expected_values=["7"]))
    row = runtime.store.get_trace_labels(trace_id)
    assert row is not None and row["labels"] == again.labels.wire() == tracer.backend.read_labels(
        trace_id
    )
