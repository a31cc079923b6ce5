"""Small network helpers shared by the core and the front ends (standard library only)."""

from __future__ import annotations

import ipaddress
import json


def is_loopback_host(host: str) -> bool:
    """``localhost`` or a loopback IP address (``127.0.0.0/8``, ``::1``); names are not resolved."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def http_probe(url: str, key: str | None = None, *, timeout: float = 5.0) -> str:
    """'' when ``url`` answers 2xx with JSON within ``timeout``, else a short reason (``key`` is
    sent as a bearer token and never shown). For ``doctor``-style checks of configured
    endpoints only."""
    import urllib.error
    import urllib.request

    request = urllib.request.Request(url)  # noqa: S310 - http(s) checked by the config
    if key:
        request.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
            if 200 <= response.status < 300:
                json.loads(response.read(1_000_000) or b"{}")
                return ""
            return f"HTTP {response.status}"
    except urllib.error.HTTPError as exc:
        return f"HTTP {exc.code}" + (" (check the API key)" if exc.code in (401, 403) else "")
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        return f"unreachable ({reason})"
    except ValueError:
        return "answered, but not with JSON (is this an OpenAI-compatible /v1 endpoint?)"
