"""Labels while MLflow is down (issue 21): labelling a trace succeeds at once, saying the label is
queued; the label row is in the store (listing and ``fleet/trace/get`` show it), and the exporter
writes its expectations to MLflow once the trace is there. The outage is a tracking server on a
port nothing listens on; "MLflow is back" is the same state directory opened with a working
local MLflow store (real SQLite store, real MLflow local store, real sandbox)."""

from __future__ import annotations

import socket
from pathlib import Path

from fleet_core.api import FleetRuntime
from fleet_core.config import EffectiveConfig, load_config
from fleet_core.engine.scripted_lm import SwitchableLms
from fleet_core.evaluation.labels import LabelUpdate
from fleet_core.observability.tracing import MlflowTracer
from tests.observability.turns import rlm_turn as _turn


def _dead_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _config(state: Path, *, down: bool) -> EffectiveConfig:
    environ = {"FLEET_STATE_DIR": str(state)}
    if down:
        environ |= {
            "FLEET_MLFLOW_DESTINATION": "server",
            "FLEET_MLFLOW_TRACKING_URI": f"http://127.0.0.1:{_dead_port()}",
        }
    return load_config(environ=environ, cwd=state.parent)


async def _open(state: Path, lms: SwitchableLms, *, down: bool) -> FleetRuntime:
    return await FleetRuntime.open(
        _config(state, down=down), lm_provider=lms, trace_export="deferred"
    )


UPDATE = LabelUpdate(review_status="approved", expected_answer="42", expected_values=["42"])


async def _assert_back_in_mlflow(state: Path, lms: SwitchableLms, trace_id: str) -> None:
    """The same state directory with MLflow reachable: the queue drains, trace and label land."""
    runtime = await _open(state, lms, down=False)
    try:
        await runtime.traces.flush()
        assert await runtime.traces.queue() == []  # nothing stranded
        tracer = runtime.tracer
        assert isinstance(tracer, MlflowTracer)
        stored = await runtime.traces.labels(trace_id)
        assert stored is not None
        assert tracer.backend.read_labels(trace_id) == stored["labels"]  # nothing lost
        view = await runtime.traces.load(trace_id)
        assert not view.pending and view.labels["expected_answer"] == "42"
    finally:
        await runtime.close()


async def test_a_label_on_a_queued_trace_during_an_outage_is_saved_and_exported_later(
    tmp_path: Path,
) -> None:
    lms, state = SwitchableLms(), tmp_path / "state"
    runtime = await _open(state, lms, down=True)
    try:
        trace_id = await _turn(runtime, lms)  # its trace stays queued: MLflow is down

        result = await runtime.traces.label(trace_id, UPDATE)

        assert result.labels.expected_answer == "42"
        assert any("queued" in message for message in result.messages), result.messages
        stored = await runtime.traces.labels(trace_id)
        assert stored is not None and stored["labels"] == result.labels.wire()
        view = await runtime.traces.load(trace_id)  # fleet/trace/get: from the queue
        assert view.pending and view.labels == result.labels.wire()
        again = await runtime.traces.label(trace_id, LabelUpdate(reviewer="second"))
        assert again.labels.expected_answer == "42"  # merged with the queued label
        assert again.labels.reviewer == "second"
    finally:
        await runtime.close()
    await _assert_back_in_mlflow(state, lms, trace_id)


async def test_a_label_on_an_exported_trace_during_an_outage_is_saved_and_exported_later(
    tmp_path: Path,
) -> None:
    lms, state = SwitchableLms(), tmp_path / "state"
    runtime = await _open(state, lms, down=False)
    try:
        trace_id = await _turn(runtime, lms)
        await runtime.traces.flush()
        assert await runtime.traces.pending(trace_id) is None  # in MLflow
    finally:
        await runtime.close()
    runtime = await _open(state, lms, down=True)
    try:
        result = await runtime.traces.label(trace_id, UPDATE)
        assert any("queued" in message for message in result.messages), result.messages
        stored = await runtime.traces.labels(trace_id)
        assert stored is not None and stored["labels"]["expected_answer"] == "42"
    finally:
        await runtime.close()
    await _assert_back_in_mlflow(state, lms, trace_id)
