"""Model discovery (``fleet_core.engine.discovery``) against a local fake endpoint: the cache's
lifetime on an injected clock, the bounds, malformed answers, and the key kept to the endpoint."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, ClassVar

import pytest

from fleet_core.config import EffectiveConfig, load_config
from fleet_core.engine import discovery
from fleet_core.engine.discovery import ModelDiscovery
from fleet_core.errors import ModelUnavailable
from tests.fake_http import JsonHandler, serving

KEY = "sk-unit-discovery-0123456789abcdef01234567"


class Endpoint(JsonHandler):
    body: ClassVar[Any] = {"data": [{"id": "b"}, {"id": "a", "owned_by": "o"}]}
    auth: ClassVar[list[str | None]] = []
    lock = threading.Lock()

    def do_GET(self) -> None:
        with self.lock:
            self.auth.append(self.headers.get("Authorization"))
        if self.path == "/redirect/v1/models":
            self.send_response(302)
            self.send_header("Location", "/v1/models")
            self.end_headers()
            return
        self.send_json(self.body)


@pytest.fixture
def endpoint() -> Any:
    Endpoint.body = {"data": [{"id": "b"}, {"id": "a", "owned_by": "o"}]}
    Endpoint.auth = []
    with serving(Endpoint) as server:
        yield f"http://127.0.0.1:{server.server_address[1]}"


def _config(tmp_path: Path, base: str, key: str | None = KEY) -> EffectiveConfig:
    environ = {"FLEET_STATE_DIR": str(tmp_path), "FLEET_LM_API_BASE": base}
    if key:
        environ["FLEET_LM_API_KEY"] = key
    return load_config(environ=environ, cwd=tmp_path)


def test_cached_for_the_ttl_then_asked_again(endpoint: str, tmp_path: Path) -> None:
    now = [1000.0]
    found = ModelDiscovery(ttl_seconds=60, clock=lambda: now[0])
    config = _config(tmp_path, endpoint + "/v1")
    first = found.list(config)
    assert [(m.id, m.owned_by) for m in first.models] == [("a", "o"), ("b", None)]
    assert first.cached is False and Endpoint.auth == [f"Bearer {KEY}"]
    now[0] += 59
    second = found.list(config)
    assert second.cached is True and second.fetched_at == first.fetched_at
    assert len(Endpoint.auth) == 1
    now[0] += 2  # past the TTL
    assert found.list(config).cached is False and len(Endpoint.auth) == 2
    assert found.list(config, refresh=True).cached is False and len(Endpoint.auth) == 3


def test_without_a_key_no_authorization_header_is_sent(endpoint: str, tmp_path: Path) -> None:
    ModelDiscovery().list(_config(tmp_path, endpoint + "/v1", key=None))
    assert Endpoint.auth == [None]


def test_a_redirect_is_not_followed_with_the_key(endpoint: str, tmp_path: Path) -> None:
    with pytest.raises(ModelUnavailable, match="redirect") as refused:
        ModelDiscovery().list(_config(tmp_path, endpoint + "/redirect/v1"))
    assert Endpoint.auth == [f"Bearer {KEY}"]  # only the configured address saw it
    assert KEY not in refused.value.message


def test_the_answer_is_bounded(
    endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    Endpoint.body = {
        "data": [{"id": f"m{n:04d}"} for n in range(1_500)]
        + [{"id": "x" * 201}, "junk", {"id": 7}, {"id": "  "}, {"id": "m0001"}]
    }
    listed = ModelDiscovery().list(_config(tmp_path, endpoint + "/v1"))
    assert len(listed.models) == discovery.MAX_MODELS == 1_000
    assert listed.models[0].id == "m0000" and all(len(m.id) <= 200 for m in listed.models)

    monkeypatch.setattr(discovery, "MAX_RESPONSE_BYTES", 1_000)
    with pytest.raises(ModelUnavailable, match="more than 1,000 bytes"):
        ModelDiscovery().list(_config(tmp_path, endpoint + "/v1"))


@pytest.mark.parametrize("body", [{"object": "list"}, "models", 3])
def test_an_answer_without_a_model_list_is_a_clear_error(
    endpoint: str, tmp_path: Path, body: Any
) -> None:
    Endpoint.body = body
    with pytest.raises(ModelUnavailable, match="without a model list"):
        ModelDiscovery().list(_config(tmp_path, endpoint + "/v1"))


def test_unconfigured_and_plain_http_to_a_remote_host_are_refused(tmp_path: Path) -> None:
    bare = load_config(environ={"FLEET_STATE_DIR": str(tmp_path)}, cwd=tmp_path)
    with pytest.raises(ModelUnavailable, match="No model endpoint is configured"):
        ModelDiscovery().list(bare)
    with pytest.raises(ModelUnavailable, match="must use https"):
        ModelDiscovery().list(_config(tmp_path, "http://models.example.com/v1"))


def test_json_nested_past_the_parsers_depth_is_a_clear_error(tmp_path: Path) -> None:
    class Nested(JsonHandler):
        def do_GET(self) -> None:
            data = b"[" * 200_000 + b"]" * 200_000  # under the byte bound, too deep to parse
            self.send_response(200)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    with serving(Nested) as server:
        config = _config(tmp_path, f"http://127.0.0.1:{server.server_address[1]}/v1")
        with pytest.raises(ModelUnavailable, match="not with JSON"):
            ModelDiscovery().list(config)
