"""``fleet-lsp eval``, ``trace show`` after a restart, ``mlflow ui``, ``doctor`` and the bundled
example, run as a user would (subprocesses, a private state dir, a real local MLflow store)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleet_core.engine.scripted_lm import action, fields, route, submit
from tests.cli.test_cli import run
from tests.fake_http import JsonHandler, serving
from tests.lsp.conftest import REPO, write_script

TASK = "ANSWER42: compute six times seven in the sandbox."
LATE_CODE = (
    "import csv\n"
    "rows = list(csv.DictReader(open('files/shipments_1.csv')))\n"
    "late = sum(1 for r in rows if int(r['delivered_days']) > int(r['promised_days']))\n"
    "print(late)"
)
SCRIPT = {
    "root": {
        "rules": {
            "ANSWER42": [action("x = 6 * 7\nprint(x)"), submit("f'The answer is {x}.'")],
            "late when delivered_days": [action(LATE_CODE), submit("f'{late} shipments are late'")],
            "17 multiplied by 23": fields(reasoning="Arithmetic.", answer="17 × 23 = 391"),
        }
    },
    "sub": {
        "rules": {
            "ANSWER42": route("rlm"),
            "late when delivered_days": route("rlm"),
            "17 multiplied by 23": route("direct"),
        }
    },
    "judge": {"rules": {"": {"verdict": True, "critique": "The numbers agree."}}},
}


@pytest.fixture
def script_env(tmp_path: Path) -> dict[str, str]:
    return {"FLEET_TEST_SCRIPT": str(write_script(tmp_path / "script.json", SCRIPT))}


def one_line_error(out: subprocess.CompletedProcess[str], kind: str) -> str:
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith(f"error ({kind}): "), lines[0]
    return lines[0]


def test_eval_label_partial_updates_and_trace_show_after_restart(
    tmp_path: Path, script_env: dict[str, str]
) -> None:
    turn = run(tmp_path, "turn", TASK, "--session", "lbl", "--json", env=script_env)
    assert turn.returncode == 0, turn.stderr
    result = json.loads(turn.stdout)
    trace_id = result["traceId"]
    assert trace_id.startswith("tr-")

    first = run(
        tmp_path, "eval", "label", trace_id, "--answer", "The answer is 42.", "--value", "42",
        "--route", "rlm", "--critical", "--group", "arith",
    )  # fmt: skip
    assert first.returncode == 0, first.stderr
    assert f"labelled {trace_id}" in first.stdout
    assert "status approved · group arith · route rlm · critical yes" in first.stdout
    assert "not eligible" in first.stdout  # no replay was recorded

    # partial update by Turn id: only the status changes
    second = run(tmp_path, "eval", "label", result["turnId"], "--status", "benchmark", "--json")
    assert second.returncode == 0, second.stderr
    wire = json.loads(second.stdout)
    assert wire["traceId"] == trace_id and wire["turnId"] == result["turnId"]
    assert wire["labels"] == {
        "status": "benchmark",
        "answer": "The answer is 42.",
        "values": ["42"],
        "route": "rlm",
        "critical": True,
        "group": "arith",
        "expectations": None,
        "reviewer": "human",
    }

    expectations = tmp_path / "expect.json"
    expectations.write_text(
        json.dumps(
            {
                "schema_version": 1,
                "artifacts": [{"path": "artifacts/x.txt", "kind": "text", "expected": "42"}],
            }
        )
    )
    third = run(
        tmp_path, "eval", "label", trace_id, "--expectations-file", str(expectations),
        "--value", "42", "--value", "six", "--not-critical", "--json",
    )  # fmt: skip
    assert third.returncode == 0, third.stderr
    labels = json.loads(third.stdout)["labels"]
    assert labels["values"] == ["42", "six"] and labels["critical"] is False
    assert labels["expectations"]["artifacts"][0]["path"] == "artifacts/x.txt"
    assert labels["status"] == "benchmark" and labels["answer"] == "The answer is 42."

    # one-line errors with exit codes: 2 = fix the input, 1 = not found
    bad_route = run(tmp_path, "eval", "label", trace_id, "--route", "fast")
    assert bad_route.returncode == 2 and "'route' must be one of" in one_line_error(
        bad_route, "InvalidInput"
    )
    expectations.write_text(json.dumps({"schema_version": 1, "artifacts": [{"path": "/etc/x"}]}))
    bad_file = run(tmp_path, "eval", "label", trace_id, "--expectations-file", str(expectations))
    assert bad_file.returncode == 2
    assert "Structured expectations" in one_line_error(bad_file, "LabelInvalid")
    nothing = run(tmp_path, "eval", "label", trace_id)
    assert nothing.returncode == 2 and "at least one label" in one_line_error(
        nothing, "InvalidInput"
    )
    missing = run(tmp_path, "eval", "label", "tr-" + "0" * 32, "--answer", "x")
    assert missing.returncode == 1 and "No trace" in one_line_error(missing, "TraceNotFound")

    # trace show in a new process renders the stored MLflow trace, labels included
    shown = run(tmp_path, "trace", "show", trace_id, "--raw")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith(f"# Turn trace `{trace_id}`")
    assert "| Route | rlm |" in shown.stdout and "Cell 1 — **ok**" in shown.stdout
    assert "The answer is 42." in shown.stdout
    assert '"review_status": "benchmark"' in shown.stdout and '"critical": false' in shown.stdout
    by_turn = run(tmp_path, "trace", "show", result["turnId"], "--raw")
    assert by_turn.stdout == shown.stdout


def test_trace_show_without_tracing_says_why(tmp_path: Path, script_env: dict[str, str]) -> None:
    env = script_env | {"FLEET_MLFLOW_DESTINATION": "off"}
    turn = run(tmp_path, "turn", TASK, "--session", "off", "--json", env=env)
    assert turn.returncode == 0, turn.stderr
    turn_id = json.loads(turn.stdout)["turnId"]
    shown = run(tmp_path, "trace", "show", turn_id, "--raw", env=env)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("> **Note:** This Turn has no MLflow trace")
    label = run(tmp_path, "eval", "label", turn_id, "--answer", "42", env=env)
    assert label.returncode == 1 and "no MLflow trace" in one_line_error(label, "TraceNotFound")


def test_eval_dataset_is_seeded(tmp_path: Path) -> None:
    from fleet_core.evaluation.datasets import build_dataset, read_dataset

    out = run(tmp_path, "eval", "dataset", "--seed", "3", "--out", "d.json")
    assert out.returncode == 0, out.stderr
    assert "wrote 9 cases" in out.stdout and "fleet-lsp eval run --dataset" in out.stdout
    cases = read_dataset(tmp_path / "d.json")
    assert [c.wire() for c in cases] == [c.wire() for c in build_dataset(seed=3)]
    default = run(tmp_path, "eval", "dataset", "--per-kind", "1", "--no-long-context")
    assert default.returncode == 0, default.stderr
    assert len(read_dataset(tmp_path / "state" / "eval" / "dataset-7.json")) == 5


def test_eval_run_end_to_end_records_an_mlflow_run(
    tmp_path: Path, script_env: dict[str, str]
) -> None:
    made = run(tmp_path, "eval", "dataset", "--per-kind", "1", "--no-long-context", "--out", "d")
    assert made.returncode == 0, made.stderr
    out = run(
        tmp_path, "eval", "run", "--dataset", "d", "--case", "question-1", "--case", "late-1",
        "--json", env=script_env, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "eval" in out.stderr and "2/2" in out.stderr  # the progress bar
    report = json.loads(out.stdout)
    rows = {row["case_id"]: row for row in report["cases"]}
    assert set(rows) == {"question-1", "late-1"}
    assert rows["question-1"]["route"] == "direct" and rows["late-1"]["route"] == "rlm"
    assert all(row["status"] == "completed" for row in rows.values()), rows
    assert all(row["fleet_metric"] == 1.0 for row in rows.values()), rows
    assert report["metrics"]["fleet_metric"] == 1.0
    # the suite: relevance by the judge, sandbox verification only on the code route, no Skill
    # activity and no retrieval spans (not applicable)
    assert all(row["relevance"] == 1.0 for row in rows.values()), rows
    assert rows["late-1"]["sandbox_verification"] == 1.0
    assert rows["question-1"]["sandbox_verification"] is None
    assert all(row["skill_use"] is None for row in rows.values())
    assert all(row["retrieval_groundedness"] is None for row in rows.values())
    assert report["runId"]

    from fleet_core.config import load_config
    from fleet_core.observability.tracing import create_tracer

    state = tmp_path / "state"
    tracer = create_tracer(
        load_config(environ={"FLEET_STATE_DIR": str(state)}, cwd=tmp_path), scope="evaluation"
    )
    try:
        backend = tracer.backend  # type: ignore[union-attr]
        mlflow_run = backend.get_run(report["runId"])
        assert mlflow_run.info.experiment_id == backend.experiment_id("evaluation")
        assert mlflow_run.data.metrics["fleet_metric"] == 1.0
        assert mlflow_run.data.params["cases"] == "2"
        trace = backend._get_trace(rows["late-1"]["trace_id"])
        names = {a.name for a in trace.info.assessments}
        assert {"fleet_metric", "fleet.labels"} <= names
        assert trace.info.experiment_id == backend.experiment_id("evaluation")
    finally:
        tracer.close()

    table = run(
        tmp_path, "eval", "run", "--dataset", "d", "--case", "question-1", env=script_env,
        timeout=300,
    )  # fmt: skip
    assert table.returncode == 0, table.stderr
    assert "question-1" in table.stdout and "fleet_metric" in table.stdout
    for column in ("relevance", "sandbox", "skills", "grounded", "efficiency", "skill_use"):
        assert column in table.stdout, table.stdout
    assert "MLflow run" in table.stdout and "fleet-lsp mlflow ui" in table.stdout


def test_eval_run_labelled_reruns_reviewed_turns(
    tmp_path: Path, script_env: dict[str, str]
) -> None:
    """A replay-captured Turn, labelled from the CLI, is re-run as a fresh Turn and scored."""
    replayed = run(
        tmp_path, "turn", TASK, "--session", "rev", "--record-replay", "--json", env=script_env
    )
    assert replayed.returncode == 0, replayed.stderr
    plain = run(tmp_path, "turn", TASK, "--session", "plain", "--json", env=script_env)
    assert plain.returncode == 0, plain.stderr
    traces = [json.loads(out.stdout)["traceId"] for out in (replayed, plain)]
    labelled = [
        run(tmp_path, "eval", "label", trace_id, "--value", "42", "--route", "rlm")
        for trace_id in traces
    ]
    assert all(out.returncode == 0 for out in labelled), [out.stderr for out in labelled]
    assert "optimization: eligible" in labelled[0].stdout
    assert "optimization: not eligible: The Turn was not replay-captured" in labelled[1].stdout

    report = run(tmp_path, "eval", "run", "--labelled", "--json", env=script_env, timeout=300)
    assert report.returncode == 0, report.stderr
    assert f"skipped {traces[1]}: the Turn was not replay-captured" in report.stderr
    (row,) = json.loads(report.stdout)["cases"]
    assert row["case_id"] == f"trace-{traces[0].removeprefix('tr-')[:12]}"
    assert row["status"] == "completed" and row["route"] == "rlm"
    assert row["fleet_metric"] == 1.0, row["feedback"]
    assert row["trace_id"] not in traces  # a fresh Turn with its own trace
    both = run(tmp_path, "eval", "run", "--labelled", "--dataset", "d.json", env=script_env)
    assert both.returncode == 2 and "not both" in one_line_error(both, "InvalidInput")


def test_eval_run_without_models_says_what_to_set(tmp_path: Path) -> None:
    # no endpoint and no embedded model (where the local-model extra is installed, it answers)
    out = run(tmp_path, "eval", "run", "--limit", "1", env={"FLEET_LOCAL_MODEL__ENABLED": "false"})
    assert out.returncode == 2
    assert "No model is configured" in out.stderr
    for key in ("FLEET_LM_API_BASE", "FLEET_LM_MODEL", "FLEET_LM_API_KEY"):
        assert key in out.stderr
    unknown = run(tmp_path, "eval", "run", "--case", "nope")
    assert unknown.returncode == 2 and "No case nope" in one_line_error(unknown, "InvalidInput")


# ---------------------------------------------------------------------------------------------
# mlflow ui
# ---------------------------------------------------------------------------------------------


def test_mlflow_ui_help_and_loopback_only(tmp_path: Path) -> None:
    help_ = run(tmp_path, "mlflow", "ui", "--help")
    assert help_.returncode == 0 and "--port" in help_.stdout
    refused = run(tmp_path, "mlflow", "ui", "--host", "0.0.0.0")
    assert refused.returncode == 2 and "FLEET_ALLOW_NON_LOOPBACK_BIND" in refused.stderr
    off = run(tmp_path, "mlflow", "ui", env={"FLEET_MLFLOW_DESTINATION": "off"})
    assert off.returncode == 2 and "tracing is off" in off.stderr


def test_mlflow_ui_command_targets_the_local_store(tmp_path: Path) -> None:
    """The command line MLflow is started with: loopback, the local store, options MLflow knows
    (click rejects an unknown option before it handles the trailing --help)."""
    from fleet_core.config import load_config
    from fleet_lsp.cli.mlflow_ui import ui_command_line

    state = tmp_path / "state"
    config = load_config(environ={"FLEET_STATE_DIR": str(state)}, cwd=tmp_path)
    command = ui_command_line(config, "127.0.0.1", 5123)
    assert command[:4] == [sys.executable, "-m", "mlflow", "ui"]
    options = dict(zip(command[4::2], command[5::2], strict=True))
    assert options["--backend-store-uri"] == f"sqlite:///{(state / 'mlflow').resolve()}/mlflow.db"
    assert options["--default-artifact-root"].startswith("file://")
    assert options["--host"] == "127.0.0.1" and options["--port"] == "5123"
    checked = subprocess.run(
        [*command, "--help"], capture_output=True, text=True, timeout=120, check=False
    )
    assert checked.returncode == 0, checked.stderr


# ---------------------------------------------------------------------------------------------
# doctor
# ---------------------------------------------------------------------------------------------


class _ModelsEndpoint(JsonHandler):
    def do_GET(self) -> None:
        ok = self.path == "/v1/models" and self.headers.get("authorization") == "Bearer sk-doc"
        self.send_json({"object": "list", "data": [{"id": "m"}]}, 200 if ok else 401)


@pytest.fixture
def models_endpoint() -> Iterator[str]:
    with serving(_ModelsEndpoint) as server:
        yield f"http://127.0.0.1:{server.server_port}/v1"


def checks(out: subprocess.CompletedProcess[str]) -> dict[str, str]:
    found = {}
    for line in out.stdout.splitlines():
        head, _, rest = line.partition(": ")
        status, _, name = head.strip().partition("  ")
        if status in ("ok", "warn", "FAIL") and rest:
            found[name.strip()] = status
    return found


def test_doctor_reports_and_says_what_to_fix(tmp_path: Path, models_endpoint: str) -> None:
    no_embedded = {"FLEET_LOCAL_MODEL__ENABLED": "false"}  # it would serve the roles, if installed
    broken = run(tmp_path, "doctor", env=no_embedded, timeout=180)
    assert broken.returncode == 1, broken.stdout + broken.stderr
    found = checks(broken)
    for name in ("configuration", "database", "sandbox", "mlflow"):
        assert found.get(name) in ("ok", "warn"), (name, broken.stdout)
    assert found["model (root)"] == "FAIL" and found["model (sub)"] == "FAIL"
    assert found["model (judge)"] == "warn"  # optional roles never fail the run
    assert "fix: set FLEET_LM_API_BASE, FLEET_LM_MODEL and FLEET_LM_API_KEY" in broken.stdout
    assert "[llm] model/api_base" in broken.stdout
    assert "required check(s) failed" in broken.stdout
    assert (tmp_path / "state" / "mlflow" / "mlflow.db").is_file()  # the store really opened

    env = {
        "FLEET_LM_API_BASE": models_endpoint,
        "FLEET_LM_MODEL": "m",
        "FLEET_LM_API_KEY": "sk-doc",
    }
    healthy = run(tmp_path, "doctor", env=env, timeout=180)
    found = checks(healthy)
    assert all(found[f"model ({role})"] == "ok" for role in ("root", "sub", "judge", "reflection"))
    if found["sandbox"] == "ok":
        assert healthy.returncode == 0, healthy.stdout
    assert "sk-doc" not in healthy.stdout + healthy.stderr

    wrong_key = run(tmp_path, "doctor", env=env | {"FLEET_LM_API_KEY": "sk-wrong"}, timeout=180)
    assert wrong_key.returncode == 1
    assert "HTTP 401 (check the API key)" in wrong_key.stdout


def test_doctor_json_reports_every_check_and_its_exit_code(tmp_path: Path) -> None:
    no_embedded = {"FLEET_LOCAL_MODEL__ENABLED": "false"}  # it would serve the roles, if installed
    out = run(tmp_path, "doctor", "--json", env=no_embedded, timeout=180)
    report = json.loads(out.stdout)  # JSON alone on stdout
    by_name = {c["name"]: c for c in report["checks"]}
    assert by_name["database"]["status"] == "ok"
    assert by_name["model (root)"]["status"] == "fail" and by_name["model (root)"]["fix"]
    assert report["ok"] is False and out.returncode == 1
    assert set(by_name["sandbox"]) == {"name", "status", "detail", "fix"}


# ---------------------------------------------------------------------------------------------
# the bundled example
# ---------------------------------------------------------------------------------------------


def test_demo_finds_sales_csv_through_package_resources() -> None:
    from importlib.resources import files

    from fleet_lsp.cli.demo import sales_csv

    resource = files("fleet_lsp").joinpath("examples", "sales.csv")
    assert resource.is_file()
    assert sales_csv() == Path(str(resource))
    assert "region" in sales_csv().read_text().splitlines()[0].split(",")


@pytest.mark.skipif(shutil.which("uv") is None, reason="needs uv to build the wheel")
def test_wheel_ships_sales_csv(tmp_path: Path) -> None:
    built = subprocess.run(
        ["uv", "build", "--wheel", "--out-dir", str(tmp_path), str(REPO)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=os.environ | {"UV_PYTHON_DOWNLOADS": "never"},
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = tmp_path.glob("fleet_lsp-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        assert "fleet_lsp/examples/sales.csv" in names
        data = archive.read("fleet_lsp/examples/sales.csv")
    assert data == (REPO / "fleet_lsp" / "examples" / "sales.csv").read_bytes()
