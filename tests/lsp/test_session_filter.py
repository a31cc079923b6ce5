"""``fleet/session/list`` filters over stdio (the real server): ownerHost, ownerUser and
updatedSince combine with AND and with paging; SessionInfo carries the owner; a bad instant is a
readable InvalidParams error; the feature is advertised."""

from __future__ import annotations

import getpass
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import pytest_asyncio
from pytest_lsp import LanguageClient

from fleet_core.store import Store
from fleet_core.store.database import database_url
from fleet_lsp.protocol import INVALID_PARAMS
from tests.lsp.conftest import call, call_error, close_client, start_client

pytestmark = pytest.mark.asyncio(loop_scope="module")
HOST = "lsp-filter-host"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def client(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[LanguageClient]:
    state = tmp_path_factory.mktemp("state")
    store = Store.open(database_url(None, state), state)  # another host's Sessions, stored first
    try:
        for n in range(4):
            store.create_session(f"other-{n}", "hybrid", owner=("other-host", "someone"))
    finally:
        store.close()
    started = await start_client("vscode", {"FLEET_STATE_DIR": str(state), "FLEET_HOST_NAME": HOST})
    yield started
    await close_client(started)


async def _pages(client: LanguageClient, params: dict[str, Any]) -> list[dict[str, Any]]:
    listed: list[dict[str, Any]] = []
    cursor = None
    while True:
        answer = await call(
            client, "fleet/session/list", params | ({"cursor": cursor} if cursor else {})
        )
        listed += answer["sessions"]
        cursor = answer.get("nextCursor")
        if cursor is None:
            return listed


async def test_the_filters_combine_with_and_and_with_paging(client: LanguageClient) -> None:
    caps = client.init_result  # type: ignore[attr-defined]
    features = caps.capabilities.experimental["fleet"]["features"]
    assert "sessions.filter" in features
    mine = [f"mine-{n}" for n in range(5)]
    for session_id in mine:
        made = await call(client, "fleet/session/new", {"sessionId": session_id})
        assert made["ownerHost"] == HOST and made["ownerUser"] == getpass.getuser()
    user = getpass.getuser()
    here = await _pages(client, {"ownerHost": HOST, "limit": 2})
    assert sorted(s["sessionId"] for s in here) == mine
    assert all(s["ownerHost"] == HOST for s in here)
    both = await _pages(client, {"ownerHost": HOST, "ownerUser": user, "limit": 2})
    assert sorted(s["sessionId"] for s in both) == mine
    assert await _pages(client, {"ownerHost": HOST, "ownerUser": "someone"}) == []
    theirs = await _pages(client, {"ownerUser": "someone"})
    assert sorted(s["sessionId"] for s in theirs) == [f"other-{n}" for n in range(4)]
    since = (datetime.now(UTC) - timedelta(minutes=10)).isoformat()
    assert len(await _pages(client, {"updatedSince": since, "limit": 3})) == 9
    later = "2999-01-01T00:00:00Z"
    assert await _pages(client, {"updatedSince": later}) == []
    everything = await call(client, "fleet/session/list", {})
    assert len(everything["sessions"]) == 9  # no filter: every host's Sessions


async def test_a_bad_instant_or_filter_is_a_readable_invalid_params_error(
    client: LanguageClient,
) -> None:
    error = await call_error(client, "fleet/session/list", {"updatedSince": "yesterday-ish"})
    assert error.code == INVALID_PARAMS and "updatedSince" in error.message
    error = await call_error(client, "fleet/session/list", {"ownerHost": 42})
    assert error.code == INVALID_PARAMS and "ownerHost" in error.message
    assert "sessions" in await call(client, "fleet/session/list", {})  # still answering
