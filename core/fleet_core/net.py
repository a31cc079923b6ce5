"""Small network helpers shared by the core and the front ends (standard library only)."""

from __future__ import annotations

import ipaddress
import json
from typing import Any


def is_loopback_host(host: str) -> bool:
    """``localhost`` or a loopback IP address (``127.0.0.0/8``, ``::1``); names are not resolved."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class EndpointError(Exception):
    """A configured endpoint did not answer with usable JSON; ``reason`` is short, for a person,
    and never holds the key."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def http_get_json(
    url: str, key: str | None = None, *, timeout: float = 5.0, max_bytes: int = 4_000_000
) -> Any:
    """``GET url`` and its JSON body, or ``EndpointError`` saying why not: not 2xx, unreachable,
    slower than ``timeout``, larger than ``max_bytes`` or not JSON. ``key`` is sent as a bearer
    token (never shown); with a key, redirects are not followed. For configured endpoints only."""
    import urllib.error
    import urllib.request

    class NoRedirects(urllib.request.HTTPRedirectHandler):
        """A bearer key goes only to the configured address, never to where it redirects."""

        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None

    request = urllib.request.Request(url)  # noqa: S310 - http(s) checked by the config
    handlers: list[urllib.request.BaseHandler] = []
    if key:
        request.add_header("Authorization", f"Bearer {key}")
        handlers.append(NoRedirects())
    opener = urllib.request.build_opener(*handlers)
    try:
        with opener.open(request, timeout=timeout) as response:
            if not 200 <= response.status < 300:
                raise EndpointError(f"HTTP {response.status}")
            body = response.read(max_bytes + 1)
    except urllib.error.HTTPError as exc:
        if 300 <= exc.code < 400:
            raise EndpointError(
                f"HTTP {exc.code} (a redirect, not followed with a key: configure the final URL)"
            ) from None
        hint = " (check the API key)" if exc.code in (401, 403) else ""
        raise EndpointError(f"HTTP {exc.code}{hint}") from None
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise EndpointError(f"unreachable ({reason})") from None
    if len(body) > max_bytes:
        raise EndpointError(f"answered with more than {max_bytes:,} bytes")
    try:
        return json.loads(body or b"{}")
    except (ValueError, RecursionError):  # RecursionError: nested past the parser's depth
        raise EndpointError(
            "answered, but not with JSON (is this an OpenAI-compatible /v1 endpoint?)"
        ) from None


def http_probe(url: str, key: str | None = None, *, timeout: float = 5.0) -> str:
    """'' when ``url`` answers 2xx with JSON within ``timeout``, else a short reason (``key`` is
    sent as a bearer token and never shown). For ``doctor``-style checks of configured
    endpoints only."""
    try:
        http_get_json(url, key, timeout=timeout)
    except EndpointError as exc:
        return exc.reason
    return ""
