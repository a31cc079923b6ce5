"""Delegation: concurrent children in fresh child sandboxes, promotion with provenance, failures."""

from __future__ import annotations

from pathlib import Path

from fleet_core.engine.scripted_lm import action, scripted_lm, submit
from fleet_core.models import TurnRequest

SALES = "region,revenue\nnorth,100\nsouth,250\nnorth,50\n"


def _child(region: str) -> list[str]:
    return [
        action(
            "import csv\n"
            "rows = list(csv.DictReader(open('files/sales.csv')))\n"
            f"rows = [r for r in rows if r['region'] == '{region}']\n"
            "total = sum(float(r['revenue']) for r in rows)\n"
            f"open('artifacts/{region}.txt', 'w').write(str(total))\n"
            "print(total)"
        ),
        action(f"SUBMIT(findings='{region}=' + str(total))", "Submit."),
    ]


async def test_two_concurrent_children_promote_artifacts_with_provenance(
    engine_runtime, lms, tmp_path: Path
) -> None:
    runtime = engine_runtime
    await runtime.new_session("d", mode="rlm")
    source = tmp_path / "sales.csv"
    source.write_text(SALES)
    await runtime.attach("d", source)
    lms.root = scripted_lm(
        [
            action(
                "results = spawn_agents(subtasks=['REGION=north total', 'REGION=south total'], "
                "input_paths=[['files/sales.csv'], ['files/sales.csv']])\n"
                "print(results)"
            ),
            submit("'; '.join(r['findings'] for r in results)"),
        ]
    )
    lms.sub = scripted_lm(
        rules={"REGION=north": _child("north"), "REGION=south": _child("south")},
        latency=0.3,
    )
    events = []
    result = await runtime.run_turn(
        TurnRequest(session_id="d", task="Revenue per region, one child each"),
        on_event=events.append,
    )
    assert result.status == "completed", result.error
    assert result.answer == "north=150.0; south=250.0"
    spawned = [e for e in events if e.kind == "child_spawned"]
    finished = [e for e in events if e.kind == "child_finished"]
    assert len(spawned) == 2 and len(finished) == 2
    # both children were running before either finished: they ran concurrently
    assert max(e.seq for e in spawned) < min(e.seq for e in finished)
    assert {e.parent_agent_id for e in spawned} == {"root"}
    children = {e.agent_id for e in spawned}
    assert all(e.data.status == "succeeded" for e in finished)
    # child code ran in child sandboxes (their own cell events)
    assert {e.agent_id for e in events if e.kind == "code_cell"} >= children | {"root"}

    artifacts = {a.path: a for a in result.artifacts}
    assert len(artifacts) == 2
    for ref in artifacts.values():
        assert ref.agent_id in children
        assert ref.path == f"artifacts/{ref.agent_id}/{ref.path.rsplit('/', 1)[1]}"
        [record] = ref.provenance
        assert record.sha256 == ref.sha256 and record.turn_id == result.turn_id
    stored = {a.path: a for a in await runtime.list_artifacts("d")}
    north = next(p for p in stored if p.endswith("/north.txt"))
    assert (await runtime.read_file("d", north)) == b"150.0"
    assert stored[north].provenance[0].agent_id in children
    assert result.usage.calls_by_category["child"] == 4


async def test_child_failure_is_returned_as_data(engine_runtime, lms) -> None:
    runtime = engine_runtime
    await runtime.new_session("f", mode="rlm")
    lms.root = scripted_lm(
        [
            action("r = spawn_agent(subtask='BROKEN child')\nprint(r)"),
            submit("'error' if r.get('error') else 'no error'"),
        ]
    )
    lms.sub = scripted_lm(rules={"BROKEN child": "this reply has no fields at all"})
    events = []
    result = await runtime.run_turn(
        TurnRequest(session_id="f", task="delegate something"), on_event=events.append
    )
    assert result.status == "completed", result.error
    assert result.answer == "error"
    finished = next(e for e in events if e.kind == "child_finished")
    assert finished.data.status == "failed"
    assert "child agent failed" in finished.data.error
    assert result.artifacts == []


async def test_spawn_over_capacity_is_refused_not_queued(open_runtime, lms) -> None:
    runtime = await open_runtime(FLEET_MAX_CHILD_SANDBOXES="1")
    await runtime.new_session("c", mode="rlm")
    lms.root = scripted_lm(
        [
            action(
                "try:\n    spawn_agents(subtasks=['a', 'b'])\n"
                "except Exception as e:\n    err = str(e)\nprint(err)"
            ),
            submit("err"),
        ]
    )
    result = await runtime.run_turn(TurnRequest(session_id="c", task="too many children"))
    assert result.status == "completed", result.error
    assert "capacity exhausted" in result.answer
