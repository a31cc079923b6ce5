"""Issue 13 (attach) over stdio: FIFOs, pseudo-files and devices are refused promptly with
InvalidInput, the server's environment never reaches the workspace, the server keeps answering
and still exits, and a planted symlink can be deleted."""

from __future__ import annotations

import asyncio
import os
import socket
import stat
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient

from fleet_lsp.protocol import ERROR_CODES
from tests.lsp.conftest import SALES, call, close_client, start_client

pytestmark = pytest.mark.asyncio(loop_scope="module")

CANARY = "canary-lsp-environ-3b9f51a7"
PROMPT = 15.0  # seconds: a refusal is immediate; a blocked open would never answer


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def lsp(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[LanguageClient]:
    state = tmp_path_factory.mktemp("state")
    client = await start_client("neovim", {"FLEET_STATE_DIR": str(state), "FLEET_CANARY": CANARY})
    client.state_dir = state  # type: ignore[attr-defined]
    yield client
    # the server still shuts down and exits (a FIFO attach used to keep it alive forever)
    await close_client(client, PROMPT)


async def _session(lsp: LanguageClient) -> str:
    session_id = f"a-{uuid.uuid4().hex[:8]}"
    await call(lsp, "fleet/session/new", {"sessionId": session_id})
    return session_id


async def _refused(
    lsp: LanguageClient, session_id: str, source: Path, fifo: Path | None = None
) -> JsonRpcException:
    """The attach error, which must come within PROMPT seconds."""
    request = lsp.protocol.send_request_async(
        "fleet/context/attach", {"sessionId": session_id, "uri": source.as_uri()}
    )
    try:
        await asyncio.wait_for(asyncio.shield(request), PROMPT)
    except JsonRpcException as exc:
        return exc
    except TimeoutError:
        if fifo is not None:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # unblock the server's reader
        pytest.fail(f"attaching {source} got no answer in {PROMPT} s")
    pytest.fail(f"attaching {source} was accepted")


def _files_containing(state: Path, needle: bytes) -> list[Path]:
    return [
        path
        for path in state.rglob("*")
        if path.is_file() and not path.is_symlink() and needle in path.read_bytes()
    ]


async def _assert_nothing_attached(lsp: LanguageClient, session_id: str) -> None:
    listing = await call(lsp, "fleet/workspace/list", {"sessionId": session_id})
    assert listing == {"files": [], "artifacts": []}


async def test_attaching_a_fifo_is_refused_promptly(lsp: LanguageClient, tmp_path: Path) -> None:
    session_id = await _session(lsp)
    fifo = tmp_path / "data.csv"
    os.mkfifo(fifo)
    error = await _refused(lsp, session_id, fifo, fifo)
    assert error.code == ERROR_CODES["InvalidInput"] == -32602
    assert "named pipe (FIFO)" in error.message and "only regular files" in error.message
    await _assert_nothing_attached(lsp, session_id)
    assert "sessions" in await call(lsp, "fleet/session/list", {})  # still answering


async def test_attaching_proc_self_environ_is_refused_and_leaks_nothing(
    lsp: LanguageClient,
) -> None:
    session_id = await _session(lsp)
    for source in ("/proc/self/environ", "/proc/self/cmdline", "/proc/1/environ"):
        error = await _refused(lsp, session_id, Path(source))
        assert error.code == -32602, source
        assert "pseudo-filesystem" in error.message, error.message
        assert CANARY not in error.message
    await _assert_nothing_attached(lsp, session_id)
    assert _files_containing(lsp.state_dir, CANARY.encode()) == []  # type: ignore[attr-defined]


async def test_attaching_devices_and_sockets_is_refused(
    lsp: LanguageClient, tmp_path: Path
) -> None:
    session_id = await _session(lsp)
    for source in ("/dev/zero", "/dev/null"):
        error = await _refused(lsp, session_id, Path(source))
        assert error.code == -32602 and "pseudo-filesystem" in error.message, error.message
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(str(tmp_path / "s.sock"))
        error = await _refused(lsp, session_id, tmp_path / "s.sock")
        assert error.code == -32602 and "socket" in error.message, error.message
    finally:
        listener.close()
    await _assert_nothing_attached(lsp, session_id)
    attached = await call(
        lsp, "fleet/context/attach", {"sessionId": session_id, "uri": SALES.as_uri()}
    )
    assert attached["path"] == "files/sales.csv"  # the Session is still usable


async def test_a_planted_symlink_is_deleted_not_its_target(
    lsp: LanguageClient, tmp_path: Path
) -> None:
    session_id = await _session(lsp)
    state: Path = lsp.state_dir  # type: ignore[attr-defined]
    root = state / "workspaces" / session_id
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    target = tmp_path / "host.txt"
    target.write_text("host")
    (root / "artifacts" / "planted.txt").symlink_to(target)
    await call(
        lsp, "fleet/workspace/delete", {"sessionId": session_id, "path": "artifacts/planted.txt"}
    )
    assert not (root / "artifacts" / "planted.txt").is_symlink()
    assert target.read_text() == "host"


async def test_attaching_a_pseudo_filesystem_folder_copies_nothing(lsp: LanguageClient) -> None:
    session_id = await _session(lsp)
    for folder in ("/proc/self", "/dev"):
        error = await _refused(lsp, session_id, Path(folder))
        assert error.code in (-32602, ERROR_CODES["FileTooLarge"]), (folder, error.message)
    await _assert_nothing_attached(lsp, session_id)
    assert _files_containing(lsp.state_dir, CANARY.encode()) == []  # type: ignore[attr-defined]
