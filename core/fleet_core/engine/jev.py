"""The optional TypeSafe Jev decision API, spoken directly over HTTP (httpx, no dspy).

Jev answers typed questions about a ``state`` in one call: for a *choice* question it returns
the chosen label, its confidence and a probability per label. Fleet uses it, when
``FLEET_JEV_API_KEY`` is set, for triage, Skill preloading and the sandbox's
``jev_decide_batched``; every use falls back to the sub LM when Jev fails (see
``fleet_core.engine.decisions``).

Wire (the TypeSafe API, as its official SDK sends it)::

    POST {base_url}/v1/systemone   Authorization: Bearer <key>
      {"model": "jev-latest", "state": <JSON>,
       "questions": {"<name>": {"type": "choice", "instructions": "...",
                                "criteria": {"<label>": "<description>" | null, ...}}}}
    -> {"model": "...", "answers": {"<name>": {"type": "choice", "choice": "<label>",
                                              "confidence": 0.9, "probabilities": {...}}},
        "usage": {"input_tokens": 120, "output_tokens": 12}}
    GET {base_url}/v1/models -> {"models": [{"name": ..., "description": ..., ...}]}

Errors never carry the key: a ``JevError`` names the host, the HTTP status or the timeout, and
never the response body (which could echo the request).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeGuard
from urllib.parse import urlsplit

import httpx

from fleet_core.config import EffectiveConfig
from fleet_core.errors import FleetError
from fleet_core.net import is_loopback_host

SYSTEM_ONE_PATH = "/v1/systemone"
MODELS_PATH = "/v1/models"
MAX_RESPONSE_BYTES = 4_000_000
MAX_CHOICES = 255  # the API's limit per choice question


class JevError(FleetError):
    """Jev could not answer (unreachable, timeout, HTTP error, or an unreadable answer)."""

    kind = "JevUnavailable"


@dataclass(frozen=True, slots=True)
class ChoiceQuestion:
    instructions: str
    labels: Mapping[str, str | None]  # label -> description (None: undescribed)

    def wire(self) -> dict[str, Any]:
        return {"type": "choice", "instructions": self.instructions, "criteria": dict(self.labels)}


@dataclass(frozen=True, slots=True)
class ChoiceAnswer:
    choice: str
    confidence: float | None
    probabilities: dict[str, float]


@dataclass(frozen=True, slots=True)
class JevAnswers:
    model: str
    answers: dict[str, ChoiceAnswer]
    input_tokens: int | None = None
    output_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class JevClient:
    """One configured Jev endpoint. Thread-safe: each call opens its own short-lived client."""

    base_url: str
    model: str
    timeout_seconds: float
    _api_key: str = field(repr=False)

    @property
    def host(self) -> str:
        return urlsplit(self.base_url).netloc or self.base_url

    def _headers(self) -> dict[str, str]:
        return {
            "Authorization": f"Bearer {self._api_key}",
            "Accept": "application/json",
            "User-Agent": "fleet-lsp",
        }

    def _timeout(self, remaining: float | None) -> float:
        seconds = self.timeout_seconds
        if remaining is not None:
            seconds = min(seconds, remaining)
        return max(0.1, seconds)

    def _request(
        self, method: str, path: str, body: dict[str, Any] | None, remaining: float | None
    ) -> Any:
        timeout = self._timeout(remaining)
        where = f"Jev at {self.host}"
        url = self.base_url + path
        try:
            with (
                httpx.Client(timeout=timeout, follow_redirects=False, trust_env=False) as http,
                http.stream(method, url, json=body, headers=self._headers()) as response,
            ):
                content = _bounded_body(response, where)
        except httpx.TimeoutException:
            raise JevError(f"{where} did not answer within {timeout:g} seconds") from None
        except httpx.HTTPError as exc:
            raise JevError(f"{where} is unreachable ({type(exc).__name__})") from None
        try:
            return json.loads(content)
        except (ValueError, RecursionError):
            raise JevError(f"{where} sent an answer that is not JSON") from None

    def decide(
        self,
        state: Any,
        questions: Mapping[str, ChoiceQuestion],
        *,
        remaining_seconds: float | None = None,
    ) -> JevAnswers:
        """One ``/v1/systemone`` call: every question answered, or ``JevError``."""
        body = {
            "model": self.model,
            "state": state,
            "questions": {name: q.wire() for name, q in questions.items()},
        }
        data = self._request("POST", SYSTEM_ONE_PATH, body, remaining_seconds)
        return _parse_answers(data, questions, self.host)

    def models(self, *, remaining_seconds: float | None = None) -> list[str]:
        """The model names the key may use (``/v1/models``): doctor's check."""
        data = self._request("GET", MODELS_PATH, None, remaining_seconds)
        models = data.get("models") if isinstance(data, dict) else None
        if not isinstance(models, list):
            raise JevError(f"Jev at {self.host} sent a model list without 'models'")
        return [str(m.get("name")) for m in models if isinstance(m, dict) and m.get("name")][:200]


def _bounded_body(response: httpx.Response, where: str) -> bytes:
    """A 200 answer's body, read no further than ``MAX_RESPONSE_BYTES``; else ``JevError``."""
    if response.status_code in (401, 403):
        raise JevError(
            f"{where} refused the key (HTTP {response.status_code}); check FLEET_JEV_API_KEY"
        )
    if response.status_code != 200:
        raise JevError(f"{where} answered HTTP {response.status_code}")
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():
        size += len(chunk)
        if size > MAX_RESPONSE_BYTES:
            raise JevError(f"{where} sent an answer larger than {MAX_RESPONSE_BYTES:,} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _parse_answers(data: Any, questions: Mapping[str, ChoiceQuestion], host: str) -> JevAnswers:
    where = f"Jev at {host}"
    if not isinstance(data, dict) or not isinstance(data.get("answers"), dict):
        raise JevError(f"{where} sent an answer without 'answers'")
    raw_answers: dict[str, Any] = data["answers"]
    answers: dict[str, ChoiceAnswer] = {}
    for name, question in questions.items():
        raw = raw_answers.get(name)
        if not isinstance(raw, dict) or raw.get("type", "choice") != "choice":
            raise JevError(f"{where} did not answer question {name!r}")
        choice = raw.get("choice")
        if not isinstance(choice, str) or choice not in question.labels:
            raise JevError(f"{where} answered {name!r} with a label it was not offered")
        offered = raw.get("probabilities")
        probabilities = {
            str(k): float(v)
            for k, v in (offered.items() if isinstance(offered, dict) else ())
            if str(k) in question.labels and _number(v)
        }
        confidence = raw.get("confidence")
        answers[name] = ChoiceAnswer(
            choice=choice,
            confidence=float(confidence) if _number(confidence) else None,
            probabilities=probabilities,
        )
    usage: dict[str, Any] = data["usage"] if isinstance(data.get("usage"), dict) else {}
    return JevAnswers(
        model=str(data.get("model") or "")[:150],
        answers=answers,
        input_tokens=_count(usage.get("input_tokens")),
        output_tokens=_count(usage.get("output_tokens")),
    )


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _number(value: Any) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def validate_base_url(base_url: str) -> str:
    """HTTPS is required, except on loopback addresses (a local fake or proxy)."""
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise JevError(f"jev.base_url {base_url!r} is not an http(s) URL")
    if parts.username or parts.password:
        raise JevError("jev.base_url contains credentials; put the key in FLEET_JEV_API_KEY")
    if parts.scheme != "https" and not is_loopback_host(parts.hostname):
        raise JevError(
            f"jev.base_url must use https (plain http only on loopback); got {parts.hostname!r}"
        )
    return base_url.rstrip("/")


def jev_client(config: EffectiveConfig) -> JevClient | None:
    """The configured client, or ``None`` when Jev is off (no ``FLEET_JEV_API_KEY``).

    Raises ``JevError`` when a key is set but ``jev.base_url`` is unusable."""
    secret = config.secrets.jev_api_key
    key = secret.get_secret_value().strip() if secret is not None else ""
    if not key:
        return None
    settings = config.settings.jev
    return JevClient(
        base_url=validate_base_url(settings.base_url),
        model=settings.model,
        timeout_seconds=settings.timeout_seconds,
        _api_key=key,
    )
