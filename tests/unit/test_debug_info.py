"""``fleet/debug/info`` names a model endpoint by host, never with its credentials."""

from __future__ import annotations

from fleet_lsp.features.debug import endpoint_host


def test_endpoint_host_drops_credentials_and_query() -> None:
    shown = endpoint_host("https://user:s3cret@llm.example:8443/v1?key=abc")
    assert shown == "https://llm.example:8443/v1"
    assert endpoint_host("http://127.0.0.1:8080/v1") == "http://127.0.0.1:8080/v1"
    assert endpoint_host(None) is None
    assert endpoint_host("not a url") is None
