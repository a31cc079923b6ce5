"""``initializationOptions`` over stdio: good options are applied, a bad one is ignored (its
default applies) and the person is warned with a message naming it."""

from __future__ import annotations

import asyncio
from pathlib import Path

from lsprotocol import types

from tests.lsp.conftest import call, close_client, start_client


async def test_a_bad_option_is_reported_and_the_good_ones_are_applied(tmp_path: Path) -> None:
    client = await start_client(
        "neovim",
        {"FLEET_STATE_DIR": str(tmp_path / "state")},
        settings={"runtime.max_agent_depth": 2},
        options={"turnEvents": "yes"},
    )
    try:
        for _ in range(200):  # sent once the client is initialized
            if client.messages:
                break
            await asyncio.sleep(0.05)
        assert [(m.type, m.message) for m in client.messages] == [
            (
                types.MessageType.Warning,
                "Fleet ignored an initialization option: "
                "'initializationOptions.fleet.turnEvents' must be true or false, got a string; "
                "using false instead",
            )
        ]
        info = await call(client, "fleet/debug/info", {})
        assert info["client"]["name"] == "neovim"
        assert info["client"]["turnEvents"] is False  # the default, as before
        # (the test client renames dotted keys: look for the one override among the values)
        overrides = [v for v in info["settings"].values() if v["source"] == "override"]
        assert overrides == [{"value": 2, "source": "override"}]  # runtime.max_agent_depth
        assert client.fleet_events == []  # type: ignore[attr-defined]
    finally:
        await close_client(client)
