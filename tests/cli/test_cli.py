"""The fleet-lsp command line, run as a user would (subprocesses, a private state dir)."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.lsp.conftest import SALES, write_script
from tests.lsp.test_turns import SCRIPT

QUICKSTART = "Calculate revenue by region and save artifacts/revenue_by_region.csv."


def run(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    # A user's shell: no Fleet settings, and none of the offline switches that importing
    # fleet_core set in this pytest process (the CLI must set them itself).
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("FLEET_", "DATABRICKS", "LITELLM_"))
        and k != "MLFLOW_DISABLE_TELEMETRY"
    }
    clean["FLEET_STATE_DIR"] = str(tmp_path / "state")
    clean["COLUMNS"] = "200"
    return subprocess.run(
        [sys.executable, "-m", "fleet_lsp", *args],
        cwd=tmp_path,
        env={**clean, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def ok(tmp_path: Path, env: dict[str, str], *args: str) -> str:
    """Run a command that must succeed; its stdout."""
    out = run(tmp_path, *args, env=env)
    assert out.returncode == 0, out.stderr
    return out.stdout


def rlm_answer(tmp_path: Path, env: dict[str, str], session: str, task: str) -> Any:
    """The answer of one ``fleet-lsp turn --mode rlm --json`` in ``session``."""
    args = ["turn", task, "-s", session, "--mode", "rlm", "--json"]
    return json.loads(ok(tmp_path, env, *args))["answer"]


def test_help_lists_commands(tmp_path: Path) -> None:
    out = run(tmp_path, "--help")
    assert out.returncode == 0
    for name in (
        "serve", "turn", "sessions", "artifacts", "trace", "config", "doctor", "demo", "eval",
        "mlflow",
    ):  # fmt: skip
        assert name in out.stdout


def test_config_show_names_sources_never_secrets(tmp_path: Path) -> None:
    env = {"FLEET_LM_API_KEY": "sk-very-secret", "FLEET_MAX_AGENT_DEPTH": "2"}
    out = run(tmp_path, "config", "show", "--json", env=env)
    assert out.returncode == 0, out.stderr
    data: dict[str, Any] = json.loads(out.stdout)
    assert data["settings"]["runtime.max_agent_depth"] == {"value": 2, "source": "env"}
    assert data["settings"]["runtime.max_rlm_iterations"]["source"] == "default"
    assert data["secrets"]["FLEET_LM_API_KEY"] == "set"
    assert data["secrets"]["FLEET_DATABASE_URL"] == "unset"
    assert len(data["digest"]) == 64
    table = run(tmp_path, "config", "show", env=env)
    assert "runtime.max_agent_depth" in table.stdout and "digest" in table.stdout
    assert "sk-very-secret" not in out.stdout + table.stdout + out.stderr + table.stderr


def test_tcp_refuses_non_loopback(tmp_path: Path) -> None:
    out = run(tmp_path, "serve", "--tcp", "0.0.0.0:2087")
    assert out.returncode == 2
    assert "FLEET_ALLOW_NON_LOOPBACK_BIND=true" in out.stderr
    bad = run(tmp_path, "serve", "--tcp", "nonsense")
    assert bad.returncode != 0 and "HOST:PORT" in bad.stderr


#: No model at all, whether or not the local-model extra is installed here.
NO_EMBEDDED = {"FLEET_LOCAL_MODEL__ENABLED": "false"}


def test_demo_without_model_says_what_to_set(tmp_path: Path) -> None:
    out = run(tmp_path, "demo", env=NO_EMBEDDED)
    assert out.returncode == 2
    for key in ("FLEET_LM_API_BASE", "FLEET_LM_MODEL", "FLEET_LM_API_KEY"):
        assert key in out.stderr


@pytest.fixture
def script_env(tmp_path: Path) -> dict[str, str]:
    return {"FLEET_TEST_SCRIPT": str(write_script(tmp_path / "script.json", SCRIPT))}


def test_turn_json_artifacts_and_trace(tmp_path: Path, script_env: dict[str, str]) -> None:
    out = run(
        tmp_path, "turn", QUICKSTART, "--session", "cli", "--attach", str(SALES),
        "--dataset", "files/sales.csv", "--json", env=script_env,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)  # --json prints the TurnResult alone
    assert result["status"] == "completed" and result["sessionId"] == "cli"
    sessions = run(tmp_path, "sessions", "--json")
    assert [s["sessionId"] for s in json.loads(sessions.stdout)] == ["cli"]
    saved = tmp_path / "out.csv"
    got = run(tmp_path, "artifacts", "get", "cli", "artifacts/revenue_by_region.csv", str(saved))
    assert got.returncode == 0, got.stderr
    assert {r["region"] for r in csv.DictReader(saved.open())} == {"North", "South", "East", "West"}
    trace = run(tmp_path, "trace", "show", result["turnId"], "--raw")
    assert trace.returncode == 0, trace.stderr
    assert trace.stdout.startswith(f"# Turn trace `{result['traceId']}`")  # from MLflow
    assert "Calculate revenue by region" in trace.stdout
    assert "revenue_by_region.csv" in trace.stdout and "Child agent" in trace.stdout
    missing = run(tmp_path, "trace", "show", "nope")
    assert missing.returncode == 1 and "TraceNotFound" in missing.stderr


def test_demo_runs_the_quickstart_over_the_protocol(
    tmp_path: Path, script_env: dict[str, str]
) -> None:
    out = run(tmp_path, "demo", env=script_env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "completed" in out.stdout
    saved = tmp_path / "revenue_by_region.csv"
    assert saved.is_file()
    assert "fleet-lsp trace show" in out.stdout
    assert "fleet:/sessions/demo-" in out.stdout


HEAVY = ("mlflow", "dspy", "pygls", "sqlalchemy", "pandas")


@pytest.mark.parametrize("args", [["--help"], ["config", "show", "--json"], ["eval", "--help"]])
def test_fast_commands_import_no_heavy_library(tmp_path: Path, args: list[str]) -> None:
    """``--help`` and ``config show`` stay under a second by importing none of the heavy
    libraries (MLflow alone takes about 6 s here); eval/mlflow commands load them lazily."""
    probe = (
        "import sys\n"
        "from fleet_lsp.cli import main\n"
        "try:\n"
        f"    main({args!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        f"print('HEAVY', sorted(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEET_")}
    env["FLEET_STATE_DIR"] = str(tmp_path / "state")
    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "HEAVY []" in out.stderr, out.stderr


# ---------------------------------------------------------------------------------------------
# issue 9: text from a user, a model, a file or an error reaches the terminal as written
# ---------------------------------------------------------------------------------------------

MARKUP = "[bold]x[/bold] [[x:y]]"
#: Every scripted call gets this reply: triage reads its route, an RLM step its code (which
#: submits the answer), a direct answer its answer.
MARKUP_REPLY = {
    "fields": {
        "reasoning": "ok",
        "route": "rlm",
        "code": f"```python\nSUBMIT(answer={'Answer ' + MARKUP!r}, learned_skill_note='')\n```",
        "answer": f"Answer {MARKUP}",
    }
}
MARKUP_SCRIPT = {"rules": {"": MARKUP_REPLY}}
#: What DSPy, LiteLLM or MLflow print when they reach for the network or complain.
NOISE = ("warning", "urlerror", "litellm", "model metadata", "cost map", "telemetry")


def assert_no_library_noise(out: subprocess.CompletedProcess[str]) -> None:
    for stream in (out.stdout, out.stderr):
        found = [word for word in NOISE if word in stream.lower()]
        assert not found, f"{found} in:\n{stream[-3000:]}"


def test_demo_hint_names_the_llm_table(tmp_path: Path) -> None:
    out = run(tmp_path, "demo", env=NO_EMBEDDED)
    assert out.returncode == 2
    assert "(or [llm] model/api_base in config/fleet.toml" in " ".join(out.stderr.split())


def test_markup_in_tasks_answers_paths_and_errors_is_printed_literally(tmp_path: Path) -> None:
    script = {"FLEET_TEST_SCRIPT": str(write_script(tmp_path / "markup.json", MARKUP_SCRIPT))}
    source = tmp_path / "in" / "[bold]q[[x:y]].csv"
    source.parent.mkdir()
    source.write_text("a,b\n1,2\n")
    out = run(
        tmp_path, "turn", f"Echo {MARKUP}", "--session", "mk", "--attach", str(source),
        "--dataset", "files/[bold]q[[x:y]].csv", env=script,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"Answer {MARKUP}" in out.stdout  # the model's answer
    assert "files/[bold]q[[x:y]].csv" in out.stderr  # "attached ..."
    assert_no_library_noise(out)  # scripted models, default logging: nothing but the Turn
    listed = run(tmp_path, "sessions")
    assert listed.returncode == 0, listed.stderr
    assert "files/[bold]q[[x:y]].csv" in listed.stdout  # a file name in a table
    missing = run(tmp_path, "artifacts", "get", "mk", f"artifacts/{MARKUP}.csv")
    assert missing.returncode == 1
    assert f"artifacts/{MARKUP}.csv" in missing.stderr  # an error naming user text


def test_config_show_prints_values_literally(tmp_path: Path) -> None:
    out = run(tmp_path, "config", "show", env={"FLEET_MLFLOW__EXPERIMENT_NAME": MARKUP})
    assert out.returncode == 0, out.stderr
    assert MARKUP in out.stdout
    bad = run(tmp_path, "config", "show", env={"FLEET_EXECUTION_MODE": MARKUP})
    assert bad.returncode == 1 and MARKUP in bad.stderr


def test_demo_prints_the_answer_literally(tmp_path: Path) -> None:
    script = {"FLEET_TEST_SCRIPT": str(write_script(tmp_path / "markup.json", MARKUP_SCRIPT))}
    out = run(tmp_path, "demo", env=script)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"Answer {MARKUP}" in out.stdout


# ---------------------------------------------------------------------------------------------
# issue 9: a Turn through the configured model endpoint prints no library warning
# ---------------------------------------------------------------------------------------------


def test_turn_through_the_configured_endpoint_prints_no_library_noise(tmp_path: Path) -> None:
    """The real model path (lm15 over HTTP, cost estimation from DSPy's model metadata) at the
    default logging level: no "Model metadata refresh failed (URLError)", no LiteLLM cost-map
    fetch, on stdout or stderr."""
    from tests.cli.fake_models import model_env, scripted_models

    with scripted_models() as server:
        out = run(tmp_path, "turn", "What is six times seven?", "--session", "net",
                  env=model_env(server))  # fmt: skip
        calls = server.calls
    assert out.returncode == 0, out.stdout + out.stderr
    assert calls == 3 and "42" in out.stdout
    assert_no_library_noise(out)


def test_mlflow_ui_server_starts_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``python -m mlflow ui`` imports LiteLLM, which would download its cost map (seconds of
    retries offline): the child gets the offline switches even if this process lost them."""
    from fleet_lsp.cli import mlflow_ui

    seen: dict[str, Any] = {}

    class FakePopen:
        def __init__(self, command: list[str], env: dict[str, str] | None = None) -> None:
            seen.update(command=command, env=env)

        def wait(self, timeout: float | None = None) -> int:
            return 0

    for name in [n for n in os.environ if n.startswith("FLEET_")]:
        monkeypatch.delenv(name)
    for name in ("LITELLM_LOCAL_MODEL_COST_MAP", "MLFLOW_DISABLE_TELEMETRY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("FLEET_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(mlflow_ui.subprocess, "Popen", FakePopen)
    assert mlflow_ui.ui_command("127.0.0.1", 5999) == 0
    assert seen["command"][1:4] == ["-m", "mlflow", "ui"]
    assert seen["env"]["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
    assert seen["env"]["MLFLOW_DISABLE_TELEMETRY"] == "true"
