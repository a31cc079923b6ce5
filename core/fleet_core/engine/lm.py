"""Model construction: every role is a ``dspy.LM("openai/<id>")`` on the native lm15 engine.

Roles: ``root`` (Turn programs), ``sub`` (``llm_query``, children, triage), ``judge`` and
``reflection``. Each inherits ``[llm]`` and may override it in ``[llm.<role>]``; API keys come only
from the environment (``FLEET_LM_API_KEY`` or ``FLEET_LM_<ROLE>_API_KEY``).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from fleet_core.config import EffectiveConfig, LlmSettings, Secrets

# re-exported: the engine's names for them (fleet_core.endpoints, a leaf, defines them)
from fleet_core.endpoints import ROLES as ROLES
from fleet_core.endpoints import LmSpec as LmSpec
from fleet_core.endpoints import Role as Role
from fleet_core.endpoints import endpoint_configured as endpoint_configured
from fleet_core.endpoints import resolve_spec as resolve_spec
from fleet_core.endpoints import validate_api_base as validate_api_base
from fleet_core.errors import InvalidInput, ModelUnavailable

if TYPE_CHECKING:
    import dspy

    from fleet_core.localmodel.supervisor import LocalModel


class LmProvider(Protocol):
    """Where a Turn gets its models; injected so tests and demos can pass scripted LMs."""

    def check(self, *roles: Role) -> None:
        """Raise ``ModelUnavailable`` (fast, without network) unless every role can be built."""

    def lm(self, role: Role) -> dspy.BaseLM:
        """The model for ``role`` (the same instance on every call; LMs are thread-safe)."""

    def uses_embedded(self, role: Role) -> bool:
        """Whether ``role`` runs on the embedded offline model (it selects the small profile)."""


class StartTimedLms:
    """``base`` whose ``lm()`` reports the milliseconds it took to ``on_time``: getting a model
    may start the embedded server (seconds, before any model call), which a Turn reports as its
    own part of its time rather than as the host's."""

    def __init__(self, base: LmProvider, on_time: Callable[[float], None]) -> None:
        self._base = base
        self._on_time = on_time

    def check(self, *roles: Role) -> None:
        self._base.check(*roles)

    def uses_embedded(self, role: Role) -> bool:
        return self._base.uses_embedded(role)

    def lm(self, role: Role) -> dspy.BaseLM:
        started = time.perf_counter()
        try:
            return self._base.lm(role)
        finally:
            self._on_time((time.perf_counter() - started) * 1000)


# A Session's model selection (fleet/session/setModels): a model id per role, nothing else.
SELECTABLE_ROLES: tuple[Role, ...] = ("root", "sub")
MAX_MODEL_ID_CHARS = 200
_MODEL_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@+-]*")
_KEY_PREFIXES = ("sk-", "sk_", "pk-", "rk-", "ghp_", "gsk_", "xai-", "hf_", "aiza", "bearer")
_KEY_RUN = re.compile(r"[A-Za-z0-9_]{32,}")  # a long unbroken token: a key, not a model name


def selection_key(role: Role) -> str:
    """The dotted setting a Session's selection for ``role`` is stored as (source ``session``)."""
    return f"llm.{role}.model"


def check_model_id(value: str, *, role: str, secrets: Secrets | None = None) -> str:
    """``value`` as a Session's model id, or ``InvalidInput`` saying why not. Only a model id:
    an endpoint URL or anything that looks like a key is refused, and the message never repeats
    the value (it might be a key)."""
    model = value.strip()
    if "://" in model or model.lower().startswith(("http:", "https:", "www.")):
        raise InvalidInput(
            f"'{role}' looks like an endpoint URL, not a model id; a Session selects only model "
            "ids (the endpoint is FLEET_LM_API_BASE in the configuration)",
            role=role,
        )
    secret_values = secrets.values() if secrets is not None else []
    looks_secret = (
        model.lower().startswith(_KEY_PREFIXES)
        or _KEY_RUN.search(model) is not None
        or any(secret and secret in model for secret in secret_values)
    )
    if looks_secret:
        raise InvalidInput(
            f"'{role}' looks like an API key or credential, not a model id; keys come only "
            "from the environment (FLEET_LM_API_KEY), never from a Session",
            role=role,
        )
    if not model or len(model) > MAX_MODEL_ID_CHARS or not _MODEL_ID.fullmatch(model):
        raise InvalidInput(
            f"'{role}' is not a model id: 1 to {MAX_MODEL_ID_CHARS} characters, letters, digits "
            "and . _ : / @ + - (e.g. 'gpt-4o-mini'; `fleet-lsp models` lists the endpoint's)",
            role=role,
        )
    return model


def session_models(config: EffectiveConfig) -> dict[Role, str]:
    """The model ids a Session selected (role -> id): the values whose source is ``session``."""
    found: dict[Role, str] = {}
    for role in SELECTABLE_ROLES:
        model = getattr(config.settings.llm, role).model
        if config.sources.get(selection_key(role)) == "session" and model:
            found[role] = model
    return found


def models_endpoint(config: EffectiveConfig) -> tuple[str, str | None]:
    """The root role's endpoint (validated ``api_base``) and key (``None`` when unset: a local
    server may need none), for ``GET /models``; ``ModelUnavailable`` when none is configured."""
    settings = config.settings.llm
    api_base = settings.root.api_base or settings.api_base
    if not api_base:
        raise ModelUnavailable(
            "No model endpoint is configured, so there is no model list to fetch: set "
            "FLEET_LM_API_BASE (e.g. https://host/v1) and FLEET_LM_API_KEY",
            missing=["FLEET_LM_API_BASE"],
        )
    secret = config.secrets.lm_key("root")  # None when withheld (config.py's binding rule)
    key = secret.get_secret_value() if secret is not None else None
    return validate_api_base(api_base, role="root"), key or None


def select_models(provider: LmProvider, models: Mapping[Role, str]) -> LmProvider:
    """``provider`` with a Session's model selection applied (role -> model id): the configured
    provider resolves the roles again with those ids; any other (scripted, static) serves
    copies of its LMs naming the selected model."""
    if not models:
        return provider
    if isinstance(provider, ConfiguredLmProvider):
        return provider.with_models(models)
    return SelectedLmProvider(provider, models)


#: The embedded server's OpenAI chat dialect in lm15. ``openai/`` sends ``max_completion_tokens``,
#: which llama_cpp.server 0.3.36 (the source-built fallback runtime) ignores (it then generates
#: until the context is full); the vLLM dialect is the same OpenAI chat-completions wire with
#: ``max_tokens``, which every runtime honours.
EMBEDDED_DIALECT = "hosted_vllm"


class ConfiguredLmProvider:
    """Builds each role's ``dspy.LM`` from the configuration, once, on first use."""

    def __init__(
        self, settings: LlmSettings, secrets: Secrets, *, embedded: LocalModel | None = None
    ) -> None:
        self._settings = settings
        self._secrets = secrets
        self._embedded = embedded  # the default for roles with no endpoint (docs/local-model.md)
        self._lms: dict[Role, Any] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_config(
        cls, config: EffectiveConfig, *, embedded: LocalModel | None = None
    ) -> ConfiguredLmProvider:
        return cls(config.settings.llm, config.secrets, embedded=embedded)

    def uses_embedded(self, role: Role) -> bool:
        """Whether ``role`` runs on the embedded model: no endpoint (neither an api_base nor a
        model) is configured for it and the embedded model is installed and enabled. A
        configured endpoint always wins, and then the embedded model is never started."""
        return (
            self._embedded is not None
            and not endpoint_configured(self._settings, role)
            and not self._embedded.unavailable_reason()
        )

    def check(self, *roles: Role) -> None:
        for role in roles or ("root", "sub"):
            if self.uses_embedded(role):
                continue
            try:
                resolve_spec(self._settings, self._secrets, role)
            except ModelUnavailable as exc:
                if self._embedded is None or endpoint_configured(self._settings, role):
                    raise
                reason = self._embedded.unavailable_reason()
                raise ModelUnavailable(
                    f"{exc.message}; or use the embedded offline model: {reason}", **exc.data
                ) from None

    def spec(self, role: Role) -> LmSpec:
        return resolve_spec(self._settings, self._secrets, role)[0]

    def with_models(self, models: Mapping[Role, str]) -> ConfiguredLmProvider:
        """A provider whose ``role`` uses ``models[role]`` (same endpoints, keys and limits)."""
        updates: dict[str, Any] = {
            role: getattr(self._settings, role).model_copy(update={"model": model})
            for role, model in models.items()
        }
        return ConfiguredLmProvider(
            self._settings.model_copy(update=updates), self._secrets, embedded=self._embedded
        )

    def lm(self, role: Role) -> dspy.BaseLM:
        if self._embedded is not None and self.uses_embedded(role):
            return self._embedded_lm(role, self._embedded)
        with self._lock:
            found = self._lms.get(role)
            if found is None:
                found = self._lms[role] = self._build(role)
            return found

    def _embedded_lm(self, role: Role, embedded: LocalModel) -> Any:
        """The embedded server's LM, an OpenAI-compatible chat endpoint like a hosted model's
        (:data:`EMBEDDED_DIALECT`); started or reused now (its socket proven the server's),
        rebuilt when the server was restarted. It sends the server's per-start key and proves
        the server again before every call (:class:`~fleet_core.engine.embedded_lm.EmbeddedLM`)."""
        from fleet_core.engine.embedded_lm import EmbeddedLM

        endpoint = embedded.ensure()
        server = (endpoint.port, endpoint.server_pid, endpoint.server_start)
        with self._lock:
            found = self._lms.get(role)
            if found is not None and getattr(found, "fleet_server", None) == server:
                return found
            keeper = self._slot_keeper(endpoint, embedded, server)
            override = getattr(self._settings, role)
            temperature = override.temperature
            found = self._lms[role] = EmbeddedLM(
                f"{EMBEDDED_DIALECT}/{endpoint.model_id}",
                server=server,
                api_base=endpoint.api_base,
                api_key=endpoint.api_key,  # this start's key (registered for redaction)
                engine="lm15",
                cache=self._settings.cache if override.cache is None else override.cache,
                max_tokens=embedded.settings.max_tokens,
                temperature=self._settings.temperature if temperature is None else temperature,
                num_retries=min(1, self._settings.num_retries),
                slots=keeper,
            )
            return found

    def _slot_keeper(
        self, endpoint: Any, embedded: LocalModel, server: tuple[int, int | None, int | None]
    ) -> Any:
        """One :class:`~fleet_core.localmodel.slots.SlotKeeper` per server, shared by the roles'
        LMs (so only the first call of a server this process started restores a state)."""
        from fleet_core.localmodel.slots import SlotKeeper
        from fleet_core.localmodel.supervisor import verify_server

        if not endpoint.slot_dir:
            return None
        for lm in self._lms.values():
            keeper = getattr(lm, "fleet_slots", None)
            if keeper is not None and getattr(lm, "fleet_server", None) == server:
                return keeper
        return SlotKeeper(
            base_url=endpoint.api_base.removesuffix("/v1"),
            api_key=endpoint.api_key,
            directory=Path(endpoint.slot_dir),
            model=endpoint.model_id,
            runtime=endpoint.runtime,
            version=endpoint.runtime_version,
            n_ctx=embedded.settings.n_ctx,
            fresh=not endpoint.reused,
            prove=lambda: verify_server(*server),
        )

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

    def uses_embedded(self, role: Role) -> bool:
        return False


class SelectedLmProvider:
    """Another provider's LMs, with the selected roles' LMs copied to name the selected model
    (``dspy.LM.copy(model=...)``: the same engine, so a scripted engine sees the model id)."""

    def __init__(self, base: LmProvider, models: Mapping[Role, str]) -> None:
        self._base = base
        self._models = dict(models)
        self._lms: dict[Role, Any] = {}
        self._lock = threading.Lock()

    def check(self, *roles: Role) -> None:
        self._base.check(*roles)

    def uses_embedded(self, role: Role) -> bool:
        """The base's answer: the embedded server serves its one model whatever the name."""
        return self._base.uses_embedded(role)

    def lm(self, role: Role) -> dspy.BaseLM:
        model = self._models.get(role)
        if model is None:
            return self._base.lm(role)
        with self._lock:
            found = self._lms.get(role)
            if found is None:
                named = model if model.startswith("openai/") else f"openai/{model}"
                found = self._lms[role] = self._base.lm(role).copy(model=named)
            return found
