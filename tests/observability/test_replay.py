from __future__ import annotations

import gzip
import hashlib
from pathlib import Path

import pytest

from fleet_core.api import FleetRuntime
from fleet_core.config import EffectiveConfig
from fleet_core.observability.errors import ReplayCorrupt, ReplayRefused, ReplayTooLarge
from fleet_core.observability.redaction import Redactor
from fleet_core.observability.replay import (
    ReplayLimits,
    capture_replay,
    collect_workspace_files,
    decode_replay,
    encode_replay,
)
from fleet_core.store import TurnOutcome

from .conftest import CANARY, make_config


def _snapshot(config: EffectiveConfig, files: dict[str, bytes], **kw: object):
    return capture_replay(
        turn_id="t1",
        session_id="s1",
        task="Sum revenue",
        mode="hybrid",
        workspace_manifest="files/sales.csv (12 bytes)",
        files=files,
        configuration=config,
        memory_summary="note",
        session_history=[{"task": "earlier", "answer": "7"}],
        skills_catalog=[{"name": "csv"}],
        dataset_context={"path": "files/sales.csv"},
        redactor=Redactor.from_config(config),
        **kw,  # type: ignore[arg-type]
    )


def test_replay_round_trips_deterministically(tmp_path: Path) -> None:
    config = make_config(tmp_path)
    files = {"files/sales.csv": b"region,revenue\nN,42\n", "skills/csv/SKILL.md": "é".encode()}
    digest, blob = encode_replay(_snapshot(config, files))
    assert digest == hashlib.sha256(blob).hexdigest()
    assert blob[4:8] == b"\0\0\0\0"  # gzip mtime 0
    assert encode_replay(_snapshot(config, files)) == (digest, blob)  # deterministic
    snapshot = decode_replay(blob, digest, turn_id="t1", session_id="s1")
    assert snapshot.file("files/sales.csv") == files["files/sales.csv"]
    assert snapshot.configuration["runtime"]["execution_mode"] == "hybrid"
    assert snapshot.configuration_digest == config.digest()
    assert snapshot.versions["python"]


def test_tampered_replay_is_refused(tmp_path: Path) -> None:
    config = make_config(tmp_path)
    digest, blob = encode_replay(_snapshot(config, {"files/a.txt": b"1"}))
    with pytest.raises(ReplayCorrupt, match="tampered"):
        decode_replay(blob[:-1] + bytes([blob[-1] ^ 1]), digest)
    # re-signed but with a file whose bytes no longer match the digest map
    raw = gzip.decompress(blob).replace(b'"MQ=="', b'"Mg=="')
    forged = gzip.compress(raw, mtime=0)
    with pytest.raises(ReplayCorrupt, match="does not match its recorded sha256"):
        decode_replay(forged, hashlib.sha256(forged).hexdigest())
    with pytest.raises(ReplayCorrupt, match="belongs to Turn"):
        decode_replay(blob, digest, turn_id="other")


def test_bounds_and_secrets_fail_before_the_turn(tmp_path: Path) -> None:
    config = make_config(tmp_path, FLEET_LM_API_KEY=CANARY)
    with pytest.raises(ReplayTooLarge, match="limit is 10"):
        _snapshot(
            config, {"files/big.bin": b"x" * 11}, limits=ReplayLimits(max_file_bytes_total=10)
        )
    with pytest.raises(ReplayRefused, match=r"file name .* contains a configured secret"):
        _snapshot(config, {f"files/{CANARY}.txt": b"1"})
    with pytest.raises(ReplayRefused, match="contains a configured secret"):
        _snapshot(config, {"files/env.txt": f"KEY={CANARY}".encode()})
    snapshot = _snapshot(
        config,
        {"files/a.txt": b"1"},
    )
    assert CANARY not in snapshot.model_dump_json()


async def test_store_keeps_replay_inside_the_turn_commit(tmp_path: Path) -> None:
    config = make_config(tmp_path)
    runtime = await FleetRuntime.open(config)
    try:
        await runtime.new_session("replay-1")
        await runtime.write_file("replay-1", "files/sales.csv", b"region,revenue\nN,42\n")
        workspace = runtime.workspace("replay-1")
        files = collect_workspace_files(workspace)
        assert set(files) == {"files/sales.csv"}
        with pytest.raises(ReplayTooLarge):
            collect_workspace_files(workspace, limits=ReplayLimits(max_file_bytes_total=5))
        claim = runtime.store.claim_turn("replay-1", "Sum revenue", None)
        snapshot = capture_replay(
            turn_id=claim.turn_id,
            session_id="replay-1",
            task="Sum revenue",
            mode="hybrid",
            workspace_manifest=await runtime.manifest("replay-1"),
            files=files,
            configuration=await runtime.effective_config("replay-1"),
        )
        replay = encode_replay(snapshot)
        runtime.store.finish_turn(
            claim.turn_id, TurnOutcome(status="completed", result={}, answer="42", replay=replay)
        )
        stored = runtime.store.get_replay(claim.turn_id)
        assert stored == replay
        assert runtime.store.get_replay("missing") is None
        digest, blob = stored
        assert (
            decode_replay(blob, digest, turn_id=claim.turn_id)
            .file("files/sales.csv")
            .endswith(b"42\n")
        )
    finally:
        await runtime.close()
