"""Which endpoint each model role resolves to, validated, from the configuration alone: the
roles, ``CONFIGURE_HINT``, ``resolve_spec`` and ``endpoint_configured``. A leaf (config, errors
and net only; no dspy): ``engine.lm`` builds the roles' LMs from it and
``localmodel.selection`` reports them from it, so neither package imports the other's way back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from pydantic import SecretStr

from fleet_core.config import NO_KEY, LlmSettings, Secrets
from fleet_core.errors import ModelUnavailable
from fleet_core.net import is_loopback_host

Role = Literal["root", "sub", "judge", "reflection"]
ROLES: tuple[Role, ...] = ("root", "sub", "judge", "reflection")
CONFIGURE_HINT = (
    "set FLEET_LM_API_BASE, FLEET_LM_MODEL and FLEET_LM_API_KEY "
    "(or [llm] model/api_base in config/fleet.toml plus FLEET_LM_API_KEY in the environment)"
)


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
    # The key this role's endpoint may receive (config.py's key-binding rule); a withheld key
    # (the user's, for an endpoint a workspace file set) leaves the role without one: NO_KEY.
    key_secret = secrets.lm_key(role)
    if key_secret is None and secrets.lm_key_withheld(role):
        key_secret = SecretStr(NO_KEY)
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


def endpoint_configured(settings: LlmSettings, role: Role) -> bool:
    """Whether ``role`` has an endpoint of its own or ``[llm]``'s: an api_base or a model."""
    override = getattr(settings, role)
    return bool(override.api_base or settings.api_base or override.model or settings.model)
