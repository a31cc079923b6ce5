"""Traces and labels over the protocol, against a real local MLflow store.

Turns run with scripted models whose code really runs in the sandbox; their traces are written to
``<state>/mlflow/``. Labels must land in MLflow (expectations on the trace) and in the store's
``fleet_trace_labels`` row; trace documents must render from the stored MLflow trace in a new
server process (same state dir); with tracing off, documents fall back to the stored outcome.
Also: model settings changed with ``workspace/didChangeConfiguration`` apply to the next Turn.
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from fleet_core.engine.scripted_lm import action, route, submit
from fleet_lsp.protocol import ERROR_CODES, INVALID_PARAMS
from tests.fake_http import JsonHandler, serving
from tests.lsp.conftest import call, call_error, close_client, start_client, write_script

pytestmark = pytest.mark.asyncio(loop_scope="function")

TASK = "ANSWER42: compute six times seven in the sandbox."
SCRIPT = {
    "root": {
        "rules": {
            "ANSWER42": [
                action("x = 6 * 7\nprint('six times seven is', x)"),
                submit("f'The answer is {x}.'", note="multiply in the sandbox"),
            ]
        }
    },
    "sub": {"rules": {"ANSWER42": route("rlm")}},
}


async def stop(client: LanguageClient) -> None:
    await close_client(client)


async def run_traced_turn(client: LanguageClient, *, record_replay: bool) -> dict[str, Any]:
    session_id = f"t-{uuid.uuid4().hex[:8]}"
    await call(client, "fleet/session/new", {"sessionId": session_id})
    result = await call(
        client,
        "fleet/turn/run",
        {"sessionId": session_id, "task": TASK, "recordReplay": record_replay},
    )
    assert result["status"] == "completed", result.get("error")
    return dict(result)


def read_both_stores(state: Path, trace_id: str) -> tuple[dict[str, Any] | None, Any, Any]:
    """(MLflow's fleet.labels, MLflow assessment names, the store's row) for a trace."""
    from fleet_core.config import load_config
    from fleet_core.observability.tracing import create_tracer
    from fleet_core.store import Store
    from fleet_core.store.database import database_url

    config = load_config(environ={"FLEET_STATE_DIR": str(state)}, cwd=state)
    tracer = create_tracer(config)
    try:
        backend = tracer.backend  # type: ignore[union-attr]
        mlflow_labels = backend.read_labels(trace_id)
        names = {a.name for a in backend._get_trace(trace_id).info.assessments}
    finally:
        tracer.close()
    store = Store.open(database_url(None, state), state)
    try:
        row = store.get_trace_labels(trace_id)
    finally:
        store.close()
    return mlflow_labels, names, row


async def test_label_lands_in_both_stores_and_trace_renders_after_restart(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    script = write_script(tmp_path / "script.json", SCRIPT)
    client = await start_client(
        "vscode", {"FLEET_STATE_DIR": str(state), "FLEET_TEST_SCRIPT": str(script)}
    )
    try:
        result = await run_traced_turn(client, record_replay=True)
        trace_id, turn_id, session_id = result["traceId"], result["turnId"], result["sessionId"]
        assert trace_id.startswith("tr-")

        labelled = await call(
            client,
            "fleet/trace/label",
            {
                "traceId": trace_id,
                "answer": "42",
                "values": [42],
                "route": "rlm",
                "critical": True,
                "group": "arithmetic",
            },
        )
        assert labelled["traceId"] == trace_id and labelled["turnId"] == turn_id
        assert labelled["sessionId"] == session_id
        assert labelled["labels"] == {
            "status": "approved",
            "answer": "42",
            "values": ["42"],
            "route": "rlm",
            "critical": True,
            "group": "arithmetic",
            "expectations": None,
            "reviewer": "human",
        }
        assert labelled["eligible"] is True, labelled  # the Turn was replay-captured

        # a partial update through the command, addressed by Turn id: earlier fields stay
        partial = await client.workspace_execute_command_async(
            types.ExecuteCommandParams(
                command="fleet.labelTrace", arguments=[{"traceId": turn_id, "status": "benchmark"}]
            )
        )
        assert partial["traceId"] == trace_id
        assert partial["labels"]["status"] == "benchmark"
        assert partial["labels"]["answer"] == "42" and partial["labels"]["values"] == ["42"]
        assert partial["labels"]["route"] == "rlm" and partial["labels"]["group"] == "arithmetic"
        assert partial["eligible"] is False and "Benchmark" in partial["ineligibleReason"]

        # validation: -32602 with a message naming the problem; nothing is written
        bad_status = await call_error(
            client, "fleet/trace/label", {"traceId": trace_id, "status": "good"}
        )
        assert bad_status.code == INVALID_PARAMS and "'status' must be one of" in bad_status.message
        bad_values = await call_error(
            client, "fleet/trace/label", {"traceId": trace_id, "values": [{"x": 1}]}
        )
        assert bad_values.code == INVALID_PARAMS and "'values'" in bad_values.message
        bad_schema = await call_error(
            client,
            "fleet/trace/label",
            {
                "traceId": trace_id,
                "expectations": {
                    "schema_version": 1,
                    "artifacts": [{"path": "../secret.txt", "kind": "text", "expected": "x"}],
                },
            },
        )
        assert bad_schema.code == INVALID_PARAMS
        assert bad_schema.data["kind"] == "LabelInvalid"
        assert "artifact path" in bad_schema.message
        nothing = await call_error(client, "fleet/trace/label", {"traceId": trace_id})
        assert nothing.code == INVALID_PARAMS and "at least one label" in nothing.message
        missing = await call_error(
            client, "fleet/trace/label", {"traceId": "tr-" + "0" * 32, "answer": "1"}
        )
        assert missing.code == ERROR_CODES["TraceNotFound"] == -32062

        listed = await call(client, "fleet/trace/list", {"sessionId": session_id})
        assert listed["traces"] == [
            {
                "traceId": trace_id,
                "turnId": turn_id,
                "sessionId": session_id,
                "uri": f"fleet:/sessions/{session_id}/traces/{trace_id}.md",
                "source": "mlflow",
                "labelStatus": "benchmark",  # the tree marks labelled traces with it
            }
        ]
        # the server keeps serving after the errors above
        assert (await call(client, "fleet/session/list", {}))["sessions"]
    finally:
        await stop(client)

    # both stores hold the same, merged labels
    mlflow_labels, names, row = read_both_stores(state, trace_id)
    assert mlflow_labels is not None and row is not None
    assert mlflow_labels == row["labels"]
    assert mlflow_labels["review_status"] == "benchmark"
    assert mlflow_labels["expected_values"] == ["42"] and mlflow_labels["expected_answer"] == "42"
    assert {"fleet.labels", "expected_response", "expected_facts"} <= names
    assert row["turn_id"] == turn_id and row["session_id"] == session_id
    assert row["eligible"] is False

    # a new server process on the same state dir (no scripted models): the document renders
    # from the stored MLflow trace, labels included
    restarted = await start_client("neovim", {"FLEET_STATE_DIR": str(state)})
    try:
        doc = await call(restarted, "fleet/trace/get", {"traceId": trace_id})
        assert doc["source"] == "mlflow" and "note" not in doc
        assert doc["turnId"] == turn_id and doc["sessionId"] == session_id
        markdown = doc["markdown"]
        assert markdown.startswith(f"# Turn trace `{trace_id}`")
        assert "| Route | rlm |" in markdown and "| Outcome | completed |" in markdown
        assert "Cell 1 — **ok**" in markdown and "print('six times seven is', x)" in markdown
        assert "six times seven is 42" in markdown  # the cell's stdout
        assert "The answer is 42." in markdown
        assert "## Labels" in markdown and '"review_status": "benchmark"' in markdown
        by_turn = await call(restarted, "fleet/trace/get", {"turnId": turn_id})
        assert by_turn["markdown"] == markdown
        read = await call(restarted, "fleet/artifact/read", {"uri": doc["uri"]})
        assert read["text"] == markdown and read["languageId"] == "markdown"
    finally:
        await stop(restarted)


async def test_tracing_off_falls_back_to_the_stored_outcome(tmp_path: Path) -> None:
    state = tmp_path / "state"
    script = write_script(tmp_path / "script.json", SCRIPT)
    env = {
        "FLEET_STATE_DIR": str(state),
        "FLEET_TEST_SCRIPT": str(script),
        "FLEET_MLFLOW_DESTINATION": "off",
    }
    client = await start_client("vscode", env)
    try:
        result = await run_traced_turn(client, record_replay=False)
        assert result.get("traceId") is None
        doc = await call(client, "fleet/trace/get", {"turnId": result["turnId"]})
        assert doc["source"] == "store" and doc["traceId"] == result["turnId"]
        assert "no MLflow trace" in doc["note"]
        assert doc["markdown"].startswith("> **Note:**")
        assert "The answer is 42." in doc["markdown"]
        text = (
            await client.workspace_text_document_content_async(
                types.TextDocumentContentParams(uri=doc["uri"])
            )
        ).text
        assert text == doc["markdown"]
        refused = await call_error(
            client, "fleet/trace/label", {"traceId": result["turnId"], "answer": "42"}
        )
        assert refused.code == ERROR_CODES["TraceNotFound"]
        assert "no MLflow trace" in refused.message
        unknown = await call_error(client, "fleet/trace/get", {"traceId": "tr-" + "1" * 32})
        assert unknown.code == ERROR_CODES["TraceNotFound"] and "Tracing is off" in unknown.message
        off = await call_error(client, "fleet/trace/label", {"traceId": "tr-1", "answer": "x"})
        assert off.code == ERROR_CODES["TracingUnavailable"] == -32069
    finally:
        await stop(client)
    assert not (state / "mlflow").exists()


# ---------------------------------------------------------------------------------------------
# workspace/didChangeConfiguration: the next Turn uses the new model settings
# ---------------------------------------------------------------------------------------------


class _FakeModels(JsonHandler):
    """An OpenAI-compatible /v1/chat/completions that records which model each call named."""

    seen: list[str]

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))))
        self.server.seen.append(str(body.get("model")))  # type: ignore[attr-defined]
        text = "[[ ## reasoning ## ]]\nok\n\n[[ ## route ## ]]\ndirect\n\n[[ ## answer ## ]]\n42"
        reply = {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text + "\n\n[[ ## completed ## ]]"},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10},
        }
        self.send_json(reply)


@pytest.fixture
def fake_models() -> Iterator[Any]:
    with serving(_FakeModels) as server:
        server.seen = []  # type: ignore[attr-defined]
        yield server


def llm(server: Any, model: str) -> dict[str, Any]:
    base = f"http://127.0.0.1:{server.server_port}/v1"
    return {"llm": {"model": model, "api_base": base, "num_retries": 0}}


async def test_model_settings_apply_to_the_next_turn(tmp_path: Path, fake_models: Any) -> None:
    env = {
        "FLEET_STATE_DIR": str(tmp_path / "state"),
        "FLEET_LM_API_KEY": "sk-test-not-secret",
        "FLEET_MLFLOW_DESTINATION": "off",
    }
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEET_LM_")} | env
    client = await start_client("vscode", env, settings=llm(fake_models, "m-one"))
    try:
        session_id = f"t-{uuid.uuid4().hex[:8]}"
        await call(client, "fleet/session/new", {"sessionId": session_id})
        first = await call(client, "fleet/turn/run", {"sessionId": session_id, "task": "What?"})
        assert first["status"] in ("completed", "failed")
        assert fake_models.seen and set(fake_models.seen) == {"m-one"}
        fake_models.seen.clear()

        before = (await call(client, "fleet/debug/info", {}))["configDigest"]
        client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings={"fleet": llm(fake_models, "m-two")})
        )
        for _ in range(200):  # the notification is applied asynchronously
            if (await call(client, "fleet/debug/info", {}))["configDigest"] != before:
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("the new settings were not applied")
        second = await call(client, "fleet/turn/run", {"sessionId": session_id, "task": "Again?"})
        assert second["status"] in ("completed", "failed")
        assert fake_models.seen and set(fake_models.seen) == {"m-two"}
    finally:
        await stop(client)
