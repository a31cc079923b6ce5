"""Typed configuration: defaults < TOML file < .env < environment < explicit overrides.

Every effective value is reported with the source that set it. Secrets (database URL, API keys)
come only from the environment or ``.env`` and are reported as set/unset, never by value.
"""

from __future__ import annotations

import hashlib
import json
import os
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from dotenv import dotenv_values
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, SecretStr, ValidationError

from fleet_core.errors import ConfigError

SCHEMA_VERSION = 1
DEFAULT_CONFIG_PATH = Path("config/fleet.toml")
ExecutionMode = Literal["hybrid", "rlm", "flex"]
Source = Literal["default", "file", "dotenv", "env", "override", "session"]
ROLES = ("root", "sub", "judge", "reflection")
_SECRET_WORDS = ("password", "secret", "token", "api_key", "apikey", "credential", "database_url")


#: A Turn's deadline, in whole seconds: 0 (no deadline) or 10 to 3600. The one rule, used by the
#: configuration (``runtime.turn_timeout_seconds``), a Turn request (``TurnRequest``'s
#: ``timeout_seconds``, checked by the Turn service) and the protocol (``fleet/turn/run``'s
#: ``timeoutSeconds``), so a value one accepts the others accept.
TURN_TIMEOUT_MIN_SECONDS = 10
TURN_TIMEOUT_MAX_SECONDS = 3600
TURN_TIMEOUT_RULE = (
    f"0 (no deadline) or between {TURN_TIMEOUT_MIN_SECONDS} and {TURN_TIMEOUT_MAX_SECONDS} seconds"
)


def turn_timeout_problem(value: object) -> str | None:
    """``None`` when ``value`` is a valid Turn deadline, else what it must be (for a message:
    ``f"timeoutSeconds must be {problem}"``)."""
    if isinstance(value, bool) or not isinstance(value, int):
        return f"a whole number of seconds: {TURN_TIMEOUT_RULE}"
    if value != 0 and not TURN_TIMEOUT_MIN_SECONDS <= value <= TURN_TIMEOUT_MAX_SECONDS:
        return TURN_TIMEOUT_RULE
    return None


def check_turn_timeout(value: int) -> int:
    """:func:`turn_timeout_problem` as a validator: ``value``, or ``ValueError`` naming the rule."""
    problem = turn_timeout_problem(value)
    if problem is not None:
        raise ValueError(f"must be {problem}")
    return value


DeadlineSeconds = Annotated[int, AfterValidator(check_turn_timeout)]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True, frozen=True)


class RuntimeSettings(_Section):
    """Per-Turn budgets and limits shared by the whole agent tree."""

    execution_mode: ExecutionMode = "hybrid"
    turn_timeout_seconds: DeadlineSeconds = 900
    max_llm_calls_per_turn: int = Field(150, ge=1, le=10_000)
    max_agent_depth: int = Field(3, ge=0, le=8)
    max_child_sandboxes: int = Field(8, ge=0, le=64)
    max_active_children: int = Field(4, ge=1, le=16)
    max_active_sessions: int = Field(64, ge=1, le=1024)
    max_rlm_iterations: int = Field(16, ge=1, le=64)
    child_max_iters: int = Field(8, ge=1, le=8)
    child_max_llm_calls: int = Field(25, ge=1, le=25)
    history_turns: int = Field(8, ge=0, le=50)
    history_chars: int = Field(16_000, ge=0, le=200_000)


class StorageSettings(_Section):
    """Workspace file limits and durable-state locations."""

    max_file_bytes: int = Field(25_000_000, ge=1, le=1 << 40)
    max_read_bytes: int = Field(25_000_000, ge=1, le=1 << 40)
    manifest_max_files: int = Field(500, ge=1, le=100_000)
    max_turn_artifacts: int = Field(1_000, ge=1, le=100_000)  # changed artifacts a Turn lists
    manifest_preview_chars: int = Field(2_000, ge=0, le=20_000)
    manifest_max_chars: int = Field(60_000, ge=1_000, le=1_000_000)
    skills_dir: str = ".fleet/skills"
    lease_check_seconds: float = Field(2.0, ge=0.1, le=60)  # PostgreSQL Session lease probe


class SandboxSettings(_Section):
    """Where and how model-written Python runs."""

    backend: Literal["local", "daytona"] = "local"
    allow_unisolated: bool = False
    memory_limit_mb: int = Field(2048, ge=64, le=262_144)
    cpu_seconds: int = Field(900, ge=1, le=86_400)
    max_file_size_mb: int = Field(256, ge=1, le=1 << 20)
    max_open_files: int = Field(256, ge=16, le=65_536)
    max_processes: int = Field(64, ge=4, le=4096)
    cell_timeout_seconds: float = Field(300.0, gt=0, le=3600)
    interrupt_grace_seconds: float = Field(2.0, gt=0, le=60)
    max_output_chars: int = Field(100_000, ge=1_000, le=10_000_000)
    child_max_promoted_files: int = Field(100, ge=1, le=10_000)
    child_max_promoted_bytes: int = Field(25_000_000, ge=1, le=1 << 34)
    workspace_quota_mb: int = Field(1024, ge=16, le=1 << 24)
    daytona_org_id: str | None = None
    daytona_target: str | None = None
    daytona_api_url: str | None = None
    daytona_snapshot: str = "fleet-lsp-python311-v1"


class RoleSettings(_Section):
    """One model role's overrides; unset fields inherit ``[llm]``."""

    model: str | None = None
    api_base: str | None = None
    max_tokens: int | None = Field(None, ge=1, le=1_000_000)
    temperature: float | None = Field(None, ge=0, le=2)
    num_retries: int | None = Field(None, ge=0, le=10)
    cache: bool | None = None


class LlmSettings(_Section):
    """Default model endpoint for every role, with per-role tables."""

    model: str | None = None
    api_base: str | None = None
    max_tokens: int = Field(4_000, ge=1, le=1_000_000)
    temperature: float = Field(0.0, ge=0, le=2)
    num_retries: int = Field(3, ge=0, le=10)
    cache: bool = False
    root: RoleSettings = RoleSettings()
    sub: RoleSettings = RoleSettings()
    judge: RoleSettings = RoleSettings()
    reflection: RoleSettings = RoleSettings()


class DatabricksSettings(_Section):
    tracking_uri: str = "databricks"
    experiment_name: str = "/Shared/fleet-lsp-runtime"
    eval_experiment_name: str = "/Shared/fleet-lsp-eval"
    optimization_experiment_name: str = "/Shared/fleet-lsp-gepa"


class MlflowSettings(_Section):
    """Where traces, evaluations and optimization runs are recorded."""

    destination: Literal["local", "server", "databricks", "off"] = "local"
    tracking_uri: str | None = None
    experiment_name: str = "fleet-lsp"
    eval_experiment_name: str = "fleet-lsp-eval"
    optimization_experiment_name: str = "fleet-lsp-gepa"
    ui_port: int = Field(5001, ge=1, le=65_535)
    databricks: DatabricksSettings = DatabricksSettings()


class ServerSettings(_Section):
    host: str = "127.0.0.1"
    port: int = Field(2087, ge=1, le=65_535)
    allow_non_loopback_bind: bool = False
    progress_reports_per_second: float = Field(10.0, gt=0, le=100)
    # one JSON-RPC message (fleet_lsp.transport): larger frames are refused, the link closed
    max_message_bytes: int = Field(64 * 1024 * 1024, ge=64 * 1024, le=1024 * 1024 * 1024)


class JevSettings(_Section):
    """The optional TypeSafe Jev decision API (on only when ``FLEET_JEV_API_KEY`` is set)."""

    base_url: str = "https://api.typesafe.ai"
    model: str = "jev-latest"
    timeout_seconds: float = Field(10.0, gt=0, le=120)


_MODULE_NAME = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$"


class LocalModelSettings(_Section):
    """The embedded offline model (``fleet-lsp model``; docs/local-model.md): the default for
    every role that has no endpoint configured, when the ``local-model`` extra is installed."""

    enabled: bool = True  # false: no embedded fallback (a role without an endpoint fails)
    n_ctx: int = Field(8192, ge=512, le=131_072)  # the server's context window, in tokens
    n_threads: int = Field(2, ge=1, le=256)
    max_tokens: int = Field(1024, ge=16, le=32_768)  # per completion; prompt + this <= n_ctx
    start_timeout_seconds: float = Field(180.0, ge=5, le=3600)
    # Run as ``<this Python> -P -m <module>`` with llama_cpp.server's flags (tests: a stand-in).
    server_module: str = Field("llama_cpp.server", pattern=_MODULE_NAME)
    directory: str | None = None  # weights, state and log; default <state dir>/localmodel


class EngineSettings(_Section):
    """How the Turn program talks to its model (docs/engine.md#the-small-model-profile)."""

    # auto: "small" when the root role runs on the embedded model, else "default"; "small":
    # compact stable prompts, no triage with a dataset, code-first Flex, host-recognized
    # completion, capped and loop-breaking sampling (fleet_core.engine.profile).
    profile: Literal["auto", "default", "small"] = "auto"
    small_max_tokens: int = Field(300, ge=64, le=4_000)  # one code step's output, small profile
    small_repairs: int = Field(2, ge=0, le=5)  # code-first Flex: repairs after a failed program
    # the embedded llama.cpp server: hold code-first replies to a fenced block (GBNF grammar);
    # off by default: measured slower and no more correct (docs/benchmarks.md)
    small_grammar: bool = False
    # code-first: after a program succeeds, show the model its result and the task once; it
    # answers OK or sends a corrected program (docs/engine.md#code-first-flex)
    small_self_check: bool = False


class MemorySettings(_Section):
    """What reaches the model of memories beyond the Session's own reviewed ones."""

    # Shared learned notes: reviewed learned notes of other Sessions of this store, shown as
    # unverified hints (docs/engine.md). Off by default.
    shared_notes: bool = False
    shared_notes_max: int = Field(8, ge=1, le=50)  # notes shown per Turn
    shared_notes_chars: int = Field(4_000, ge=200, le=20_000)  # their text, at most


class ConfigMeta(_Section):
    schema_version: int = SCHEMA_VERSION


class FleetSettings(_Section):
    """Every non-secret setting; the TOML file's shape."""

    config: ConfigMeta = ConfigMeta()
    runtime: RuntimeSettings = RuntimeSettings()
    storage: StorageSettings = StorageSettings()
    sandbox: SandboxSettings = SandboxSettings()
    llm: LlmSettings = LlmSettings()
    mlflow: MlflowSettings = MlflowSettings()
    server: ServerSettings = ServerSettings()
    memory: MemorySettings = MemorySettings()
    local_model: LocalModelSettings = LocalModelSettings()
    engine: EngineSettings = EngineSettings()
    jev: JevSettings = JevSettings()


class Secrets(BaseModel):
    """Secret values; only ever from the environment or ``.env``."""

    model_config = ConfigDict(frozen=True)

    database_url: SecretStr | None = None
    lm_api_key: SecretStr | None = None
    role_api_keys: dict[str, SecretStr] = {}
    daytona_api_key: SecretStr | None = None
    databricks_token: SecretStr | None = None
    jev_api_key: SecretStr | None = None

    def values(self) -> list[str]:
        """Every configured secret value (for redaction)."""
        found = [self.database_url, self.lm_api_key, self.daytona_api_key, self.databricks_token]
        found.append(self.jev_api_key)
        found += list(self.role_api_keys.values())
        return [s.get_secret_value() for s in found if s is not None and s.get_secret_value()]


# Flat environment names documented in the protocol contract, mapped to dotted setting keys.
_ENV_ALIASES: dict[str, str] = {
    "FLEET_EXECUTION_MODE": "runtime.execution_mode",
    "FLEET_TURN_TIMEOUT_SECONDS": "runtime.turn_timeout_seconds",
    "FLEET_MAX_LLM_CALLS_PER_TURN": "runtime.max_llm_calls_per_turn",
    "FLEET_MAX_AGENT_DEPTH": "runtime.max_agent_depth",
    "FLEET_MAX_CHILD_SANDBOXES": "runtime.max_child_sandboxes",
    "FLEET_MAX_ACTIVE_CHILDREN": "runtime.max_active_children",
    "FLEET_MAX_ACTIVE_SESSIONS": "runtime.max_active_sessions",
    "FLEET_MAX_FILE_BYTES": "storage.max_file_bytes",
    "FLEET_SANDBOX_BACKEND": "sandbox.backend",
    "FLEET_ALLOW_UNISOLATED_SANDBOX": "sandbox.allow_unisolated",
    "FLEET_DAYTONA_ORG_ID": "sandbox.daytona_org_id",
    "FLEET_DAYTONA_TARGET": "sandbox.daytona_target",
    "FLEET_DAYTONA_API_URL": "sandbox.daytona_api_url",
    "FLEET_LM_MODEL": "llm.model",
    "FLEET_LM_API_BASE": "llm.api_base",
    "FLEET_MLFLOW_DESTINATION": "mlflow.destination",
    "FLEET_MLFLOW_TRACKING_URI": "mlflow.tracking_uri",
    "FLEET_ALLOW_NON_LOOPBACK_BIND": "server.allow_non_loopback_bind",
    "FLEET_SHARED_NOTES": "memory.shared_notes",
    "FLEET_ENGINE_PROFILE": "engine.profile",
    "FLEET_JEV_BASE_URL": "jev.base_url",
    "FLEET_JEV_MODEL": "jev.model",
}
for _role in ROLES:
    _ENV_ALIASES[f"FLEET_LM_{_role.upper()}_MODEL"] = f"llm.{_role}.model"
    _ENV_ALIASES[f"FLEET_LM_{_role.upper()}_API_BASE"] = f"llm.{_role}.api_base"

_SECRET_ENV = {
    "FLEET_DATABASE_URL": "database_url",
    "FLEET_LM_API_KEY": "lm_api_key",
    "FLEET_DAYTONA_API_KEY": "daytona_api_key",
    "DATABRICKS_TOKEN": "databricks_token",
    "FLEET_JEV_API_KEY": "jev_api_key",
}


class EffectiveConfig(BaseModel):
    """Validated settings plus where each value came from."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    settings: FleetSettings
    secrets: Secrets
    sources: dict[str, Source]
    config_file: Path | None
    state_dir: Path

    def items(self) -> Iterator[tuple[str, Any, Source]]:
        """(dotted key, value, source) for every non-secret leaf, sorted by key."""
        for key, value in sorted(_flatten(self.settings.model_dump(mode="json")).items()):
            yield key, value, self.sources.get(key, "default")

    def secret_status(self) -> dict[str, bool]:
        """Secret setting names and whether each is set (never the value)."""
        status = {env: getattr(self.secrets, attr) is not None for env, attr in _SECRET_ENV.items()}
        for role in ROLES:
            status[f"FLEET_LM_{role.upper()}_API_KEY"] = role in self.secrets.role_api_keys
        return status

    def digest(self) -> str:
        """sha256 of the canonical non-secret values."""
        canonical = json.dumps(self.settings.model_dump(mode="json"), sort_keys=True)
        return hashlib.sha256(canonical.encode()).hexdigest()

    def with_session(self, selections: Mapping[str, Any]) -> EffectiveConfig:
        """Apply persisted Session selections (dotted keys), reported with source ``session``."""
        if not selections:
            return self
        data = self.settings.model_dump(mode="json")
        for key, value in selections.items():
            _set_dotted(data, key, value)
        settings = _validate(data, origin="Session selections")
        sources = dict(self.sources) | {key: "session" for key in selections}
        return self.model_copy(update={"settings": settings, "sources": sources})


def load_config(
    overrides: Mapping[str, Any] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> EffectiveConfig:
    """Read every source, apply precedence and validate; raises ``ConfigError`` naming the key."""
    environ = os.environ if environ is None else environ
    cwd = Path.cwd() if cwd is None else cwd
    config_file = _config_path(environ, cwd)
    dotenv = _read_dotenv(cwd / ".env")
    layers: list[tuple[Source, dict[str, Any]]] = [
        ("file", _read_toml(config_file) if config_file else {}),
        ("dotenv", _aliased(dotenv)),
        ("env", _aliased(environ)),
        ("override", _flatten(dict(overrides or {}))),
    ]
    merged: dict[str, Any] = {}
    sources: dict[str, Source] = {}
    for source, values in layers:
        for key, value in _flatten(values).items():
            _set_dotted(merged, key, value)
            sources[key] = source
    settings = _validate(merged, origin="configuration")
    secrets = _read_secrets({**dotenv, **environ})
    state_dir = Path(environ.get("FLEET_STATE_DIR") or dotenv.get("FLEET_STATE_DIR") or ".fleet")
    if not state_dir.is_absolute():
        state_dir = cwd / state_dir
    return EffectiveConfig(
        settings=settings,
        secrets=secrets,
        sources=sources,
        config_file=config_file,
        state_dir=state_dir,
    )


def _config_path(environ: Mapping[str, str], cwd: Path) -> Path | None:
    named = environ.get("FLEET_CONFIG")
    if named:
        path = Path(named) if Path(named).is_absolute() else cwd / named
        if not path.is_file():
            raise ConfigError(f"FLEET_CONFIG names {path}, which does not exist")
        return path
    default = cwd / DEFAULT_CONFIG_PATH
    return default if default.is_file() else None


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read TOML: {exc}") from None
    version = data.get("config", {}).get("schema_version")
    if version != SCHEMA_VERSION:
        raise ConfigError(
            f"{path}: [config] schema_version must be the integer {SCHEMA_VERSION}, got {version!r}"
        )
    for key in _flatten(data):
        if any(word in key.lower() for word in _SECRET_WORDS):
            raise ConfigError(
                f"{path}: key '{key}' looks like a secret; secrets come only from the "
                "environment or .env"
            )
    try:
        FleetSettings.model_validate(data, strict=True)
    except ValidationError as exc:
        raise ConfigError(f"{path}: {_describe(exc)}") from None
    return data


def _read_dotenv(path: Path) -> dict[str, str]:
    if not path.is_file():
        return {}
    return {k: v for k, v in dotenv_values(path).items() if v is not None}


def _aliased(environ: Mapping[str, str]) -> dict[str, Any]:
    """Setting values from environment-style names: documented aliases or ``FLEET_SECTION__KEY``."""
    found: dict[str, Any] = {}
    for name, value in environ.items():
        if name in _ENV_ALIASES:
            _set_dotted(found, _ENV_ALIASES[name], value)
        elif name.startswith("FLEET_") and "__" in name:
            key = name.removeprefix("FLEET_").lower().replace("__", ".")
            _set_dotted(found, key, value)
    return found


def _read_secrets(environ: Mapping[str, str]) -> Secrets:
    values: dict[str, Any] = {
        attr: environ[env] for env, attr in _SECRET_ENV.items() if environ.get(env)
    }
    values["role_api_keys"] = {
        role: environ[f"FLEET_LM_{role.upper()}_API_KEY"]
        for role in ROLES
        if environ.get(f"FLEET_LM_{role.upper()}_API_KEY")
    }
    return Secrets.model_validate(values)


def _validate(data: dict[str, Any], *, origin: str) -> FleetSettings:
    try:
        return FleetSettings.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{origin}: {_describe(exc)}") from None


def _describe(exc: ValidationError) -> str:
    first = exc.errors()[0]
    key = ".".join(str(part) for part in first["loc"])
    if first["type"] == "extra_forbidden":
        return f"unknown key '{key}'"
    return f"'{key}': {first['msg']} (got {first.get('input')!r})"


def _flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(_flatten(value, f"{dotted}."))
        else:
            flat[dotted] = value
    return flat


def _set_dotted(target: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, leaf = dotted.split(".")
    for part in parents:
        child = target.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"'{dotted}': '{part}' is a value, not a table")
        target = child
    target[leaf] = value
