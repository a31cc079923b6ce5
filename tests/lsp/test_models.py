"""Issue 10 over stdio, on SQLite and PostgreSQL: ``fleet/models/list`` from a local fake
OpenAI-style endpoint (cached, refreshed, then the offline error), ``fleet/session/setModels``
refusing endpoints and keys, the selection surviving a new server process over the same
database, and the next Turn's model calls using it (the scripted model submits the model id it
was called as; the events and the trace name it)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pytest_lsp import LanguageClient

from fleet_lsp.protocol import ERROR_CODES
from tests.fake_http import JsonHandler, serving
from tests.lsp.conftest import call, call_error, close_client, start_client, write_script

pytestmark = pytest.mark.asyncio

KEY = "sk-lsp-models-0123456789abcdef0123456789"
SCRIPT: dict[str, Any] = {"root": {"rules": {"MODELQ": {"submitModel": True}}}}
BACKENDS = [("vscode", "sqlite"), pytest.param(("neovim", "postgres"), marks=pytest.mark.postgres)]


class ModelsEndpoint(JsonHandler):
    """``GET /v1/models`` in OpenAI's shape; records each request's Authorization header."""

    seen: ClassVar[list[str | None]] = []
    lock = threading.Lock()

    def do_GET(self) -> None:
        with self.lock:
            self.seen.append(self.headers.get("Authorization"))
        if self.path != "/v1/models":
            self.send_json({"error": "not found"}, 404)
            return
        self.send_json(
            {
                "object": "list",
                "data": [
                    {"id": "gpt-x-small", "object": "model", "owned_by": "fleet-test"},
                    {"id": "gpt-x-large", "object": "model"},
                    {"id": "gpt-x-small", "object": "model"},  # a duplicate is dropped
                    {"object": "model"},  # no id: dropped
                ],
            }
        )


async def _stop(client: LanguageClient) -> None:
    await close_client(client)


@pytest.mark.parametrize("backend", BACKENDS)
async def test_models_listed_cached_refreshed_offline_and_a_selection_used_after_restart(
    backend: tuple[str, str], tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    kind, database = backend
    ModelsEndpoint.seen = []
    script = write_script(tmp_path / "models-script.json", SCRIPT)
    env = {
        "FLEET_STATE_DIR": str(tmp_path / "state"),
        "FLEET_TEST_SCRIPT": str(script),
        "FLEET_LM_API_KEY": KEY,
    }
    if database == "postgres":
        env["FLEET_DATABASE_URL"] = request.getfixturevalue("postgres_database")
    sid = f"models-{kind}"

    with serving(ModelsEndpoint) as endpoint:
        port = endpoint.server_address[1]
        env["FLEET_LM_API_BASE"] = f"http://127.0.0.1:{port}/v1"
        client = await start_client(kind, env)
        try:
            first = await call(client, "fleet/models/list", {})
            assert first["models"] == [
                {"id": "gpt-x-large", "ownedBy": None},
                {"id": "gpt-x-small", "ownedBy": "fleet-test"},
            ]
            assert first["cached"] is False and first["fetchedAt"]
            assert ModelsEndpoint.seen == [f"Bearer {KEY}"]  # the key as a bearer header

            again = await call(client, "fleet/models/list", {"refresh": False})
            assert again["cached"] is True and again["fetchedAt"] == first["fetchedAt"]
            assert len(ModelsEndpoint.seen) == 1  # answered from the cache
            fresh = await call(client, "fleet/models/list", {"refresh": True})
            assert fresh["cached"] is False and len(ModelsEndpoint.seen) == 2

            await call(client, "fleet/session/new", {"sessionId": sid, "mode": "rlm"})
            chosen = await call(
                client,
                "fleet/session/setModels",
                {"sessionId": sid, "root": "gpt-x-large", "sub": "gpt-x-small"},
            )
            assert chosen == {"sessionId": sid, "root": "gpt-x-large", "sub": "gpt-x-small"}
            for bad, says in (("https://api.example.com/v1", "endpoint URL"), (KEY, "API key")):
                refused = await call_error(
                    client, "fleet/session/setModels", {"sessionId": sid, "root": bad}
                )
                assert refused.code == ERROR_CODES["InvalidInput"]
                assert says in refused.message and bad not in refused.message
            missing = await call_error(
                client, "fleet/session/setModels", {"sessionId": "nope", "root": "gpt-x-large"}
            )
            assert missing.code == ERROR_CODES["SessionNotFound"]
        except BaseException:
            await _stop(client)
            raise

    # the endpoint is gone: the cache still answers; a refresh is a clear, keyless error
    try:
        cached = await call(client, "fleet/models/list", {})
        assert cached["cached"] is True
        offline = await call_error(client, "fleet/models/list", {"refresh": True})
        assert offline.code == ERROR_CODES["ModelUnavailable"]
        assert "127.0.0.1" in offline.message and "FLEET_LM_API_BASE" in offline.message
        assert KEY not in offline.message
    finally:
        await _stop(client)

    # a new server process over the same database: the selection is still there and used
    restarted = await start_client(kind, env)
    try:
        await call(restarted, "fleet/session/load", {"sessionId": sid})
        result = await call(restarted, "fleet/turn/run", {"sessionId": sid, "task": "MODELQ?"})
        assert result["status"] == "completed", result
        assert result["answer"] == "openai/gpt-x-large"  # the scripted model saw the selection
        events = restarted.fleet_events  # type: ignore[attr-defined]
        models = {
            e["payload"]["model"]
            for e in events
            if e["turnId"] == result["turnId"] and e["kind"] == "lm_start"
        }
        assert models == {"openai/gpt-x-large"}
        trace = await call(restarted, "fleet/trace/get", {"turnId": result["turnId"]})
        assert "openai/gpt-x-large" in trace["markdown"]  # the trace names the model

        cleared = await call(restarted, "fleet/session/setModels", {"sessionId": sid})
        assert cleared == {"sessionId": sid, "root": None, "sub": None}
    finally:
        await _stop(restarted)
