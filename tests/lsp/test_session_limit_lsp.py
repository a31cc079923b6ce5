"""Issue 10 over stdio: the Session past ``runtime.max_active_sessions`` is refused with an
error that names the setting; closing a Session frees its slot."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from pytest_lsp import LanguageClient

from fleet_lsp.protocol import ERROR_CODES
from tests.lsp.conftest import call, call_error, close_client, start_client

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def lsp(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[LanguageClient]:
    state = tmp_path_factory.mktemp("state")
    env = {"FLEET_STATE_DIR": str(state), "FLEET_MAX_ACTIVE_SESSIONS": "2"}
    client = await start_client("neovim", env)
    yield client
    await close_client(client)


async def test_the_session_past_the_limit_is_refused_and_close_frees_a_slot(
    lsp: LanguageClient,
) -> None:
    await call(lsp, "fleet/session/new", {"sessionId": "lim-a"})
    await call(lsp, "fleet/session/new", {"sessionId": "lim-b"})
    error = await call_error(lsp, "fleet/session/new", {"sessionId": "lim-c"})
    assert error.code == ERROR_CODES["SessionLimit"] == -32072
    assert "max_active_sessions" in error.message, error.message
    listed = await call(lsp, "fleet/session/list", {})
    assert "lim-c" not in {s["sessionId"] for s in listed["sessions"]}

    await call(lsp, "fleet/session/close", {"sessionId": "lim-a"})
    created = await call(lsp, "fleet/session/new", {"sessionId": "lim-c"})
    assert created["sessionId"] == "lim-c"
    error = await call_error(lsp, "fleet/session/load", {"sessionId": "lim-a"})
    assert "max_active_sessions" in error.message


async def test_the_65th_session_is_refused_at_the_default_setting(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    state = tmp_path_factory.mktemp("state-default")
    client = await start_client("vscode", {"FLEET_STATE_DIR": str(state)})
    try:
        for n in range(64):
            await call(client, "fleet/session/new", {"sessionId": f"d{n}"})
        error = await call_error(client, "fleet/session/new", {"sessionId": "d64"})
        assert error.code == ERROR_CODES["SessionLimit"]
        assert "runtime.max_active_sessions = 64" in error.message, error.message
        await call(client, "fleet/session/close", {"sessionId": "d0"})
        assert (await call(client, "fleet/session/new", {"sessionId": "d64"}))["sessionId"] == "d64"
    finally:
        await close_client(client)
