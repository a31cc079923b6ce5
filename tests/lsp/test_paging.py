"""Paging of ``fleet/session/list`` and ``fleet/workspace/list`` over stdio, and attach refused
past the workspace's file-count quota (``sandbox.max_files``)."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from lsprotocol import types
from pytest_lsp import LanguageClient

from fleet_lsp.protocol import ERROR_CODES, INVALID_PARAMS
from tests.lsp.conftest import CLIENTS, call, call_error, close_client, plain, start_client

pytestmark = pytest.mark.asyncio(loop_scope="module")
MAX_FILES = 2_000  # the server's sandbox.max_files (an initialization setting)


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=CLIENTS)
async def paged(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[LanguageClient]:
    state = tmp_path_factory.mktemp("state")
    client = await start_client(
        request.param,
        {"FLEET_STATE_DIR": str(state)},
        settings={"sandbox": {"max_files": MAX_FILES}},
    )
    client.state_dir = state  # type: ignore[attr-defined]
    yield client
    await close_client(client)


def sid() -> str:
    return f"p-{uuid.uuid4().hex[:8]}"


async def _all_pages(
    client: LanguageClient, method: str, params: dict[str, Any], key: str
) -> tuple[list[list[Any]], list[dict[str, Any]]]:
    """Every page's items (``key``, plus ``artifacts`` for files) and the raw answers."""
    pages: list[list[Any]] = []
    answers: list[dict[str, Any]] = []
    cursor = None
    while True:
        answer = await call(client, method, params | ({"cursor": cursor} if cursor else {}))
        answers.append(answer)
        items = list(answer[key]) + list(answer.get("artifacts", []) if key == "files" else [])
        pages.append(items)
        cursor = answer.get("nextCursor")
        if cursor is None:
            return pages, answers
        assert len(pages) < 100, "paging does not end"


async def test_workspace_pages_concatenate_to_the_whole_sorted_listing(
    paged: LanguageClient,
) -> None:
    session_id = sid()
    await call(paged, "fleet/session/new", {"sessionId": session_id})
    root = paged.state_dir / "workspaces" / session_id  # type: ignore[attr-defined]
    expected = []
    for index in range(1_234):
        where = ("files/in", "files/in/deep", "artifacts/out", "memory")[index % 4]
        path = f"{where}/f{index:05}.txt"
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(str(index))
        expected.append(path)
    (root / "files" / "link").symlink_to("/etc/passwd")  # never listed

    first = await call(paged, "fleet/workspace/list", {"sessionId": session_id})
    assert len(first["files"]) + len(first["artifacts"]) == 500  # the default page
    assert first["nextCursor"]

    pages, answers = await _all_pages(
        paged, "fleet/workspace/list", {"sessionId": session_id, "limit": 100}, "files"
    )
    assert [len(page) for page in pages] == [100] * 12 + [34]
    listed = [f["path"] for page in pages for f in page]
    assert sorted(listed) == sorted(expected) and len(set(listed)) == len(listed)
    in_order = [f["path"] for a in answers for f in a["artifacts"] + a["files"]]
    assert in_order == sorted(expected)  # path order: artifacts/ first, then files/, memory/
    assert "nextCursor" not in answers[-1]
    some = next(f for page in pages for f in page if f["path"] == "files/in/f00000.txt")
    assert some["sizeBytes"] == 1 and len(some["sha256"]) == 64
    for answer in answers:  # a page is bounded by its limit, whatever the workspace holds
        assert len(json.dumps(answer)) < 100 * 200


async def test_session_pages_are_newest_first_without_duplicates(paged: LanguageClient) -> None:
    made = [sid() for _ in range(23)]
    for session_id in made:
        await call(paged, "fleet/session/new", {"sessionId": session_id})
    pages, answers = await _all_pages(paged, "fleet/session/list", {"limit": 5}, "sessions")
    listed = [s for page in pages for s in page]
    ids = [s["sessionId"] for s in listed]
    assert len(ids) == len(set(ids))
    assert set(made) <= set(ids)
    keys = [(s["updatedAt"], s["sessionId"]) for s in listed]
    assert keys == sorted(keys, reverse=True)
    assert all(len(page) == 5 for page in pages[:-1]) and 1 <= len(pages[-1]) <= 5
    assert "nextCursor" not in answers[-1]
    whole = await call(paged, "fleet/session/list", {})  # an old client: the first page
    assert [s["sessionId"] for s in whole["sessions"]] == ids[:100]
    command = plain(
        await paged.workspace_execute_command_async(
            types.ExecuteCommandParams(command="fleet.listSessions", arguments=[{"limit": 3}])
        )
    )
    assert [s["sessionId"] for s in command["sessions"]] == ids[:3] and command["nextCursor"]


async def test_a_bad_cursor_or_limit_is_a_readable_invalid_params_error(
    paged: LanguageClient,
) -> None:
    session_id = sid()
    await call(paged, "fleet/session/new", {"sessionId": session_id})
    for _other in range(3):
        await call(paged, "fleet/session/new", {"sessionId": sid()})
    good = (await call(paged, "fleet/session/list", {"limit": 1}))["nextCursor"]
    files = {"sessionId": session_id}
    for method, params in (
        ("fleet/session/list", {"cursor": "not-a-cursor"}),
        ("fleet/session/list", {"cursor": good[:-3] + "xyz"}),
        ("fleet/workspace/list", files | {"cursor": good}),  # another method's cursor
        ("fleet/workspace/list", files | {"cursor": "%%%"}),
    ):
        error = await call_error(paged, method, params)
        assert error.code == INVALID_PARAMS, (method, params)
        assert "Invalid cursor" in error.message and "nextCursor" in error.message, error.message
        assert "Traceback" not in error.message
    for method, params in (
        ("fleet/session/list", {"limit": 0}),
        ("fleet/session/list", {"limit": 501}),
        ("fleet/workspace/list", files | {"limit": 1001}),
        ("fleet/workspace/list", files | {"cursor": 7}),
    ):
        error = await call_error(paged, method, params)
        assert error.code == INVALID_PARAMS
        assert "'limit'" in error.message or "'cursor'" in error.message, error.message
    assert (await call(paged, "fleet/session/list", {"limit": 1}))["sessions"]  # still serving


async def test_attach_past_the_file_count_quota_is_refused_before_copying(
    paged: LanguageClient, tmp_path: Path
) -> None:
    session_id = sid()
    await call(paged, "fleet/session/new", {"sessionId": session_id})
    root = paged.state_dir / "workspaces" / session_id  # type: ignore[attr-defined]
    held = root / "artifacts" / "held"
    held.mkdir(parents=True)
    for index in range(MAX_FILES - 200):
        (held / str(index)).touch()
    folder = tmp_path / "big"
    folder.mkdir()
    for index in range(300):
        (folder / f"{index}.txt").write_text("x")
    error = await call_error(
        paged,
        "fleet/context/attach",
        {"sessionId": session_id, "uri": folder.as_uri(), "maxFiles": 1000},
    )
    assert error.code == ERROR_CODES["FileTooLarge"]
    assert "sandbox.max_files" in error.message and f"{MAX_FILES:,}" in error.message
    assert "nothing was attached" in error.message
    assert not (root / "files" / "big").exists()
    small = tmp_path / "small"
    small.mkdir()
    for index in range(20):
        (small / f"{index}.txt").write_text("y")
    done = await call(
        paged, "fleet/context/attach", {"sessionId": session_id, "uri": small.as_uri()}
    )
    assert len(done["files"]) == 20
    for index in range(MAX_FILES - 200, MAX_FILES):  # now past the quota (a cell's doing)
        (held / str(index)).touch()
    text = await call_error(
        paged,
        "fleet/context/attach",
        {"sessionId": session_id, "text": "x", "as": "files/one.txt"},
    )
    assert text.code == ERROR_CODES["FileTooLarge"] and "sandbox.max_files" in text.message
    assert not (root / "files" / "one.txt").exists()
    replaced = await call(  # overwriting a file adds no entry
        paged,
        "fleet/context/attach",
        {"sessionId": session_id, "text": "z", "as": "files/small/0.txt"},
    )
    assert replaced["path"] == "files/small/0.txt"
