"""Tracing off the Turn's path: a Turn queues its trace in its own commit; exporting is durable,
idempotent and bounded, and a process killed right after answering loses no trace."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from fleet_core.api import FleetRuntime
from fleet_core.config import EffectiveConfig
from fleet_core.engine.scripted_lm import SwitchableLms
from fleet_core.observability.errors import TraceNotFound
from fleet_core.observability.export import TraceExporter
from fleet_core.observability.records import (
    TraceRecord,
    TurnTraceStart,
    decode_record,
    encode_record,
)
from fleet_core.observability.sample_turn import scripted_turn_events, scripted_turn_result
from fleet_core.observability.tracing import MlflowTracer, create_tracer
from tests.observability.conftest import make_config
from tests.observability.turns import rlm_turn as _turn

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
async def deferred_runtime(
    obs_config: EffectiveConfig, lms: SwitchableLms
) -> AsyncIterator[FleetRuntime]:
    """A deferred-export runtime on the session's shared store, its queue drained first: an
    earlier test's runtime may close with a trace still queued (its exporter's grace ran out)."""
    runtime = await FleetRuntime.open(obs_config, lm_provider=lms, trace_export="deferred")
    await runtime.traces.flush()
    assert await anyio.to_thread.run_sync(runtime.store.count_pending_traces) == 0
    yield runtime
    await runtime.close()


async def test_a_turn_queues_its_trace_in_its_commit_and_one_export_writes_it_once(
    deferred_runtime: FleetRuntime, lms: SwitchableLms
) -> None:
    runtime = deferred_runtime
    trace_id = await _turn(runtime, lms)
    record = await runtime.traces.pending(trace_id)
    assert record is not None and record.trace_id == trace_id
    tracer = runtime.tracer
    assert isinstance(tracer, MlflowTracer)
    with pytest.raises(TraceNotFound):  # nothing reached MLflow on the Turn's path
        tracer.backend.load_trace(trace_id)
    stats = await runtime.traces.flush()
    assert (stats.exported, stats.failed) == (1, 0)
    assert await runtime.traces.pending(trace_id) is None
    first = tracer.backend._get_trace(trace_id)
    tracer.export(record)  # a crash between the write and the dequeue repeats the write
    again = tracer.backend._get_trace(trace_id)
    assert len(again.data.spans) == len(first.data.spans) > 3
    assert len({s.span_id for s in again.data.spans}) == len(again.data.spans)
    found = tracer.backend.search_trace_ids("runtime", max_results=500)
    assert found.count(trace_id) == 1


class FlakyTracer:
    """Fails its first ``failures`` exports, then writes through the real tracer."""

    enabled = True
    scope = "runtime"

    def __init__(self, real: MlflowTracer, failures: int) -> None:
        self.real, self.failures = real, failures

    def export(self, record: TraceRecord, scope: Any = None) -> None:
        if self.failures:
            self.failures -= 1
            raise ConnectionError("MLflow is down")
        self.real.export(record, scope)


async def test_a_failing_destination_keeps_the_trace_queued_and_reads_fall_back_to_it(
    deferred_runtime: FleetRuntime, lms: SwitchableLms
) -> None:
    runtime = deferred_runtime
    trace_id = await _turn(runtime, lms, "'pending answer'")
    tracer = runtime.tracer
    assert isinstance(tracer, MlflowTracer)
    exporter = TraceExporter(runtime.store, FlakyTracer(tracer, failures=1))  # type: ignore[arg-type]
    stats = exporter.export_pending()
    assert (stats.exported, stats.failed) == (0, 1)
    queued = runtime.store.pending_trace(trace_id)
    assert queued is not None and queued.attempts == 1
    view = exporter.queued_record(trace_id)
    assert view is not None and view.trace_id == trace_id
    assert exporter.export_pending().exported == 1
    assert runtime.store.pending_trace(trace_id) is None
    assert tracer.backend.load_trace(trace_id).answer == "pending answer"


async def test_a_queued_trace_reads_from_the_queue_while_the_destination_refuses_it(
    deferred_runtime: FleetRuntime, lms: SwitchableLms
) -> None:
    runtime = deferred_runtime
    trace_id = await _turn(runtime, lms, "'from the queue'")
    runtime._exporter = TraceExporter(  # type: ignore[arg-type]
        runtime.store,
        FlakyTracer(runtime.tracer, failures=10),  # type: ignore[arg-type]
    )
    view = await runtime.traces.load(trace_id)
    assert view.pending and view.answer == "from the queue"


async def test_the_export_queue_is_bounded_and_drops_the_oldest(
    deferred_runtime: FleetRuntime, lms: SwitchableLms
) -> None:
    runtime = deferred_runtime
    await runtime.traces.flush()  # the store is shared by this module's tests
    ids = [await _turn(runtime, lms, f"'{n}'") for n in range(3)]
    exporter = TraceExporter(runtime.store, runtime.tracer, max_pending=1)
    stats = exporter.export_pending()
    assert stats.dropped == 2 and stats.exported == 1
    assert runtime.store.count_pending_traces() == 0
    tracer = runtime.tracer
    assert isinstance(tracer, MlflowTracer)
    assert tracer.backend.load_trace(ids[-1]).answer == "2"  # the newest was kept


def test_a_record_survives_encoding_byte_for_byte(tracer: MlflowTracer) -> None:
    trace = tracer.start(
        TurnTraceStart(
            turn_id="t-enc", session_id="s-enc", task="x", mode="rlm", configuration_digest="c"
        )
    )
    for event in scripted_turn_events("t-enc", "s-enc"):
        trace.on_event(event)
    record = trace.finish(scripted_turn_result("t-enc", "s-enc"))
    assert record is not None and len(record.spans) > 3
    blob = encode_record(record)
    assert decode_record(blob) == record
    assert encode_record(decode_record(blob)) == blob
    with pytest.raises(ValueError, match="unreadable"):
        decode_record(b"not gzip")


# --- kill -9 right after the answer ---------------------------------------------------------


def _frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message).encode()
    return f"Content-Length: {len(body)}\r\n\r\n".encode() + body


def _read_message(stream: Any) -> dict[str, Any]:
    length = 0
    while True:
        line = stream.readline()
        if not line:
            raise EOFError("the server closed its output")
        if line in (b"\r\n", b"\n"):
            break
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    message: dict[str, Any] = json.loads(stream.read(length))
    return message


def _request(proc: subprocess.Popen[bytes], msg_id: int, method: str, params: Any) -> Any:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(_frame({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}))
    proc.stdin.flush()
    while True:
        message = _read_message(proc.stdout)
        if message.get("id") == msg_id and "method" not in message:
            assert "error" not in message, message
            return message["result"]
        if "method" in message and "id" in message:  # a server request: answer it
            reply = {"jsonrpc": "2.0", "id": message["id"], "result": None}
            proc.stdin.write(_frame(reply))
            proc.stdin.flush()


def test_a_server_killed_right_after_answering_loses_no_trace(tmp_path: Path) -> None:
    from tests.lsp.conftest import SALES, write_script
    from tests.lsp.test_turns import SCRIPT

    state = tmp_path / "state"
    script = write_script(tmp_path / "script.json", SCRIPT)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("FLEET_")},
        "FLEET_STATE_DIR": str(state),
        "FLEET_TEST_SCRIPT": str(script),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "fleet_lsp", "serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=tmp_path,
    )
    try:
        _request(proc, 1, "initialize", {"processId": None, "capabilities": {}, "rootUri": None})
        assert proc.stdin is not None
        proc.stdin.write(_frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
        _request(proc, 2, "fleet/session/new", {"sessionId": "killed"})
        _request(proc, 3, "fleet/context/attach", {"sessionId": "killed", "uri": SALES.as_uri()})
        task = "Calculate revenue by region and save artifacts/revenue_by_region.csv."
        result = _request(proc, 4, "fleet/turn/run", {"sessionId": "killed", "task": task})
        os.kill(proc.pid, signal.SIGKILL)  # right after the answer arrived
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert result["status"] == "completed" and result["traceId"]
    trace_id = result["traceId"]
    config = make_config(state)
    # queued in the Turn's commit; the killed server's exporter had seconds of mlflow import
    # ahead of it, so it is (almost always) still queued: the next process must export it
    print("queued at kill:", _pending_count(config))
    # the next process finishes the export: `fleet-lsp trace show`
    shown = subprocess.run(
        [sys.executable, "-m", "fleet_lsp", "trace", "show", trace_id, "--raw"],
        env={k: v for k, v in env.items() if k != "FLEET_TEST_SCRIPT"},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    assert trace_id in shown.stdout and "North" in shown.stdout
    tracer = create_tracer(config)  # the destination as the server resolved it
    assert isinstance(tracer, MlflowTracer)
    try:
        assert tracer.backend.search_trace_ids("runtime", max_results=100).count(trace_id) == 1
    finally:
        tracer.close()
    left = _pending_count(config)
    assert left == 0, f"{left} traces still queued"


def _pending_count(config: EffectiveConfig) -> int:
    from fleet_core.store import Store
    from fleet_core.store.database import database_url

    store = Store.open(database_url(None, config.state_dir), config.state_dir)
    try:
        return store.count_pending_traces()
    finally:
        store.close()


def test_a_cli_turn_leaves_its_trace_queued_and_trace_show_exports_it(tmp_path: Path) -> None:
    from tests.cli.test_cli import QUICKSTART, run
    from tests.lsp.conftest import SALES, write_script
    from tests.lsp.test_turns import SCRIPT

    env = {"FLEET_TEST_SCRIPT": str(write_script(tmp_path / "script.json", SCRIPT))}
    out = run(
        tmp_path, "turn", QUICKSTART, "--session", "cli", "--attach", str(SALES), "--json",
        env=env,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    config = make_config(tmp_path / "state")
    assert _pending_count(config) == 1  # the CLI exits without waiting for MLflow
    trace_id = json.loads(out.stdout)["traceId"]
    shown = run(tmp_path, "trace", "show", trace_id, "--raw")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith(f"# Turn trace `{trace_id}`")
    assert _pending_count(config) == 0
