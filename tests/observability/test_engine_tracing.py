"""End to end: real ``FleetRuntime.run_turn`` Turns (scripted LMs, code in the LocalSandbox) traced
to a real local MLflow store by the runtime's default tracer, read back with ``load_trace``."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from fleet_core.api import FleetRuntime
from fleet_core.engine.scripted_lm import SwitchableLms, action, route, scripted_lm, submit
from fleet_core.models import TurnRequest
from fleet_core.observability.replay import decode_replay
from fleet_core.observability.tracing import MlflowTracer, load_trace

SALES = b"region,revenue\nnorth,100\nsouth,250\nnorth,50\n"


def test_opening_a_runtime_imports_no_mlflow(tmp_path: Path) -> None:
    import subprocess

    code = (
        "import sys, anyio\n"
        "from fleet_core.config import load_config\n"
        "from fleet_core.api import FleetRuntime\n"
        f"config = load_config(environ={{'FLEET_STATE_DIR': {str(tmp_path)!r}}})\n"
        "async def main():\n"
        "    runtime = await FleetRuntime.open(config)\n"
        "    assert runtime.tracer.enabled\n"
        "    await runtime.close()\n"
        "anyio.run(main)\n"
        "assert 'mlflow' not in sys.modules and 'dspy' not in sys.modules, 'imported too early'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


async def test_turn_trace_has_root_attributes_children_and_a_failed_cell(
    traced_runtime: FleetRuntime, lms: SwitchableLms
) -> None:
    runtime = traced_runtime
    session = await runtime.new_session()
    sid = session.session_id
    await runtime.write_file(sid, "files/sales.csv", SALES)
    lms.root = scripted_lm(
        [
            action("print(1 / 0)"),
            action(
                "r = spawn_agent(subtask='CHILD: count the rows', "
                "input_paths=['files/sales.csv'])\nprint(r)"
            ),
            submit("r['findings']", note="delegate row counts"),
        ]
    )
    lms.sub = scripted_lm(
        [route("rlm")],
        rules={
            "CHILD: count": [
                action(
                    "n = len(open('files/sales.csv').read().splitlines()) - 1\n"
                    "open('artifacts/rows.txt', 'w').write(str(n))\nprint(n)"
                ),
                action("SUBMIT(findings=str(n))"),
            ]
        },
    )
    result = await runtime.run_turn(
        TurnRequest(session_id=sid, task="Count the rows with a child agent")
    )
    assert result.status == "completed", result.error
    assert result.answer == "3"
    assert result.trace_id and result.trace_id.startswith("tr-")
    stored = await runtime._run(runtime.store.find_turn_by_trace, result.trace_id)
    assert stored is not None and stored.turn_id == result.turn_id
    assert (await runtime.history(sid))[0].trace_id == result.trace_id

    await runtime.traces.flush()  # queued in the commit; exported here or in the background
    view = await asyncio.to_thread(load_trace, runtime.config, result.trace_id)
    assert (view.turn_id, view.session_id) == (result.turn_id, sid)
    assert (view.mode, view.route, view.outcome) == ("hybrid", "rlm", "completed")
    assert view.route_reason and "Route rlm" in view.route_reason
    effective = await runtime.effective_config(sid)
    assert view.configuration_digest == effective.digest()
    assert view.usage["model_calls"] == result.usage.model_calls
    assert view.usage["sandbox_errors"] == 1
    assert [p.name for p in view.phases] == ["prepare_inputs", "commit"]
    assert len(view.triage_lm_calls) == 1
    root = view.root
    assert root is not None and root.status
    assert root.lm_calls and root.lm_calls[0].input_tokens == 10
    assert {c.phase for c in root.cells} == {"bootstrap", "task"}
    failed = [c for c in root.cells if c.outcome == "error"]
    assert len(failed) == 1 and "ZeroDivisionError" in (failed[0].error or "")
    assert any(c.outcome == "ok" for c in root.cells)
    (child,) = root.children
    assert child.parent_agent_id == "root" and child.status == "succeeded"
    assert child.subtask == "CHILD: count the rows"
    assert child.input_paths == ["files/sales.csv"]
    assert child.lm_calls and any(c.outcome == "ok" for c in child.cells)
    assert child.artifacts and child.artifacts[0]["path"].endswith("/rows.txt")
    # the span tree as MLflow stores it: nested agent spans, session metadata
    tracer = runtime.tracer
    assert isinstance(tracer, MlflowTracer)
    raw = tracer.backend._get_trace(result.trace_id)
    assert raw.info.trace_metadata["mlflow.trace.session"] == sid
    by_id = {s.span_id: s for s in raw.data.spans}
    child_span = next(s for s in raw.data.spans if s.name == f"agent.{child.agent_id}")
    assert by_id[child_span.parent_id].name == "agent.root"
    root_span = next(s for s in raw.data.spans if s.parent_id is None)
    attributes = root_span.attributes
    assert attributes["fleet.route"] == "rlm" and attributes["fleet.outcome"] == "completed"
    assert attributes["fleet.turn_id"] == result.turn_id
    assert attributes["fleet.usage"]["model_calls"] == result.usage.model_calls


async def test_failed_and_cancelled_turns_have_traces(
    traced_runtime: FleetRuntime, lms: SwitchableLms
) -> None:
    runtime = traced_runtime
    sid = (await runtime.new_session(mode="rlm")).session_id
    # failed: the selected dataset changed after it was selected (fails in prepare_inputs)
    await runtime.write_file(sid, "files/sales.csv", SALES)
    await runtime.set_dataset(sid, "files/sales.csv")
    await runtime.write_file(sid, "files/sales.csv", SALES + b"east,1\n")
    failed = await runtime.run_turn(TurnRequest(session_id=sid, task="sum revenue"))
    assert failed.status == "failed" and failed.trace_id
    assert failed.error and failed.error.kind == "DatasetChanged"
    await runtime.traces.flush()  # queued in the commit; exported here or in the background
    view = await asyncio.to_thread(runtime.tracer.load_trace, failed.trace_id)
    assert view.outcome == "failed" and view.error["kind"] == "DatasetChanged"
    (phase,) = view.phases[:1]
    assert phase.name == "prepare_inputs" and not phase.ok
    assert (await runtime._run(runtime.store.find_turn_by_trace, failed.trace_id)) is not None
    await runtime.clear_dataset(sid)

    # cancelled mid-cell by id
    lms.root = scripted_lm(
        [action("import time\nprint('sleeping', flush=True)\ntime.sleep(60)"), submit("'x'")]
    )
    events: list[Any] = []
    task = asyncio.create_task(
        runtime.run_turn(TurnRequest(session_id=sid, task="sleep"), on_event=events.append)
    )
    for _ in range(300):
        if any(e.kind == "code_cell" and e.payload.get("phase") == "task" for e in events):
            break
        await asyncio.sleep(0.05)
    turn_id = events[0].turn_id
    assert await runtime.cancel_turn(turn_id)
    cancelled = await task
    assert cancelled.status == "cancelled" and cancelled.trace_id
    assert events[-1].kind == "turn_cancelled"
    assert events[-1].payload["traceId"] == cancelled.trace_id
    await runtime.traces.flush()  # queued in the commit; exported here or in the background
    view = await asyncio.to_thread(runtime.tracer.load_trace, cancelled.trace_id)
    assert view.outcome == "cancelled"
    assert view.root is not None
    task_cells = [c for c in view.root.cells if c.phase == "task"]
    assert [c.outcome for c in task_cells] == ["cancelled"]
    turn = await runtime._run(runtime.store.get_turn, cancelled.turn_id)
    assert turn.trace_id == cancelled.trace_id


async def test_record_replay_is_stored_in_the_commit_and_on_the_trace(
    traced_runtime: FleetRuntime, lms: SwitchableLms
) -> None:
    runtime = traced_runtime
    sid = (await runtime.new_session(mode="rlm")).session_id
    await runtime.write_file(sid, "files/sales.csv", SALES)
    lms.root = scripted_lm([submit("'ok'")])
    result = await runtime.run_turn(
        TurnRequest(session_id=sid, task="replay me", record_replay=True)
    )
    assert result.status == "completed", result.error
    digest, blob = await runtime._run(runtime.store.get_replay, result.turn_id)
    snapshot = decode_replay(blob, digest, turn_id=result.turn_id, session_id=sid)
    assert snapshot.task == "replay me" and snapshot.mode == "rlm"
    assert snapshot.file("files/sales.csv") == SALES
    assert any(p.startswith("skills/") for p in snapshot.files)  # synced Skills are inputs
    assert snapshot.configuration_digest == (await runtime.effective_config(sid)).digest()
    await runtime.traces.flush()  # queued in the commit; exported here or in the background
    view = await asyncio.to_thread(runtime.tracer.load_trace, result.trace_id)
    assert view.replay_sha256 == digest
    assert [p.name for p in view.phases] == ["prepare_inputs", "capture_replay", "commit"]
    # without recordReplay nothing is stored
    plain = await runtime.run_turn(TurnRequest(session_id=sid, task="no replay"))
    assert await runtime._run(runtime.store.get_replay, plain.turn_id) is None
