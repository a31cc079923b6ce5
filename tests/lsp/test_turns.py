"""Turns over the protocol with scripted models whose code really runs in the sandbox:
the quickstart flow with progress (children included), every cancel route, TurnBusy."""

from __future__ import annotations

import asyncio
import csv
import io
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient

from fleet_core.engine.scripted_lm import action, route, submit
from fleet_lsp.protocol import ERROR_CODES
from tests.lsp.conftest import CLIENTS, SALES, call, call_error, scripted_lsp, start_request

pytestmark = pytest.mark.asyncio(loop_scope="module")

QUICKSTART = "Calculate revenue by region and save artifacts/revenue_by_region.csv."
SLOW = "SLOWTASK: count slowly"
QUICK_CODE = (
    "import pandas as pd\n"
    "df = pd.read_csv('files/sales.csv')\n"
    "totals = df.groupby('region', as_index=False)['revenue'].sum()\n"
    "totals.to_csv('artifacts/revenue_by_region.csv', index=False)\n"
    "checks = spawn_agents(subtasks=['REGION=North check', 'REGION=South check'], "
    "input_paths=[['files/sales.csv'], ['files/sales.csv']])\n"
    "print(totals.to_string(index=False))\n"
    "print(checks)"
)


def child(region: str) -> list[str]:
    return [
        action(
            "import csv\n"
            "rows = [r for r in csv.DictReader(open('files/sales.csv')) "
            f"if r['region'] == '{region}']\n"
            "total = round(sum(float(r['revenue']) for r in rows), 2)\n"
            f"open('artifacts/{region}.txt', 'w').write(str(total))\n"
            "print(total)"
        ),
        action(f"SUBMIT(findings='{region}=' + str(total))", "Submit."),
    ]


SCRIPT = {
    "root": {
        "rules": {
            "revenue by region": [
                action(QUICK_CODE),
                submit("totals.to_string(index=False)", note="groupby+sum on files/sales.csv"),
            ],
            # reused forever: a cell that runs until the Turn is cancelled
            "SLOWTASK": action("import time\nfor _ in range(1200):\n    time.sleep(0.05)"),
        }
    },
    "sub": {
        "rules": {
            "REGION=North": child("North"),
            "REGION=South": child("South"),
            "revenue by region": route("rlm"),
            "SLOWTASK": route("rlm"),
        }
    },
}


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=CLIENTS)
async def lsp(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[LanguageClient]:
    async for client in scripted_lsp(request.param, tmp_path_factory, SCRIPT, "script"):
        yield client


async def wait_for(predicate: Callable[[], Any], timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        await asyncio.sleep(0.02)
    raise AssertionError("timed out waiting")


def values(lsp: LanguageClient, token: Any) -> list[dict[str, Any]]:
    return [v for t, v, _ in lsp.raw_progress if t == token]  # type: ignore[attr-defined]


def begun(lsp: LanguageClient, token: Any) -> dict[str, Any] | None:
    return next((v for v in values(lsp, token) if v["kind"] == "begin"), None)


async def new_session(lsp: LanguageClient, **extra: Any) -> str:
    session_id = f"t-{uuid.uuid4().hex[:8]}"
    await call(lsp, "fleet/session/new", {"sessionId": session_id, **extra})
    return session_id


def start_run(lsp: LanguageClient, params: dict[str, Any], msg_id: str | None = None) -> Any:
    return start_request(lsp, "fleet/turn/run", params, msg_id)


async def assert_clean(lsp: LanguageClient) -> None:
    info = await call(lsp, "fleet/debug/info", {})
    assert info["runningTurns"] == []
    assert info["progressTokens"] == 0  # pygls' token table does not leak


async def test_quickstart_flow(lsp: LanguageClient, tmp_path: Path) -> None:
    session_id = await new_session(lsp)
    await call(lsp, "fleet/context/attach", {"sessionId": session_id, "uri": SALES.as_uri()})
    await call(
        lsp, "fleet/context/setDataset", {"sessionId": session_id, "path": "files/sales.csv"}
    )
    token = f"tok-{uuid.uuid4().hex[:6]}"
    result = await asyncio.wait_for(
        start_run(lsp, {"sessionId": session_id, "task": QUICKSTART, "workDoneToken": token}), 120
    )
    result = _plain(result)
    assert result["status"] == "completed", result.get("error")
    assert result["route"] == "rlm"
    assert result["sessionId"] == session_id
    paths = {a["path"] for a in result["artifacts"]}
    assert "artifacts/revenue_by_region.csv" in paths
    turn_id = result["turnId"]

    # progress: begin / report / end on the client's token, one token per child agent
    root = values(lsp, token)
    assert root[0]["kind"] == "begin" and root[0]["cancellable"] is True
    assert root[0]["title"].startswith("Turn 1: Calculate revenue")
    assert root[0]["turnId"] == turn_id and root[0]["sessionId"] == session_id
    assert any(v["kind"] == "report" for v in root)
    assert root[-1] == {
        "kind": "end",
        "message": "completed",
        "turnId": turn_id,
        "outcome": result["outcome"]["kind"],  # additive: how the answer was reached
    }
    children = [t for t, _, _ in lsp.raw_progress if str(t).startswith(f"{token}/agent/")]  # type: ignore[attr-defined]
    child_tokens = list(dict.fromkeys(children))
    assert len(child_tokens) == 2
    order = [(t, v["kind"]) for t, v, _ in lsp.raw_progress]  # type: ignore[attr-defined]
    parent_end = order.index((token, "end"))
    for child_token in child_tokens:
        child_values = values(lsp, child_token)
        assert child_values[0]["kind"] == "begin"
        assert child_values[0]["parentAgentId"] == "root"
        assert child_values[0]["turnId"] == turn_id
        assert child_values[-1]["kind"] == "end"
        assert order.index((child_token, "end")) < parent_end  # closed before the parent's end
    # reports are rate-limited to 10/s per token
    for tok in [token, *child_tokens]:
        stamps = [at for t, v, at in lsp.raw_progress if t == tok and v["kind"] == "report"]  # type: ignore[attr-defined]
        for i in range(len(stamps) - 10):
            assert stamps[i + 10] - stamps[i] >= 0.95, tok
    # structured events for clients that opted in
    emitted = [e for e in lsp.fleet_events if e["turnId"] == turn_id]  # type: ignore[attr-defined]
    kinds = {e["kind"] for e in emitted}
    assert {"turn_started", "code_cell", "child_spawned", "child_finished"} <= kinds
    assert {e["agentId"] for e in emitted} >= {"root"}

    # the artifact through textDocumentContent and through the fallback
    uri = f"fleet:/sessions/{session_id}/artifacts/revenue_by_region.csv"
    text = (
        await lsp.workspace_text_document_content_async(types.TextDocumentContentParams(uri=uri))
    ).text
    rows = {r["region"]: float(r["revenue"]) for r in csv.DictReader(io.StringIO(text))}
    expected: dict[str, float] = {}
    for r in csv.DictReader(SALES.open()):
        expected[r["region"]] = expected.get(r["region"], 0.0) + float(r["revenue"])
    assert rows == pytest.approx(expected)
    assert (await call(lsp, "fleet/artifact/read", {"uri": uri}))["text"] == text
    assert uri in [c["uri"] for c in lsp.artifact_changes]  # type: ignore[attr-defined]
    if lsp.kind == "vscode":  # type: ignore[attr-defined]
        assert uri in lsp.content_refreshes  # type: ignore[attr-defined]

    # the trace as a document (rendered from the stored MLflow trace), then a label
    trace = await call(lsp, "fleet/trace/get", {"turnId": turn_id})
    assert trace["traceId"] == result["traceId"] and trace["source"] == "mlflow"
    assert trace["uri"] == f"fleet:/sessions/{session_id}/traces/{result['traceId']}.md"
    markdown = trace["markdown"]
    assert markdown.startswith(f"# Turn trace `{result['traceId']}`")
    assert "| Route | rlm |" in markdown and "revenue_by_region.csv" in markdown
    assert "Cell 1 — **ok**" in markdown and "Child agent `" in markdown
    assert "## Usage" in markdown
    doc = await lsp.workspace_text_document_content_async(
        types.TextDocumentContentParams(uri=trace["uri"])
    )
    assert doc.text == markdown
    labelled = await call(
        lsp,
        "fleet/trace/label",
        {"traceId": trace["traceId"], "values": ["North"], "critical": True},
    )
    assert labelled["labels"]["values"] == ["North"] and labelled["labels"]["critical"] is True
    assert labelled["labels"]["status"] == "approved"
    assert labelled["eligible"] is False  # recordReplay was off
    history = await call(lsp, "fleet/session/history", {"sessionId": session_id})
    assert [t["status"] for t in history["turns"]] == ["completed"]
    # what a client that did not run the Turn needs for its tree: duration and artifact paths
    [summary] = history["turns"]
    assert summary["durationSeconds"] == result["durationSeconds"] > 0
    assert summary["artifactPaths"] == [a["path"] for a in result["artifacts"]]
    assert "artifacts/revenue_by_region.csv" in summary["artifactPaths"]
    await assert_clean(lsp)


def _plain(value: Any) -> Any:
    from tests.lsp.conftest import plain

    return plain(value)


async def _slow_turn(lsp: LanguageClient, session_id: str, msg_id: str | None = None) -> Any:
    token = f"slow-{uuid.uuid4().hex[:6]}"
    future = start_run(
        lsp, {"sessionId": session_id, "task": SLOW, "mode": "rlm", "workDoneToken": token}, msg_id
    )
    begin = await wait_for(lambda: begun(lsp, token))
    # wait until the cell really runs in the sandbox
    await wait_for(
        lambda: any(
            e["kind"] == "code_cell" and e["turnId"] == begin["turnId"]
            for e in lsp.fleet_events  # type: ignore[attr-defined]
        )
    )
    return future, token, begin["turnId"]


async def _ended_cancelled(lsp: LanguageClient, session_id: str, token: str) -> None:
    await wait_for(lambda: any(v["kind"] == "end" for v in values(lsp, token)))
    assert values(lsp, token)[-1]["message"] == "cancelled"

    async def status() -> str:
        turns = (await call(lsp, "fleet/session/history", {"sessionId": session_id}))["turns"]
        return str(turns[-1]["status"])

    for _ in range(300):  # the outcome is committed right after the progress ends
        current = await status()
        if current != "running":
            break
        await asyncio.sleep(0.1)
    assert current == "cancelled"


async def test_cancel_by_cancel_request(lsp: LanguageClient) -> None:
    session_id = await new_session(lsp)
    msg_id = f"run-{uuid.uuid4().hex[:6]}"
    future, token, _ = await _slow_turn(lsp, session_id, msg_id)
    lsp.cancel_request(types.CancelParams(id=msg_id))
    with pytest.raises(JsonRpcException) as info:
        await asyncio.wait_for(future, 30)
    assert info.value.code == -32800
    await _ended_cancelled(lsp, session_id, token)
    await assert_clean(lsp)


async def test_cancel_by_progress_cancel(lsp: LanguageClient) -> None:
    session_id = await new_session(lsp)
    future, token, turn_id = await _slow_turn(lsp, session_id)
    lsp.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))
    result = _plain(await asyncio.wait_for(future, 30))
    assert result["status"] == "cancelled" and result["turnId"] == turn_id
    assert result["error"]["kind"] == "TurnCancelled"
    await _ended_cancelled(lsp, session_id, token)
    await assert_clean(lsp)


async def test_a_progress_cancel_sent_right_after_the_run_request_is_not_lost(
    lsp: LanguageClient,
) -> None:
    """The cancel overtakes the Turn's start (it arrives while the handler still awaits): the
    server holds the client's token from the first moment, so the Turn still ends cancelled."""
    session_id = await new_session(lsp)
    token = f"early-{uuid.uuid4().hex[:6]}"
    params = {"sessionId": session_id, "task": SLOW, "mode": "rlm", "workDoneToken": token}
    future = start_run(lsp, params)
    lsp.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))
    result = _plain(await asyncio.wait_for(future, 60))
    assert result["status"] == "cancelled"
    assert result["error"]["kind"] == "TurnCancelled"  # the core's kind, whatever route
    turns = (await call(lsp, "fleet/session/history", {"sessionId": session_id}))["turns"]
    assert all(t["status"] != "running" for t in turns)
    await assert_clean(lsp)


async def test_cancel_by_turn_cancel(lsp: LanguageClient) -> None:
    session_id = await new_session(lsp)
    future, token, turn_id = await _slow_turn(lsp, session_id)
    assert await call(lsp, "fleet/turn/cancel", {"turnId": turn_id}) is None
    result = _plain(await asyncio.wait_for(future, 30))
    assert result["status"] == "cancelled"
    await _ended_cancelled(lsp, session_id, token)
    # cancelling a finished Turn is a no-op
    assert await call(lsp, "fleet/turn/cancel", {"turnId": turn_id}) is None
    await assert_clean(lsp)


async def test_turn_busy_and_parallel_sessions(lsp: LanguageClient) -> None:
    first = await new_session(lsp)
    second = await new_session(lsp)
    future_a, _token_a, turn_a = await _slow_turn(lsp, first)
    busy = await call_error(lsp, "fleet/turn/run", {"sessionId": first, "task": SLOW})
    assert busy.code == ERROR_CODES["TurnBusy"] == -32051
    assert busy.data["kind"] == "TurnBusy"
    assert "fleet/turn/cancel" in busy.message
    # another Session runs in parallel, and the server keeps answering
    future_b, _token_b, turn_b = await _slow_turn(lsp, second)
    started = time.monotonic()
    listed = await call(lsp, "fleet/session/list", {})
    assert time.monotonic() - started < 1.0
    assert {first, second} <= {s["sessionId"] for s in listed["sessions"]}
    await call(lsp, "fleet/turn/cancel", {"turnId": turn_a})
    await call(lsp, "fleet/turn/cancel", {"turnId": turn_b})
    results = [_plain(r) for r in await asyncio.wait_for(asyncio.gather(future_a, future_b), 30)]
    assert [r["status"] for r in results] == ["cancelled", "cancelled"]
    await assert_clean(lsp)


async def test_run_turn_command_with_server_token(lsp: LanguageClient) -> None:
    """Generic clients (exec_cmd, no token): the server creates the Turn's token."""
    session_id = await new_session(lsp)
    before = set(lsp.progress_reports)
    command = asyncio.ensure_future(
        lsp.workspace_execute_command_async(
            types.ExecuteCommandParams(
                command="fleet.runTurn",
                arguments=[{"sessionId": session_id, "task": SLOW, "mode": "rlm"}],
            )
        )
    )
    token = await wait_for(
        lambda: next((t for t in lsp.progress_reports if t not in before and begun(lsp, t)), None)
    )
    assert str(token).startswith("fleet/turn/")
    await call(lsp, "fleet/turn/cancel", {"turnId": begun(lsp, token)["turnId"]})  # type: ignore[index]
    result = await asyncio.wait_for(command, 30)
    assert result["status"] == "cancelled"
    assert lsp.progress_reports[token][-1].message == "cancelled"
    await assert_clean(lsp)


async def test_a_turn_cancelled_before_it_started_has_the_cores_cancelled_result() -> None:
    """Nothing committed yet: the face answers the core's ``TurnResult.cancelled``, not a
    hand-built record (whose error kind was "cancelled" where the core says TurnCancelled)."""
    from fleet_core.engine.control import TurnCancelled
    from fleet_core.models import TurnResult
    from fleet_lsp.features.turns import EditorTurn, _cancelled_result
    from fleet_lsp.protocol import to_wire

    running = EditorTurn(session_id="s1", cancel_route="window/workDoneProgress/cancel")
    result = await _cancelled_result(None, running)  # type: ignore[arg-type]  # no runtime needed
    wire = to_wire(result)
    assert wire["error"] == {
        "kind": TurnCancelled.kind,
        "message": "The Turn was cancelled by window/workDoneProgress/cancel",
    }
    expected = TurnResult.cancelled("", "s1", wire["error"]["message"])
    assert result == expected
    assert TurnResult.model_validate(wire) == expected
    assert wire == expected.wire()
    assert wire["status"] == "cancelled" and wire["usage"]["callsByCategory"] == {}
