"""``fleet/optimize/status|run|approve`` over stdio: a real server whose serving, judge and
reflection models follow a script, on a curated replay dataset built beforehand (9 approved,
replay-captured Turns in 3 groups, one critical). Progress values, both cancel routes (no
candidate, no active change), requests answered while a run is in progress, the run limits (one
per Session, two per server), approval's checks, the report as a read-only document, and the
next Turn serving the approved program."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient

from fleet_lsp.protocol import INVALID_PARAMS, REQUEST_CANCELLED
from tests.lsp.conftest import (
    call,
    call_error,
    close_client,
    plain,
    start_client,
    start_request,
    write_script,
)
from tests.lsp.test_turns import values, wait_for
from tests.optimization.conftest import MARK, SCRIPT, build_optimization_state

pytestmark = pytest.mark.asyncio(loop_scope="module")
SESSIONS = ("research-1", "cancel-1")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def lsp(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[LanguageClient]:
    cwd = tmp_path_factory.mktemp("optimize")
    env = await build_optimization_state(cwd, sessions=SESSIONS)
    env["FLEET_TEST_SCRIPT"] = str(write_script(cwd / "script.json", SCRIPT))
    client = await start_client("vscode", env)
    client.state_dir = Path(env["FLEET_STATE_DIR"])  # type: ignore[attr-defined]
    yield client
    await close_client(client)


def start_optimize(lsp: LanguageClient, params: dict[str, Any], msg_id: str | None = None) -> Any:
    return start_request(lsp, "fleet/optimize/run", params, msg_id)


async def status(lsp: LanguageClient, session_id: str) -> dict[str, Any]:
    found: dict[str, Any] = await call(lsp, "fleet/optimize/status", {"sessionId": session_id})
    return found


def candidate_dirs(lsp: LanguageClient, session_id: str) -> list[str]:
    root = lsp.state_dir / "optimization" / session_id / "candidates"  # type: ignore[attr-defined]
    return sorted(p.name for p in root.iterdir()) if root.is_dir() else []


async def test_status_and_approval_errors_before_any_run(lsp: LanguageClient) -> None:
    found = await status(lsp, "research-1")
    assert found["candidates"] == [] and found["activeVersion"] is None
    assert len(found["activeDigest"]) == 64  # the built-in default program's
    bad = await call_error(
        lsp, "fleet/optimize/approve", {"sessionId": "research-1", "version": "../x"}
    )
    assert bad.code == INVALID_PARAMS and "is not a candidate version" in bad.message
    missing = await call_error(
        lsp,
        "fleet/optimize/approve",
        {"sessionId": "research-1", "version": f"research-1-{'0' * 32}"},
    )
    assert missing.code == INVALID_PARAMS and "has no candidate" in missing.message
    both = await call_error(
        lsp,
        "fleet/optimize/run",
        {"sessionId": "research-1", "budget": "light", "maxMetricCalls": 3},
    )
    assert both.code == INVALID_PARAMS and "not both" in both.message
    unknown = await call_error(lsp, "fleet/optimize/status", {"sessionId": "nope"})
    assert unknown.data["kind"] == "SessionNotFound"


async def _cancelled_mid_search(lsp: LanguageClient, cancel: Any) -> JsonRpcException:
    token = f"opt-{uuid.uuid4().hex[:6]}"
    msg_id = f"optimize-{token}"
    future = start_optimize(
        lsp,
        {"sessionId": "cancel-1", "maxMetricCalls": 40, "workDoneToken": token},
        msg_id,
    )
    await wait_for(
        lambda: any(v.get("phase") == "search" and v["done"] >= 1 for v in values(lsp, token))
    )
    cancel(token, msg_id)
    with pytest.raises(JsonRpcException) as info:
        await asyncio.wait_for(future, 60)
    await wait_for(lambda: values(lsp, token)[-1]["kind"] == "end")
    assert values(lsp, token)[-1]["message"] == "cancelled"
    assert not any(v.get("phase") == "validation" for v in values(lsp, token))
    return info.value


async def test_cancel_mid_search_leaves_no_candidate_and_no_active_change(
    lsp: LanguageClient,
) -> None:
    before = await status(lsp, "cancel-1")

    def by_token(token: str, _msg_id: str) -> None:
        lsp.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))

    def by_request(_token: str, msg_id: str) -> None:
        lsp.cancel_request(types.CancelParams(id=msg_id))

    error = await _cancelled_mid_search(lsp, by_token)
    assert error.code == REQUEST_CANCELLED
    assert "window/workDoneProgress/cancel" in error.message
    assert "no candidate was saved" in error.message
    error = await _cancelled_mid_search(lsp, by_request)
    assert error.code == REQUEST_CANCELLED

    assert await status(lsp, "cancel-1") == before  # no candidate, the same active program
    assert candidate_dirs(lsp, "cancel-1") == []  # nothing staged or half-written either
    info = await call(lsp, "fleet/debug/info", {})
    assert info["progressTokens"] == 0


def ended(lsp: LanguageClient, token: str) -> bool:
    return any(v["kind"] == "end" for v in values(lsp, token))


async def test_requests_are_answered_while_a_run_is_in_progress(lsp: LanguageClient) -> None:
    """Requests sent during a run are answered at once, before the run ends (the search's
    progress bars, written to stdout by a library, used to garble the protocol stream so the
    answer to the next request was lost); a second run of the same Session and a third run on
    the server are refused with a clear error, and the runs go on."""
    first = f"opt-{uuid.uuid4().hex[:6]}"
    running = start_optimize(
        lsp, {"sessionId": "cancel-1", "maxMetricCalls": 400, "workDoneToken": first}
    )
    await wait_for(
        lambda: any(v.get("phase") == "search" and v["done"] >= 1 for v in values(lsp, first))
    )
    before = await asyncio.wait_for(status(lsp, "cancel-1"), 15)
    for _ in range(3):  # across rollouts: each writes its progress bars while it runs
        assert await asyncio.wait_for(status(lsp, "cancel-1"), 15) == before
        listed = await asyncio.wait_for(call(lsp, "fleet/session/list", {}), 15)
        assert {"cancel-1", "research-1"} <= {s["sessionId"] for s in listed["sessions"]}
        done = max(v.get("done", 0) for v in values(lsp, first))
        await wait_for(lambda d=done: max(v.get("done", 0) for v in values(lsp, first)) > d)
    assert not running.done() and not ended(lsp, first)  # answered before the run's end

    again = await asyncio.wait_for(
        call_error(lsp, "fleet/optimize/run", {"sessionId": "cancel-1", "maxMetricCalls": 3}), 15
    )
    assert again.code == INVALID_PARAMS and again.data["kind"] == "InvalidInput"
    assert "An optimization of Session 'cancel-1' is already running" in again.message

    second = f"opt-{uuid.uuid4().hex[:6]}"
    other = start_optimize(
        lsp, {"sessionId": "research-1", "maxMetricCalls": 400, "workDoneToken": second}
    )
    await wait_for(lambda: values(lsp, second))  # begun: the server holds two runs now
    third = f"t-{uuid.uuid4().hex[:8]}"
    await call(lsp, "fleet/session/new", {"sessionId": third})
    limit = await asyncio.wait_for(
        call_error(lsp, "fleet/optimize/run", {"sessionId": third, "maxMetricCalls": 3}), 15
    )
    assert limit.code == INVALID_PARAMS and limit.data["kind"] == "InvalidInput"
    assert "2 optimizations are already running on this server (at most 2" in limit.message
    assert not running.done() and not other.done()  # the refusals left both runs going

    for token in (first, second):
        lsp.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))
    for future in (running, other):
        with pytest.raises(JsonRpcException) as info:
            await asyncio.wait_for(future, 60)
        assert info.value.code == REQUEST_CANCELLED
    assert (await status(lsp, "research-1"))["candidates"] == []
    assert candidate_dirs(lsp, "cancel-1") == candidate_dirs(lsp, "research-1") == []


async def test_run_reports_progress_then_approve_serves_the_candidate(
    lsp: LanguageClient,
) -> None:
    token = f"opt-{uuid.uuid4().hex[:6]}"
    run = plain(
        await asyncio.wait_for(
            start_optimize(
                lsp, {"sessionId": "research-1", "maxMetricCalls": 12, "workDoneToken": token}
            ),
            180,
        )
    )
    assert run["gatePassed"] is True, run["gate"]
    assert "rlm.generate_action" in run["changedComponents"]
    assert run["datasetSizes"]["holdout"] == 3 and run["rollouts"] >= 36
    assert {g["name"] for g in run["gate"]} >= {"critical", "dev_improved", "changed"}

    # progress: begin, the phases in order with rollouts done of the budget, best score, end
    sent = values(lsp, token)
    assert sent[0]["kind"] == "begin" and sent[0]["cancellable"] is True
    assert sent[-1] == {
        "kind": "end",
        "message": "done",
        "sessionId": "research-1",
        "version": run["version"],
    }
    reports = [v for v in sent if v["kind"] == "report"]
    phases = [r["phase"] for r in reports]
    assert phases.index("dataset") < phases.index("search") < phases.index("validation")
    search = [r for r in reports if r["phase"] == "search"]
    assert all(r["total"] == 12 for r in search)
    assert [r["done"] for r in search] == sorted(r["done"] for r in search)
    assert search[-1]["done"] >= 1 and "rollouts" in search[-1]["message"]
    assert search[-1]["bestScore"] == 1.0  # the best dev score the search reached
    validation = [r for r in reports if r["phase"] == "validation"]
    assert (validation[-1]["done"], validation[-1]["total"]) == (36, 36)
    assert validation[-1]["percentage"] == 100

    # saved inactive, listed with its gate verdict; the report opens as a read-only document
    found = await status(lsp, "research-1")
    [candidate] = found["candidates"]
    assert candidate["version"] == run["version"] and candidate["gatePassed"] is True
    assert candidate["active"] is False and found["activeVersion"] is None
    uri = f"fleet:/sessions/research-1/optimization/{run['version']}.md"
    assert candidate["reportUri"] == run["reportUri"] == uri
    doc = await lsp.protocol.send_request_async(
        types.WORKSPACE_TEXT_DOCUMENT_CONTENT, types.TextDocumentContentParams(uri=uri)
    )
    assert "| dev |" in doc.text and "rlm.generate_action" in doc.text
    read = await call(lsp, "fleet/artifact/read", {"uri": uri})
    assert read["text"] == doc.text and read["languageId"] == "markdown"
    refused = await call_error(
        lsp, "fleet/artifact/save", {"uri": uri, "target": (Path("/tmp") / "x.md").as_uri()}
    )
    assert refused.code == INVALID_PARAMS and "read-only" in refused.message

    before = await call(lsp, "fleet/turn/run", {"sessionId": "research-1", "task": "6 x 7?"})
    assert before["answer"] == "unknown"
    assert before["compiledProgramDigest"] == found["activeDigest"]
    approved = await call(
        lsp, "fleet/optimize/approve", {"sessionId": "research-1", "version": run["version"]}
    )
    assert approved["active"] is True
    assert approved["candidateDigest"] == run["candidateDigest"] != found["activeDigest"]
    after = await call(lsp, "fleet/turn/run", {"sessionId": "research-1", "task": "6 x 7?"})
    assert after["answer"] == "42"  # the next Turn serves the approved instruction
    assert after["compiledProgramDigest"] == run["candidateDigest"]
    found = await status(lsp, "research-1")
    assert found["activeVersion"] == run["version"]
    assert found["activeDigest"] == run["candidateDigest"]
    assert MARK not in str(found)  # status lists digests and verdicts, not program text
