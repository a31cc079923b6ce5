"""``fleet-lsp doctor`` contacts Daytona (the fake Daytona server, tests/sandbox/daytona_fake.py):
an authenticated API call with the configured key, then the snapshot's existence and state; a
refused key, a missing snapshot and a dead address each fail with what to fix."""

from __future__ import annotations

import socket
from pathlib import Path

from daytona_fake import FakeDaytona
from daytona_testing import FAKE_KEY, SNAPSHOT

from fleet_core.config import load_config
from fleet_lsp.cli.doctor import check_sandbox


def _check(tmp_path: Path, api_url: str, snapshot: str = SNAPSHOT, key: str = FAKE_KEY) -> object:
    environ = {
        "FLEET_STATE_DIR": str(tmp_path / "state"),
        "FLEET_SANDBOX_BACKEND": "daytona",
        "FLEET_DAYTONA_API_URL": api_url,
        "FLEET_DAYTONA_API_KEY": key,
    }
    config = load_config({"sandbox": {"daytona_snapshot": snapshot}}, environ=environ, cwd=tmp_path)
    return check_sandbox(config)


def test_doctor_calls_daytona_with_the_key_and_finds_the_snapshot(
    daytona_fake: FakeDaytona, tmp_path: Path
) -> None:
    daytona_fake.auth_header = None
    listed = daytona_fake.calls["list"]
    check = _check(tmp_path, daytona_fake.url)
    assert check.status == "ok", check  # type: ignore[attr-defined]
    assert SNAPSHOT in check.detail and "key accepted" in check.detail  # type: ignore[attr-defined]
    assert daytona_fake.auth_header == f"Bearer {FAKE_KEY}"  # the API call was authenticated
    assert daytona_fake.calls["list"] == listed + 1
    assert FAKE_KEY not in repr(check)


def test_doctor_fails_a_refused_key_a_missing_snapshot_and_a_dead_address(
    daytona_fake: FakeDaytona, tmp_path: Path
) -> None:
    daytona_fake.fail_next("list", 401)
    refused = _check(tmp_path, daytona_fake.url)
    assert refused.status == "fail" and "refused the key" in refused.detail  # type: ignore[attr-defined]
    missing = _check(tmp_path, daytona_fake.url, snapshot="no-such-snapshot")
    assert missing.status == "fail"  # type: ignore[attr-defined]
    assert "'no-such-snapshot' does not exist" in missing.detail  # type: ignore[attr-defined]
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}/api"
    down = _check(tmp_path, dead)
    assert down.status == "fail" and "unreachable" in down.detail  # type: ignore[attr-defined]
    for check in (refused, missing, down):
        assert FAKE_KEY not in repr(check)
