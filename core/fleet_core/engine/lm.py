"""Model construction: every role is a ``dspy.LM("openai/<id>")`` on the native lm15 engine.

Roles: ``root`` (Turn programs), ``sub`` (``llm_query``, children, triage), ``judge`` and
``reflection``. Each inherits ``[llm]`` and may override it in ``[llm.<role>]``; API keys come only
from the environment (``FLEET_LM_API_KEY`` or ``FLEET_LM_<ROLE>_API_KEY``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol
from urllib.parse import urlsplit

from fleet_core.config import EffectiveConfig, LlmSettings, Secrets
from fleet_core.errors import ModelUnavailable
from fleet_core.net import is_loopback_host

if TYPE_CHECKING:
    import dspy

Role = Literal["root", "sub", "judge", "reflection"]
ROLES: tuple[Role, ...] = ("root", "sub", "judge", "reflection")
CONFIGURE_HINT = (
    "set FLEET_LM_API_BASE, FLEET_LM_MODEL and FLEET_LM_API_KEY "
    "(or [llm] model/api_base in config/fleet.toml plus FLEET_LM_API_KEY in the environment)"
)


class LmProvider(Protocol):
    """Where a Turn gets its models; injected so tests and demos can pass scripted LMs."""

    def check(self, *roles: Role) -> None:
        """Raise ``ModelUnavailable`` (fast, without network) unless every role can be built."""

    def lm(self, role: Role) -> dspy.BaseLM:
        """The model for ``role`` (the same instance on every call; LMs are thread-safe)."""


@dataclass(frozen=True, slots=True)
class LmSpec:
    """One role's resolved, validated model settings (the key is never shown)."""

    role: Role
    model: str
    api_base: str
    max_tokens: int
    temperature: float
    num_retries: int
    cache: bool

    @property
    def dspy_model(self) -> str:
        return self.model if self.model.startswith("openai/") else f"openai/{self.model}"


def validate_api_base(api_base: str, *, role: str) -> str:
    """HTTPS is required, except for loopback addresses (local model servers)."""
    parts = urlsplit(api_base)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ModelUnavailable(
            f"The {role} model's api_base {api_base!r} is not an http(s) URL; "
            "set FLEET_LM_API_BASE to e.g. https://host/v1"
        )
    if parts.username or parts.password:
        raise ModelUnavailable(
            f"The {role} model's api_base contains credentials; put the key in FLEET_LM_API_KEY"
        )
    if parts.scheme != "https" and not is_loopback_host(parts.hostname):
        raise ModelUnavailable(
            f"The {role} model's api_base must use https (plain http is allowed only on "
            f"loopback addresses); got host {parts.hostname!r}"
        )
    return api_base.rstrip("/")


def resolve_spec(settings: LlmSettings, secrets: Secrets, role: Role) -> tuple[LmSpec, str]:
    """The role's settings and its API key, or ``ModelUnavailable`` naming what is missing."""
    override = getattr(settings, role)
    model = override.model or settings.model
    api_base = override.api_base or settings.api_base
    key_secret = secrets.role_api_keys.get(role) or secrets.lm_api_key
    missing = []
    if not api_base:
        missing.append("FLEET_LM_API_BASE")
    if not model:
        missing.append("FLEET_LM_MODEL")
    if key_secret is None or not key_secret.get_secret_value():
        missing.append("FLEET_LM_API_KEY")
    if missing:
        raise ModelUnavailable(
            f"No model is configured for the {role} role (missing {', '.join(missing)}): "
            f"{CONFIGURE_HINT}",
            missing=missing,
            role=role,
        )
    assert model is not None and api_base is not None and key_secret is not None
    spec = LmSpec(
        role=role,
        model=model,
        api_base=validate_api_base(api_base, role=role),
        max_tokens=override.max_tokens or settings.max_tokens,
        temperature=settings.temperature if override.temperature is None else override.temperature,
        num_retries=settings.num_retries if override.num_retries is None else override.num_retries,
        cache=settings.cache if override.cache is None else override.cache,
    )
    return spec, key_secret.get_secret_value()


class ConfiguredLmProvider:
    """Builds each role's ``dspy.LM`` from the configuration, once, on first use."""

    def __init__(self, settings: LlmSettings, secrets: Secrets) -> None:
        self._settings = settings
        self._secrets = secrets
        self._lms: dict[Role, Any] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_config(cls, config: EffectiveConfig) -> ConfiguredLmProvider:
        return cls(config.settings.llm, config.secrets)

    def check(self, *roles: Role) -> None:
        for role in roles or ("root", "sub"):
            resolve_spec(self._settings, self._secrets, role)

    def spec(self, role: Role) -> LmSpec:
        return resolve_spec(self._settings, self._secrets, role)[0]

    def lm(self, role: Role) -> dspy.BaseLM:
        with self._lock:
            found = self._lms.get(role)
            if found is None:
                found = self._lms[role] = self._build(role)
            return found

    def _build(self, role: Role) -> Any:
        import dspy

        spec, key = resolve_spec(self._settings, self._secrets, role)
        return dspy.LM(
            spec.dspy_model,
            api_base=spec.api_base,
            api_key=key,
            engine="lm15",  # never fall back to LiteLLM
            cache=spec.cache,
            max_tokens=spec.max_tokens,
            temperature=spec.temperature,
            num_retries=spec.num_retries,
        )


class StaticLmProvider:
    """Fixed LM instances per role (tests, demos, replays); unset roles fall back to ``root``."""

    def __init__(self, root: Any, sub: Any | None = None, **others: Any) -> None:
        self._lms: dict[str, Any] = {"root": root, "sub": sub if sub is not None else root}
        self._lms.update(others)

    def check(self, *roles: Role) -> None:
        return None

    def lm(self, role: Role) -> dspy.BaseLM:
        return self._lms.get(role, self._lms["root"])
