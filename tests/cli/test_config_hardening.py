"""Configuration mistakes a user meets at the command line: one line each, and a fix that helps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_cli import run


def test_deeply_nested_toml_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.mkdir()
    nested = "[" * 5000 + "]" * 5000
    (config / "fleet.toml").write_text(f"[config]\nschema_version = 1\nx = {nested}\n")
    out = run(tmp_path, "config", "show")
    assert out.returncode == 1
    assert out.stderr.count("\n") == 1, out.stderr[-2000:]
    assert "configuration error:" in out.stderr and "nested too deeply" in out.stderr
    assert "Traceback" not in out.stderr and "RecursionError" not in out.stderr
    doctor = run(tmp_path, "doctor", "--json")
    (check,) = json.loads(doctor.stdout)["checks"]
    assert check["status"] == "fail" and "nested too deeply" in check["detail"]


@pytest.mark.parametrize("value", ["/", "/etc", "/usr"])
def test_a_system_state_directory_is_refused_in_one_line(tmp_path: Path, value: str) -> None:
    out = run(tmp_path, "config", "show", env={"FLEET_STATE_DIR": value})
    assert out.returncode == 1
    assert out.stderr.count("\n") == 1, out.stderr
    assert f"FLEET_STATE_DIR is {value}" in out.stderr
    assert not Path(value, "fleet.db").exists() and not Path(value, "workspaces").exists()


def test_doctor_says_how_to_recover_a_damaged_database(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    database = state / "fleet.db"
    database.write_bytes(b"this is not a database, just garbage " * 200)
    env = {"FLEET_MLFLOW_DESTINATION": "off"}
    out = run(tmp_path, "doctor", "--json", env=env, timeout=180)
    checks = {c["name"]: c for c in json.loads(out.stdout)["checks"]}
    found = checks["database"]
    assert found["status"] == "fail"
    assert "not a database" in found["detail"] and str(database) in found["detail"]
    assert "writable" not in found["fix"]
    assert f"mv {database} {database}.broken" in found["fix"]
    assert "backup" in found["fix"]
    assert database.read_bytes().startswith(b"this is not a database")  # doctor changed nothing
