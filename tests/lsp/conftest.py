"""pytest-lsp harness: the real server over stdio, VS Code-like and Neovim-like clients.

One server per test module and client kind (``scope="module"``); each test makes its own
Session, so tests stay independent while the suite spawns few processes.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

SERVER = [sys.executable, "-m", "fleet_lsp", "serve"]
CLIENTS = ["vscode", "neovim"]
REPO = Path(__file__).resolve().parents[2]
SALES = REPO / "fleet_lsp" / "examples" / "sales.csv"


def capabilities(kind: str) -> types.ClientCapabilities:
    if kind == "vscode":
        caps = client_capabilities("visual-studio-code")
        # VS Code with vscode-languageclient >= 10 declares the LSP 3.18 content provider.
        assert caps.workspace is not None
        caps.workspace.text_document_content = types.TextDocumentContentClientCapabilities(
            dynamic_registration=True
        )
        return caps
    return client_capabilities("neovim@v0.11.0")


async def start_client(
    kind: str,
    env: dict[str, str],
    *,
    turn_events: bool = True,
    settings: dict[str, Any] | None = None,
    options: dict[str, Any] | None = None,
) -> LanguageClient:
    """A client of a fresh server; ``options`` are more ``initializationOptions.fleet``."""
    config = ClientServerConfig(server_command=SERVER, server_env={**os.environ, **env})
    client = await config.start()
    assert isinstance(client, LanguageClient)
    client.fleet_events = []  # type: ignore[attr-defined]
    client.session_changes = []  # type: ignore[attr-defined]
    client.artifact_changes = []  # type: ignore[attr-defined]
    client.content_refreshes = []  # type: ignore[attr-defined]
    client.raw_progress = []  # type: ignore[attr-defined]

    @client.feature("fleet/turn/didEmit")
    def on_event(ls: LanguageClient, params: Any) -> None:
        ls.fleet_events.append(plain(params))  # type: ignore[attr-defined]

    @client.feature("fleet/session/didChange")
    def on_session(ls: LanguageClient, params: Any) -> None:
        ls.session_changes.append(plain(params))  # type: ignore[attr-defined]

    @client.feature("fleet/artifact/didChange")
    def on_artifact(ls: LanguageClient, params: Any) -> None:
        ls.artifact_changes.append(plain(params))  # type: ignore[attr-defined]

    if kind == "vscode":

        @client.feature(types.WORKSPACE_TEXT_DOCUMENT_CONTENT_REFRESH)
        def on_refresh(ls: LanguageClient, params: Any) -> None:
            ls.content_refreshes.append(params.uri)  # type: ignore[attr-defined]

    original = client.protocol.fm.features[types.PROGRESS]

    def capture(params: types.ProgressParams) -> Any:
        client.raw_progress.append(  # type: ignore[attr-defined]
            (params.token, plain(params.value), time.monotonic())
        )
        return original(params)

    client.protocol.fm.features[types.PROGRESS] = capture
    fleet: dict[str, Any] = {"protocolVersion": 1, "client": kind, "turnEvents": turn_events}
    if settings:
        fleet["settings"] = settings
    fleet.update(options or {})
    client.init_result = await client.initialize_session(  # type: ignore[attr-defined]
        types.InitializeParams(
            capabilities=capabilities(kind),
            root_uri=REPO.as_uri(),
            initialization_options={"fleet": fleet},
        )
    )
    return client


def plain(value: Any) -> Any:
    """Custom results and notifications arrive as namedtuples; compare them as JSON."""
    if isinstance(value, tuple) and hasattr(value, "_asdict"):
        return {k: plain(v) for k, v in value._asdict().items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


async def call(client: LanguageClient, method: str, params: Any) -> Any:
    return plain(await client.protocol.send_request_async(method, params))


def start_request(
    client: LanguageClient, method: str, params: dict[str, Any], msg_id: str | None = None
) -> asyncio.Future[Any]:
    """Send a request without awaiting it; its ``workDoneToken``'s reports are collected."""
    token = params.get("workDoneToken")
    if token is not None:
        client.progress_reports[token] = []
    return asyncio.ensure_future(client.protocol.send_request_async(method, params, msg_id=msg_id))


async def call_error(client: LanguageClient, method: str, params: Any) -> JsonRpcException:
    with pytest.raises(JsonRpcException) as info:
        await client.protocol.send_request_async(method, params)
    return info.value


#: How long a server may take to answer ``shutdown`` and end after ``exit``.
CLOSE_SECONDS = 60.0


async def close_client(client: LanguageClient, within: float = CLOSE_SECONDS) -> None:
    """``shutdown``, ``exit``, and the server process ended; one that has not ended
    ``within`` seconds is killed and the teardown fails (it would otherwise wait forever)."""
    try:
        await asyncio.wait_for(client.shutdown_session(), within)
    except TimeoutError:
        server = client._server
        if server is not None and server.returncode is None:
            server.kill()
        await client.stop()
        raise AssertionError(
            f"the server did not end within {within:g} s of shutdown and exit; it was killed"
        ) from None
    await client.stop()


def write_script(path: Path, script: dict[str, Any]) -> Path:
    path.write_text(json.dumps(script), encoding="utf-8")
    return path


async def scripted_lsp(
    kind: str, tmp_path_factory: pytest.TempPathFactory, script: dict[str, Any], name: str
) -> AsyncIterator[LanguageClient]:
    """A module's client of a server whose models follow ``script`` (``FLEET_TEST_SCRIPT``),
    on its own state dir; shut down afterwards. Use it as a fixture's body."""
    state = tmp_path_factory.mktemp("state")
    path = write_script(state.parent / f"{name}-{kind}.json", script)
    client = await start_client(
        kind, {"FLEET_STATE_DIR": str(state), "FLEET_TEST_SCRIPT": str(path)}
    )
    client.kind = kind  # type: ignore[attr-defined]
    yield client
    await close_client(client)


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=CLIENTS)
async def lsp(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[LanguageClient]:
    state = tmp_path_factory.mktemp("state")
    client = await start_client(request.param, {"FLEET_STATE_DIR": str(state)})
    client.kind = request.param  # type: ignore[attr-defined]
    client.state_dir = state  # type: ignore[attr-defined]
    yield client
    await close_client(client)
