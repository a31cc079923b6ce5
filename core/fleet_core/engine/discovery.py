"""Model discovery: the configured endpoint's ``GET /models`` (OpenAI-compatible), cached briefly.

``FleetRuntime`` owns one ``ModelDiscovery`` (no global state). The answer is bounded (bytes,
entries, id length) and cached for ``ttl_seconds`` per endpoint; ``refresh`` asks again. An
endpoint that is unconfigured, unreachable or answers nonsense is a ``ModelUnavailable`` that
names the endpoint's host and what to set, never the key. Standard library only (no dspy).
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from fleet_core.config import EffectiveConfig
from fleet_core.engine.lm import MAX_MODEL_ID_CHARS, models_endpoint
from fleet_core.errors import ModelUnavailable
from fleet_core.models import ModelEntry, ModelList
from fleet_core.net import EndpointError, http_get_json

MODELS_TTL_SECONDS = 60.0
MAX_MODELS = 1_000  # entries kept from one answer (sorted by id)
MAX_RESPONSE_BYTES = 4_000_000
MAX_OWNER_CHARS = 200
REQUEST_TIMEOUT_SECONDS = 10.0

Fetch = Callable[..., Any]


@dataclass(frozen=True, slots=True)
class _Cached:
    models: tuple[ModelEntry, ...]
    fetched_at: datetime
    at: float  # the clock's reading when fetched


class ModelDiscovery:
    """The endpoint's model list with a short per-endpoint cache (thread-safe)."""

    def __init__(
        self,
        *,
        ttl_seconds: float = MODELS_TTL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        fetch: Fetch = http_get_json,
    ) -> None:
        self._ttl = ttl_seconds
        self._clock = clock
        self._fetch = fetch
        self._cache: dict[str, _Cached] = {}  # one entry per endpoint (and key) in use
        self._lock = threading.Lock()

    def list(self, config: EffectiveConfig, *, refresh: bool = False) -> ModelList:
        """The models of ``config``'s endpoint: from the cache unless stale or ``refresh``."""
        api_base, key = models_endpoint(config)
        slot = hashlib.sha256(f"{api_base}\0{key or ''}".encode()).hexdigest()
        with self._lock:
            found = self._cache.get(slot)
        if found is not None and not refresh and self._clock() - found.at < self._ttl:
            return ModelList(models=list(found.models), cached=True, fetched_at=found.fetched_at)
        host = urlsplit(api_base).hostname or api_base
        try:
            body = self._fetch(
                api_base + "/models",
                key,
                timeout=REQUEST_TIMEOUT_SECONDS,
                max_bytes=MAX_RESPONSE_BYTES,
            )
        except EndpointError as exc:
            raise ModelUnavailable(
                f"The model endpoint at {host} did not list its models: {exc.reason}; check "
                "FLEET_LM_API_BASE, FLEET_LM_API_KEY and that the endpoint is up",
                endpoint=host,
            ) from None
        models = parse_models(body, host)
        fresh = _Cached(tuple(models), datetime.now(UTC), self._clock())
        with self._lock:
            self._cache = {k: v for k, v in self._cache.items() if self._fresh(v)}
            self._cache[slot] = fresh
        return ModelList(models=models, cached=False, fetched_at=fresh.fetched_at)

    def _fresh(self, entry: _Cached) -> bool:
        return self._clock() - entry.at < self._ttl


def parse_models(body: Any, host: str) -> list[ModelEntry]:
    """OpenAI's ``{"data": [{"id", "owned_by"}, ...]}`` (or a bare list) as bounded entries,
    sorted by id, duplicates and malformed entries dropped."""
    items = body.get("data") if isinstance(body, dict) else body
    if not isinstance(items, list):
        raise ModelUnavailable(
            f"The model endpoint at {host} answered /models without a model list (expected "
            'OpenAI\'s {"data": [{"id": ...}]}); check that FLEET_LM_API_BASE ends in /v1',
            endpoint=host,
        )
    found: dict[str, ModelEntry] = {}
    for item in items:
        if not isinstance(item, dict):
            continue
        model_id = item.get("id")
        if not isinstance(model_id, str) or not model_id.strip():
            continue
        model_id = model_id.strip()
        if len(model_id) > MAX_MODEL_ID_CHARS or model_id in found:
            continue
        owner = item.get("owned_by")
        owned_by = owner[:MAX_OWNER_CHARS] if isinstance(owner, str) and owner else None
        found[model_id] = ModelEntry(id=model_id, owned_by=owned_by)
    return [found[k] for k in sorted(found)][:MAX_MODELS]
