"""A Turn's rows in the store, on both databases: an idempotency key replays the stored outcome,
an outcome commits with its provenance and replay once, and history reads the facts of any stored
result (store/__init__.py)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from fleet_core.api import FleetRuntime
from fleet_core.errors import IdempotencyConflict
from fleet_core.models import HISTORY_ARTIFACT_PATHS, ProvenanceRecord
from fleet_core.store import TurnOutcome


async def test_idempotency_key_replays_the_stored_outcome(runtime: FleetRuntime) -> None:
    await runtime.new_session("idem")
    store = runtime.store
    claim = store.claim_turn("idem", "task one", "key-1")
    assert claim.replayed is None
    store.finish_turn(claim.turn_id, TurnOutcome(status="completed", result={"answer": "42"}))
    again = store.claim_turn("idem", "task one", "key-1")
    assert (again.turn_id, again.replayed) == (claim.turn_id, {"answer": "42"})
    with pytest.raises(IdempotencyConflict, match="already belongs to another task"):
        store.claim_turn("idem", "task two", "key-1")


async def test_turn_outcome_commits_provenance_and_replay_together(
    runtime: FleetRuntime,
) -> None:
    await runtime.new_session("commit")
    claim = runtime.store.claim_turn("commit", "delegate", None)
    await runtime.write_file("commit", "artifacts/child-1/out.csv", b"a\n")
    record = ProvenanceRecord(
        path="artifacts/child-1/out.csv",
        root_path="artifacts/child-1/out.csv",
        sha256="ab" * 32,
        size_bytes=2,
        agent_id="child-1",
        parent_chain=["root"],
    )
    outcome = TurnOutcome(
        status="completed",
        result={"answer": "done"},
        artifacts=[record],
        replay=("cd" * 32, b"\x1f\x8bsnapshot"),
    )
    runtime.store.finish_turn(claim.turn_id, outcome)
    [artifact] = await runtime.list_artifacts("commit")
    assert artifact.path == "artifacts/child-1/out.csv"
    assert artifact.provenance[0].agent_id == "child-1"
    assert artifact.provenance[0].turn_id == claim.turn_id
    # a committed outcome is never overwritten by a late failure path
    runtime.store.finish_turn(claim.turn_id, TurnOutcome(status="failed", result={}))
    assert (await runtime.history("commit"))[0].status == "completed"


async def test_history_bounds_artifact_paths_and_tolerates_old_results(
    runtime: FleetRuntime,
) -> None:
    await runtime.new_session("bounded")
    many = [{"path": f"artifacts/f{i:03}.txt"} for i in range(HISTORY_ARTIFACT_PATHS + 7)]
    outcomes = [
        # a result listing more artifacts than a summary carries, some already omitted
        {"durationSeconds": 2.5, "artifacts": many, "artifactsOmitted": 3},
        # a result stored before these fields, and one with odd shapes
        {"answer": "15"},
        {"durationSeconds": "slow", "artifacts": [{"path": 7}, "x", {"path": "artifacts/ok"}]},
    ]
    for result in outcomes:
        claim = runtime.store.claim_turn("bounded", "task", None)
        runtime.store.finish_turn(claim.turn_id, TurnOutcome(status="completed", result=result))
    big, old, odd = await runtime.history("bounded")
    assert big.duration_seconds == 2.5
    assert big.artifact_paths == [a["path"] for a in many[:HISTORY_ARTIFACT_PATHS]]
    assert big.artifacts_omitted == 3 + 7
    assert (old.duration_seconds, old.artifact_paths, old.artifacts_omitted) == (None, [], 0)
    assert (odd.duration_seconds, odd.artifact_paths) == (None, ["artifacts/ok"])


async def test_two_reviewers_labelling_one_new_trace_at_once_both_land(
    runtime: FleetRuntime,
) -> None:
    """Labels are one upsert: of 8 writers racing on each new trace, none fails and one of
    their labels is what stays (a lost insert race used to abort PostgreSQL's transaction)."""
    store = runtime.store

    def label(trace_id: str, writer: int) -> None:
        store.upsert_trace_labels(
            trace_id,
            session_id=None,
            turn_id=None,
            labels={"writer": writer},
            eligible=False,
            ineligible_reason="no replay",
        )

    for round_ in range(5):
        trace_id = f"tr-race-{round_}"
        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(label, [trace_id] * 8, range(8)))
        row = store.get_trace_labels(trace_id)
        assert row is not None and row["labels"]["writer"] in range(8)
    label("tr-race-0", 99)
    row = store.get_trace_labels("tr-race-0")
    assert row is not None and row["labels"] == {"writer": 99}
