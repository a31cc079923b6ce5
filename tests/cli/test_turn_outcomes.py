"""What a script and a terminal see of a Turn (issue 19): a Turn that did not complete exits
non-zero with one line saying what failed and what to do, never a traceback at the default log
level; outside text never reaches the terminal as controls (C0, C1, bidi overrides)."""

from __future__ import annotations

import json
import socket
from typing import Any

from tests.cli.fake_models import model_env, scripted_models
from tests.cli.test_cli import run
from tests.fake_http import JsonHandler, serving
from tests.lsp.conftest import write_script

HOSTILE = "ok \x1b]52;c;cGF5bG9hZA==\x07 \x9b2J \x9d0;title\x9c \u202egnp.exe \u2066x\u2069"
HOSTILE_REPLY = {
    "fields": {
        "reasoning": "ok",
        "route": "rlm",
        "code": f"```python\nSUBMIT(answer={HOSTILE!r}, learned_skill_note='')\n```",
        "answer": HOSTILE,
    }
}
CONTROLS = ("\x1b]", "\x07", "\x9b", "\x9d", "\x9c", "\u202e", "\u2066", "\u2069")


class Refusing(JsonHandler):
    """An endpoint that answers every request 401, like a revoked key."""

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length", "0"))
        self.rfile.read(length)
        self.send_json({"error": {"message": "Invalid API key", "code": "invalid_api_key"}}, 401)

    do_GET = do_POST


def _refusing_env(server: Any) -> dict[str, str]:
    return {
        "FLEET_LM_API_BASE": f"http://127.0.0.1:{server.server_port}/v1",
        "FLEET_LM_MODEL": "scripted-model",
        "FLEET_LM_API_KEY": "sk-refused-key-0000",
        "FLEET_LLM__NUM_RETRIES": "0",
    }


def test_a_turn_refused_by_the_endpoint_exits_1_with_one_line_and_no_traceback(tmp_path):
    with serving(Refusing) as server:
        for args in ([], ["--json"]):
            out = run(tmp_path, "turn", "hi", "-s", "auth", *args, env=_refusing_env(server))
            assert out.returncode == 1, out.stdout + out.stderr
            assert "Traceback" not in out.stderr and "Traceback" not in out.stdout
            errors = [line for line in out.stderr.splitlines() if line.startswith("error")]
            assert len(errors) == 1, out.stderr
            assert (
                "Invalid API key" in errors[0]
                and "fix: check the model endpoint's key" in (errors[0])
            )
            assert "fleet-lsp trace show tr-" in errors[0]
            assert "sk-refused-key-0000" not in out.stderr + out.stdout
        assert json.loads(out.stdout)["status"] == "failed"  # --json still prints the result


def test_the_traceback_is_kept_for_debug_logging(tmp_path):
    with serving(Refusing) as server:
        env = {**_refusing_env(server), "FLEET_LOG_LEVEL": "DEBUG"}
        out = run(tmp_path, "turn", "hi", "-s", "auth", env=env)
    assert out.returncode == 1
    assert "Traceback" in out.stderr and "sk-refused-key-0000" not in out.stderr


def test_an_endpoint_gone_mid_turn_exits_1(tmp_path):
    with scripted_models(replies=[]) as server:  # only fallbacks: the RLM never submits
        env = model_env(server)
    # a port bound but never listening refuses every connection (the closed server's own port
    # was once taken by another test's endpoint in the meantime, which answered 401)
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        port = held.getsockname()[1]
        env["FLEET_LM_API_BASE"] = f"http://127.0.0.1:{port}/v1"
        out = run(tmp_path, "turn", "hi", "-s", "gone", env=env)  # the endpoint is gone
    assert out.returncode == 1, out.stdout + out.stderr
    assert "Traceback" not in out.stderr
    assert "fix: check that the model endpoint answers" in out.stderr


def test_a_completed_turn_exits_0(tmp_path):
    with scripted_models() as server:
        out = run(tmp_path, "turn", "What is six times seven?", "-s", "ok", env=model_env(server))
    assert out.returncode == 0, out.stderr


def test_controls_in_answers_are_made_visible_on_the_terminal(tmp_path):
    script = {
        "FLEET_TEST_SCRIPT": str(write_script(tmp_path / "s.json", {"rules": {"": HOSTILE_REPLY}}))
    }
    out = run(tmp_path, "turn", "Echo \x9b6n", "-s", "ctl", env=script)
    assert out.returncode == 0, out.stdout + out.stderr
    for stream in (out.stdout, out.stderr):
        assert not [c for c in CONTROLS if c in stream], repr(stream[-500:])
    assert "\\x9b2J" in out.stdout and "<U+202E>gnp.exe" in out.stdout
    trace = run(
        tmp_path,
        "trace",
        "show",
        "--raw",
        json.loads(run(tmp_path, "turn", "again", "-s", "ctl", "--json", env=script).stdout)[
            "turnId"
        ],
    )
    assert trace.returncode == 0, trace.stderr
    assert not [c for c in CONTROLS if c in trace.stdout]


def test_a_turn_that_completed_with_errors_exits_3_and_says_so(tmp_path):
    """A failed cell behind the answer: the terminal shows "completed with errors", stderr has
    one line with the outcome and why, and the exit code is 3 (not a clean 0)."""
    script = {
        "replies": [
            {"route": "rlm"},
            {"action": "1 / 0"},
            {"action": "x = 42\nprint(x)"},
            {"submit": "str(x)"},
        ]
    }
    env = {"FLEET_TEST_SCRIPT": str(write_script(tmp_path / "p.json", script))}
    out = run(tmp_path, "turn", "compute it", "-s", "partial", "--mode", "rlm", env=env)
    assert out.returncode == 3, out.stdout + out.stderr
    assert "completed with errors" in out.stdout
    [line] = [ln for ln in out.stderr.splitlines() if ln.startswith("completed with errors")]
    assert line.startswith("completed with errors (partial): 1 sandbox cell failed")
    assert "fleet-lsp trace show" in line and "Traceback" not in out.stderr
    again = run(
        tmp_path, "turn", "compute it", "-s", "partial2", "--mode", "rlm", "--json", env=env
    )
    assert again.returncode == 3
    assert json.loads(again.stdout)["outcome"]["kind"] == "partial"
