"""Sessions, context, workspace, artifacts as documents, errors: end to end over stdio."""

from __future__ import annotations

import hashlib
import uuid
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from fleet_lsp.protocol import COMMANDS, ERROR_CODES, FEATURES, METHODS, wire_fields
from tests.lsp.conftest import SALES, call, call_error

pytestmark = pytest.mark.asyncio(loop_scope="module")


def sid() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


async def test_initialize_advertises_fleet(lsp: LanguageClient) -> None:
    result = lsp.init_result  # type: ignore[attr-defined]
    assert result.server_info.name == "fleet-lsp"
    fleet = result.capabilities.experimental["fleet"]
    assert fleet["protocolVersion"] == 1
    assert set(fleet["features"]) == set(FEATURES)
    assert set(result.capabilities.execute_command_provider.commands) == set(COMMANDS)
    assert list(result.capabilities.workspace.text_document_content.schemes) == ["fleet"]


async def test_session_lifecycle(lsp: LanguageClient) -> None:
    session_id = sid()
    info = await call(lsp, "fleet/session/new", {"sessionId": session_id, "mode": "rlm"})
    assert info["sessionId"] == session_id
    assert info["mode"] == "rlm"
    assert info["turnCount"] == 0
    assert {"createdAt", "updatedAt"} <= set(info)
    listed = await call(lsp, "fleet/session/list", {})
    assert session_id in [s["sessionId"] for s in listed["sessions"]]
    changed = await call(lsp, "fleet/session/setMode", {"sessionId": session_id, "mode": "flex"})
    assert changed["mode"] == "flex"
    assert await call(lsp, "fleet/session/close", {"sessionId": session_id}) is None
    loaded = await call(lsp, "fleet/session/load", {"sessionId": session_id})
    assert loaded["mode"] == "flex"
    history = await call(lsp, "fleet/session/history", {"sessionId": session_id, "limit": 5})
    assert history == {"turns": []}
    changes = [(c["sessionId"], c["change"]) for c in lsp.session_changes]  # type: ignore[attr-defined]
    assert (session_id, "created") in changes
    assert (session_id, "closed") in changes


async def test_attach_dataset_workspace(lsp: LanguageClient, tmp_path: Path) -> None:
    session_id = sid()
    await call(lsp, "fleet/session/new", {"sessionId": session_id})
    attached = await call(
        lsp, "fleet/context/attach", {"sessionId": session_id, "uri": SALES.as_uri()}
    )
    digest = hashlib.sha256(SALES.read_bytes()).hexdigest()
    assert attached == {
        "path": "files/sales.csv",
        "sizeBytes": SALES.stat().st_size,
        "sha256": digest,
    }
    dataset = await call(
        lsp,
        "fleet/context/setDataset",
        {"sessionId": session_id, "path": "files/sales.csv", "description": "orders"},
    )
    assert dataset["sha256"] == digest
    assert dataset["description"] == "orders"
    info = await call(lsp, "fleet/session/load", {"sessionId": session_id})
    assert info["dataset"]["path"] == "files/sales.csv"
    # a selection and a folder (with ignore rules)
    await call(
        lsp,
        "fleet/context/attach",
        {"sessionId": session_id, "text": "print(1)\n", "as": "files/snippet.py"},
    )
    folder = tmp_path / "proj"
    (folder / "src").mkdir(parents=True)
    (folder / "src" / "a.py").write_text("a = 1\n")
    (folder / "notes.md").write_text("# notes\n")
    (folder / "node_modules").mkdir()
    (folder / "node_modules" / "x.js").write_text("x")
    (folder / "big.log").write_text("log\n")
    result = await call(
        lsp,
        "fleet/context/attach",
        {"sessionId": session_id, "uri": folder.as_uri(), "exclude": ["*.log"]},
    )
    assert sorted(f["path"] for f in result["files"]) == [
        "files/proj/notes.md",
        "files/proj/src/a.py",
    ]
    assert "node_modules/" in result["skipped"] and "big.log" in result["skipped"]
    bounded = await call_error(
        lsp,
        "fleet/context/attach",
        {"sessionId": session_id, "uri": folder.as_uri(), "maxFiles": 1},
    )
    assert bounded.code == ERROR_CODES["FileTooLarge"]
    listing = await call(lsp, "fleet/workspace/list", {"sessionId": session_id})
    paths = {f["path"] for f in listing["files"]}
    assert {"files/sales.csv", "files/snippet.py", "files/proj/src/a.py"} <= paths
    assert listing["artifacts"] == []
    assert (
        await call(
            lsp, "fleet/workspace/delete", {"sessionId": session_id, "path": "files/snippet.py"}
        )
        is None
    )
    await call(lsp, "fleet/context/clearDataset", {"sessionId": session_id})
    info = await call(lsp, "fleet/session/load", {"sessionId": session_id})
    assert "dataset" not in info


async def _session_with_artifacts(lsp: LanguageClient, tmp_path: Path) -> str:
    session_id = sid()
    await call(lsp, "fleet/session/new", {"sessionId": session_id})
    await call(
        lsp,
        "fleet/context/attach",
        {"sessionId": session_id, "uri": SALES.as_uri(), "as": "artifacts/out/sales copy.csv"},
    )
    blob = tmp_path / "blob.bin"
    blob.write_bytes(bytes(range(256)) * 8)
    await call(
        lsp,
        "fleet/context/attach",
        {"sessionId": session_id, "uri": blob.as_uri(), "as": "artifacts/blob.bin"},
    )
    return session_id


async def test_artifacts_as_documents(lsp: LanguageClient, tmp_path: Path) -> None:
    session_id = await _session_with_artifacts(lsp, tmp_path)
    listed = await call(lsp, "fleet/artifact/list", {"sessionId": session_id})
    uris = {a["path"]: a["uri"] for a in listed["artifacts"]}
    uri = uris["artifacts/out/sales copy.csv"]
    assert uri == f"fleet:/sessions/{session_id}/artifacts/out/sales%20copy.csv"
    # the LSP 3.18 route
    content = await lsp.workspace_text_document_content_async(
        types.TextDocumentContentParams(uri=uri)
    )
    assert content.text == SALES.read_text()
    # the fallback route, including the fleet:/// form some clients produce
    read = await call(lsp, "fleet/artifact/read", {"uri": uri.replace("fleet:/", "fleet:///")})
    assert read["text"] == SALES.read_text()
    assert read["languageId"] == "csv"
    assert read["binary"] is False
    assert read["sha256"] == hashlib.sha256(SALES.read_bytes()).hexdigest()
    binary = await call(lsp, "fleet/artifact/read", {"uri": uris["artifacts/blob.bin"]})
    assert binary["binary"] is True
    assert "2,048 bytes" in binary["text"] and binary["sha256"] in binary["text"]
    # open asks the client to show it
    opened = await call(lsp, "fleet/artifact/open", {"uri": uri})
    assert opened["shown"] is True
    assert lsp.shown_documents[-1].uri == uri
    # save next to the user
    target = tmp_path / "saved.csv"
    saved = await call(lsp, "fleet/artifact/save", {"uri": uri, "target": target.as_uri()})
    assert target.read_bytes() == SALES.read_bytes()
    assert saved["sizeBytes"] == SALES.stat().st_size


async def test_commands_wrap_requests(lsp: LanguageClient, tmp_path: Path) -> None:
    session_id = sid()
    info = await lsp.workspace_execute_command_async(
        types.ExecuteCommandParams(
            command="fleet.newSession", arguments=[{"sessionId": session_id}]
        )
    )
    assert info["sessionId"] == session_id
    attached = await lsp.workspace_execute_command_async(
        types.ExecuteCommandParams(
            command="fleet.attachFile", arguments=[{"sessionId": session_id, "uri": SALES.as_uri()}]
        )
    )
    assert attached["path"] == "files/sales.csv"
    debug = await lsp.workspace_execute_command_async(
        types.ExecuteCommandParams(command="fleet.printDebugInformation", arguments=[{}])
    )
    assert debug["protocolVersion"] == 1
    assert "FLEET_LM_API_KEY" in debug["secrets"]
    with pytest.raises(Exception, match="one object argument"):
        await lsp.workspace_execute_command_async(
            types.ExecuteCommandParams(command="fleet.setMode", arguments=[{}, {}])
        )


# Minimal valid params per method, so each malformed case differs in exactly one way.
VALID: dict[str, dict[str, Any]] = {
    "fleet/session/new": {},
    "fleet/session/list": {},
    "fleet/turn/cancel": {"turnId": "x"},
    "fleet/artifact/read": {"uri": "fleet:/sessions/a/artifacts/x"},
    "fleet/artifact/open": {"uri": "fleet:/sessions/a/artifacts/x"},
    "fleet/artifact/save": {"uri": "fleet:/sessions/a/artifacts/x", "target": "file:///tmp/x"},
    "fleet/trace/get": {"traceId": "x"},
    "fleet/trace/label": {"traceId": "x", "status": "approved"},
    "fleet/memory/add": {"sessionId": "s1", "content": "c"},
    "fleet/debug/info": {},
}


def malformed_cases() -> list[tuple[str, Any, str]]:
    cases: list[tuple[str, Any, str]] = []
    for method, cls in METHODS.items():
        cases.append((method, [1, 2], "params must be a JSON object"))
        for name in wire_fields(cls):
            valid = VALID.get(
                method,
                {
                    "sessionId": "s1",
                    "task": "t",
                    "mode": "rlm",
                    "path": "files/x",
                    "turnId": "t",
                    "memoryId": "m",
                    "uri": "file:///x",
                },
            )
            bad = (
                {**valid, name: {"not": "a scalar"}}
                if name not in ("values", "expectations")
                else {**valid, name: 3}
            )
            cases.append((method, bad, f"'{name}'"))
    return cases


async def test_malformed_params_on_every_method(lsp: LanguageClient) -> None:
    for method, params, needle in malformed_cases():
        error = await call_error(lsp, method, params)
        assert error.code == -32602, (method, params, error)
        assert needle in error.message, (method, params, error.message)
        assert method in error.message
    # required fields, wrong enum values
    error = await call_error(lsp, "fleet/session/load", {})
    assert error.message == "fleet/session/load: 'sessionId' is required (a string)"
    error = await call_error(lsp, "fleet/session/new", {"mode": "turbo"})
    assert "'mode' must be one of: 'hybrid', 'rlm', 'flex'" in error.message
    # the server keeps serving
    assert "sessions" in await call(lsp, "fleet/session/list", {})


async def test_error_kinds_map_to_codes(lsp: LanguageClient) -> None:
    missing = await call_error(lsp, "fleet/session/load", {"sessionId": "no-such-session"})
    assert missing.code == ERROR_CODES["SessionNotFound"] == -32050
    assert missing.data["kind"] == "SessionNotFound"
    assert "no-such-session" in missing.message
    session_id = sid()
    await call(lsp, "fleet/session/new", {"sessionId": session_id})
    exists = await call_error(lsp, "fleet/session/new", {"sessionId": session_id})
    assert exists.code == ERROR_CODES["SessionExists"]
    traversal = await call_error(
        lsp, "fleet/context/setDataset", {"sessionId": session_id, "path": "files/../../etc/passwd"}
    )
    assert traversal.code == ERROR_CODES["WorkspacePath"]
    assert traversal.data["kind"] == "WorkspacePath"
    bad_id = await call_error(lsp, "fleet/session/new", {"sessionId": "../evil"})
    assert bad_id.code == -32602 and bad_id.data["kind"] == "InvalidInput"
    bad_uri = await call_error(lsp, "fleet/artifact/read", {"uri": "file:///etc/passwd"})
    assert bad_uri.code == -32602
    no_file = await call_error(
        lsp, "fleet/artifact/read", {"uri": f"fleet:/sessions/{session_id}/artifacts/nope.csv"}
    )
    assert no_file.code == ERROR_CODES["WorkspaceFileNotFound"]
    no_turn = await call_error(lsp, "fleet/turn/cancel", {"turnId": "nope"})
    assert no_turn.code == ERROR_CODES["TurnNotFound"]
    no_trace = await call_error(lsp, "fleet/trace/get", {"traceId": "nope"})
    assert no_trace.code == ERROR_CODES["TraceNotFound"]
