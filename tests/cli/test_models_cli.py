"""``fleet-lsp models`` and ``fleet-lsp session set-models``, run as a user would: the list from a
local fake endpoint, one-line errors (exit 2) when it is unconfigured or offline, and a Session's
selection (SQLite and PostgreSQL) reported by ``config show --session`` with source ``session``
and used by the next ``fleet-lsp turn`` (each command is a new process: a restart every time)."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_cli import run
from tests.fake_http import JsonHandler, serving
from tests.lsp.conftest import write_script

KEY = "sk-cli-models-0123456789abcdef0123456789"
SCRIPT: dict[str, Any] = {"root": {"rules": {"MODELQ": {"submitModel": True}}}}


class Endpoint(JsonHandler):
    def do_GET(self) -> None:
        if self.headers.get("Authorization") != f"Bearer {KEY}":
            self.send_json({"error": "unauthorized"}, 401)
            return
        self.send_json({"data": [{"id": "[bold]m2[/bold]"}, {"id": "m1", "owned_by": "lab"}]})


def _dead_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_models_lists_the_endpoint_and_fails_in_one_line(tmp_path: Path) -> None:
    with serving(Endpoint) as endpoint:
        base = f"http://127.0.0.1:{endpoint.server_address[1]}/v1"
        env = {"FLEET_LM_API_BASE": base, "FLEET_LM_API_KEY": KEY}
        out = run(tmp_path, "models", "--json", env=env)
        assert out.returncode == 0, out.stderr
        listed = json.loads(out.stdout)
        assert listed["models"] == [
            {"id": "[bold]m2[/bold]", "ownedBy": None},
            {"id": "m1", "ownedBy": "lab"},
        ]
        assert listed["cached"] is False and listed["fetchedAt"]
        table = run(tmp_path, "models", "--refresh", env=env)
        assert table.returncode == 0, table.stderr
        assert "[bold]m2[/bold]" in table.stdout and "lab" in table.stdout  # printed literally
        wrong_key = run(tmp_path, "models", env={**env, "FLEET_LM_API_KEY": "sk-wrong"})
        assert wrong_key.returncode == 2
        assert "HTTP 401 (check the API key)" in wrong_key.stderr

    unconfigured = run(tmp_path, "models")
    assert unconfigured.returncode == 2
    assert unconfigured.stderr.count("\n") == 1
    assert "No model endpoint is configured" in unconfigured.stderr
    assert "FLEET_LM_API_BASE" in unconfigured.stderr

    offline_env = {
        "FLEET_LM_API_BASE": f"http://127.0.0.1:{_dead_port()}/v1",
        "FLEET_LM_API_KEY": KEY,
    }
    offline = run(tmp_path, "models", env=offline_env)
    assert offline.returncode == 2
    assert offline.stderr.count("\n") == 1
    assert "error (ModelUnavailable)" in offline.stderr and "127.0.0.1" in offline.stderr
    assert "unreachable" in offline.stderr and KEY not in offline.stderr + offline.stdout


@pytest.fixture
def env(fleet_environ: dict[str, str], tmp_path: Path) -> dict[str, str]:
    script = write_script(tmp_path / "models-script.json", SCRIPT)
    return {**fleet_environ, "FLEET_TEST_SCRIPT": str(script), "FLEET_LM_API_KEY": KEY}


def _answer(tmp_path: Path, env: dict[str, str]) -> str:
    out = run(tmp_path, "turn", "MODELQ which?", "-s", "c", "--mode", "rlm", "--json", env=env)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["status"] == "completed", result
    return str(result["answer"])


def test_a_sessions_models_are_set_shown_with_source_session_and_used(
    tmp_path: Path, env: dict[str, str]
) -> None:
    assert _answer(tmp_path, env) == "openai/scripted"  # creates Session c, no selection yet
    args = ["session", "set-models", "c", "--root", "gpt-x-large", "--sub", "gpt-x-small"]
    out = run(tmp_path, *args, "--json", env=env)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"sessionId": "c", "root": "gpt-x-large", "sub": "gpt-x-small"}

    shown = run(tmp_path, "config", "show", "--session", "c", "--json", env=env)
    assert shown.returncode == 0, shown.stderr
    settings = json.loads(shown.stdout)["settings"]
    assert settings["llm.root.model"] == {"value": "gpt-x-large", "source": "session"}
    assert settings["llm.sub.model"] == {"value": "gpt-x-small", "source": "session"}
    plain = json.loads(run(tmp_path, "config", "show", "--json", env=env).stdout)["settings"]
    assert plain["llm.root.model"] == {"value": None, "source": "default"}

    assert _answer(tmp_path, env) == "openai/gpt-x-large"  # a new process uses the selection

    refused = run(tmp_path, "session", "set-models", "c", "--root", "https://x.example/v1", env=env)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    assert "endpoint URL" in refused.stderr and "x.example" not in refused.stderr
    key_like = run(tmp_path, "session", "set-models", "c", "--sub", KEY, env=env)
    assert key_like.returncode == 2 and "API key" in key_like.stderr
    assert KEY not in key_like.stderr
    missing = run(tmp_path, "session", "set-models", "nope", "--root", "m1", env=env)
    assert missing.returncode == 1 and "SessionNotFound" in missing.stderr

    cleared = run(tmp_path, "session", "set-models", "c", env=env)
    assert cleared.returncode == 0, cleared.stderr
    assert "root: (the configuration's)" in cleared.stdout
    assert _answer(tmp_path, env) == "openai/scripted"
