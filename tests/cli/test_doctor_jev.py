"""``fleet-lsp doctor``'s Jev line, run as a user would: off without a key, on (the key accepted
by a local fake Jev), failing with a refused key or an unreachable endpoint; never the key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.cli.test_cli import run
from tests.fake_jev import KEY, fake_jev


def _jev_line(tmp_path: Path, env: dict[str, str]) -> tuple[dict[str, Any], str]:
    out = run(tmp_path, "doctor", "--json", env={"FLEET_MLFLOW_DESTINATION": "off", **env})
    report = json.loads(out.stdout)
    [line] = [c for c in report["checks"] if c["name"] == "jev"]
    return line, out.stdout + out.stderr


def test_doctor_says_jev_is_off_without_a_key(tmp_path: Path) -> None:
    line, _ = _jev_line(tmp_path, {})
    assert line["status"] == "ok" and line["detail"].startswith("off")


def test_doctor_checks_jev_with_a_key(tmp_path: Path) -> None:
    with fake_jev() as fake:
        env = {"FLEET_JEV_API_KEY": KEY, "FLEET_JEV_BASE_URL": fake.url}
        line, text = _jev_line(tmp_path, env)
        assert line["status"] == "ok", line
        assert line["detail"] == f"on: jev-latest at {fake.url} (key accepted)"
        assert [r["path"] for r in fake.requests] == ["/v1/models"]
        assert KEY not in text
        fake.mode = "401"
        line, text = _jev_line(tmp_path, env)
        assert line["status"] == "fail" and "refused the key (HTTP 401)" in line["detail"]
        assert "FLEET_JEV_API_KEY" in line["fix"] and KEY not in text
        url = fake.url
    line, text = _jev_line(tmp_path, {"FLEET_JEV_API_KEY": KEY, "FLEET_JEV_BASE_URL": url})
    assert line["status"] == "fail" and "is unreachable" in line["detail"] and KEY not in text


def test_doctor_refuses_a_plain_http_jev_endpoint_off_loopback(tmp_path: Path) -> None:
    env = {"FLEET_JEV_API_KEY": KEY, "FLEET_JEV_BASE_URL": "http://jev.example.com"}
    line, text = _jev_line(tmp_path, env)
    assert line["status"] == "fail" and "must use https" in line["detail"] and KEY not in text
