"""Typed configuration: defaults < TOML file < .env < environment < explicit overrides.

Every effective value is reported with the source that set it. Secrets (database URL, API keys)
come only from the environment or ``.env`` and are reported as set/unset, never by value.

Sources belong to a *scope*: the working directory's ``config/fleet.toml`` and ``.env`` are the
*workspace* (a cloned repository wrote them); the process environment, a file named by
``FLEET_CONFIG`` and explicit overrides are the *user*'s. A key from the user's scope is never
sent to an endpoint a workspace file set (:class:`KeyBinding`): ``EffectiveConfig.secrets``
holds only the keys each endpoint may receive, so no consumer can send the wrong one.
``FLEET_TRUST_WORKSPACE_CONFIG`` opts a workspace in; ``FLEET_IGNORE_WORKSPACE_CONFIG`` skips its
files altogether (editors set it for untrusted workspaces).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import threading
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, NamedTuple
from urllib.parse import urlsplit

from dotenv import dotenv_values
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, SecretStr, ValidationError

from fleet_core.errors import ConfigError
from fleet_core.modes import ExecutionMode

SCHEMA_VERSION = 1
DEFAULT_CONFIG_PATH = Path("config/fleet.toml")
Source = Literal["default", "file", "dotenv", "env", "override", "session"]
#: Who wrote a value: ``user`` (the process environment, ``FLEET_CONFIG``, overrides),
#: ``workspace`` (the working directory's ``config/fleet.toml`` and ``.env``) or ``default``.
Scope = Literal["default", "user", "workspace"]
ROLES = ("root", "sub", "judge", "reflection")
_SECRET_WORDS = ("password", "secret", "token", "api_key", "apikey", "credential", "database_url")

#: ``1``/``true``: the working directory's config files are trusted like the user's own (their
#: endpoints may receive the user's keys); or a list of folders (``os.pathsep``-separated) whose
#: working directories, and folders below them, are trusted. Read from the environment only.
TRUST_ENV = "FLEET_TRUST_WORKSPACE_CONFIG"
#: ``1``/``true``: the working directory's ``config/fleet.toml`` and ``.env`` are not read at all
#: (``FLEET_CONFIG`` still is). Editors set it for a workspace the user has not trusted.
IGNORE_ENV = "FLEET_IGNORE_WORKSPACE_CONFIG"
#: What a model role whose key was withheld sends instead (not a secret; a keyless local server
#: ignores it). Never empty: an empty key would let the client library fall back to its own
#: environment variables (``OPENAI_API_KEY``) and send those instead.
NO_KEY = "fleet-no-key"
#: MLflow's own credential variables, sent by MLflow to whatever tracking server is configured.
_MLFLOW_CREDENTIALS = (
    "MLFLOW_TRACKING_TOKEN",
    "MLFLOW_TRACKING_USERNAME",
    "MLFLOW_TRACKING_PASSWORD",
)
#: Safety switches a workspace file may not turn on (they stay at their default unless trusted).
_USER_ONLY_SWITCHES = ("sandbox.allow_unisolated", "server.allow_non_loopback_bind")
#: Where workspace content goes (a bucket, an endpoint that would receive the environment's
#: object-store credentials, a directory): never from a workspace file unless trusted.
_USER_ONLY_KEYS = (
    "storage.blob_backend",
    "storage.blob_dir",
    "storage.blob_s3_url",
    "storage.blob_s3_endpoint",
    "storage.blob_s3_region",
)
#: State directories refused whatever the source: system folders (exact paths, also resolved).
_SYSTEM_DIRS = frozenset(
    ("/bin", "/boot", "/dev", "/etc", "/proc", "/run", "/sbin", "/sys", "/usr", "/var")
)
_log = logging.getLogger(__name__)
_warned: set[str] = set()
_warned_lock = threading.Lock()


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
    # the host name recorded as a Session's owner (env FLEET_HOST_NAME; None: the machine's)
    host_name: str | None = Field(None, min_length=1, max_length=255)


class StorageSettings(_Section):
    """Workspace file limits and durable-state locations."""

    max_file_bytes: int = Field(25_000_000, ge=1, le=1 << 40)
    max_read_bytes: int = Field(25_000_000, ge=1, le=1 << 40)
    manifest_max_files: int = Field(500, ge=1, le=100_000)
    max_turn_artifacts: int = Field(1_000, ge=1, le=100_000)  # changed artifacts a Turn lists
    manifest_preview_chars: int = Field(2_000, ge=0, le=20_000)
    manifest_max_chars: int = Field(60_000, ge=1_000, le=1_000_000)
    skills_dir: str = ".fleet/skills"
    # database connections per process (PostgreSQL; docs/deployment.md, Connection sizing):
    # a pool of pool_size kept open plus up to max_overflow more under load
    pool_size: int = Field(5, ge=1, le=100)
    max_overflow: int = Field(10, ge=0, le=100)
    lease_check_seconds: float = Field(2.0, ge=0.1, le=60)  # PostgreSQL Session lease probe
    # Workspace content shared across hosts (docs/storage.md): auto = postgresql when the
    # database is PostgreSQL, else local (each host's workspace directory, nothing shared)
    blob_backend: Literal["auto", "local", "directory", "postgresql", "s3"] = "auto"
    blob_dir: str | None = None  # directory backend; default <state_dir>/blobs
    blob_s3_url: str | None = None  # s3 backend: s3://bucket/prefix
    blob_s3_endpoint: str | None = None  # an S3-compatible server's URL (default: AWS)
    blob_s3_region: str | None = None
    blob_chunk_bytes: int = Field(1 << 20, ge=4096, le=64 << 20)  # postgresql: bytes per row
    blob_max_bytes: int = Field(256_000_000, ge=1, le=1 << 40)  # larger files stay on the host
    blob_gc_grace_seconds: float = Field(3600.0, ge=0, le=30 * 86_400)


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
    # entries (files, directories, links) one workspace may hold: a cell past it is stopped,
    # an attach or a child promotion past it refused (docs/sandbox.md, "File-count quota")
    max_files: int = Field(10_000, ge=100, le=10_000_000)
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
    # our own bounds on every MLflow HTTP request (MLflow's own retries are turned off):
    # one request waits at most request_timeout_seconds; a trace that failed to export is
    # retried with per-row backoff (jittered, doubling) up to export_max_backoff_seconds apart
    request_timeout_seconds: float = Field(15.0, gt=0, le=300)
    export_max_backoff_seconds: float = Field(300.0, ge=1, le=86_400)
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
    # which llama.cpp server (fleet_core.localmodel.runtime): auto = the first installed one this
    # CPU can run, in the order llama-server (AVX-512), xllamacpp (AVX2), llama-cpp-python
    runtime: Literal["auto", "llama-server", "xllamacpp", "llama-cpp-python"] = "auto"
    cache_ram_mib: int = Field(256, ge=0, le=65_536)  # the server's host prompt cache, bounded
    # Instead of a runtime: ``<this Python> -P -m <module>`` with llama-server's flags (tests).
    server_module: str | None = Field(None, pattern=_MODULE_NAME)
    directory: str | None = None  # weights, state and log; default <state dir>/localmodel


class EngineSettings(_Section):
    """How the Turn program talks to its model (docs/engine.md#the-small-model-profile)."""

    # auto: "small" when the root role runs on the embedded model, else "default"; "small":
    # compact stable prompts, no triage with a dataset, code-first Flex, host-recognized
    # completion, capped and loop-breaking sampling (fleet_core.engine.profile).
    profile: Literal["auto", "default", "small"] = "auto"
    small_max_tokens: int = Field(300, ge=64, le=4_000)  # one code step's output, small profile
    small_repairs: int = Field(2, ge=0, le=5)  # code-first Flex: repairs after a failed program
    # code-first Flex: repairs beyond small_repairs, each begun only while the Turn's budget
    # allows it and, at its pace, it would end within 120 s (docs/engine.md). 0: measured on
    # both halves, they rescued no Turn and lengthened the failing ones (docs/benchmarks.md, Y)
    small_extra_repairs: int = Field(0, ge=0, le=5)
    # the embedded llama.cpp server: hold code-first replies to a fenced block (GBNF grammar);
    # off by default: measured slower and no more correct (docs/benchmarks.md)
    small_grammar: bool = False
    # code-first: after a program succeeds, show the model its result and the task once; it
    # answers OK or sends a corrected program (docs/engine.md#code-first-flex)
    small_self_check: bool = False
    # code-first: a program that succeeded is checked by a second, independently sampled one;
    # when their figures differ a third decides (docs/engine.md#the-small-model-profile). Off by
    # default: it costs one or two more model calls a Turn, and its gain is not measured yet
    small_vote: bool = False
    # code-first: the last program after two failures is sampled afresh from the first prompt
    # (no failed program or error in its chat) instead of repairing in the chat
    # (docs/engine.md#the-small-model-profile). Off by default until measured on both halves
    small_fresh_last: bool = False
    # code-first: when every program failed (none ran to its end), one more program is sampled
    # afresh from the first prompt, if the Turn is under 100 s old and its budget allows
    # (docs/engine.md#the-small-model-profile). Off: measured on both halves, it rescued no
    # Turn (docs/benchmarks.md, K)
    small_fresh_retry: bool = False


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
    #: Keys the key-binding rule withheld (binding name -> value): never sent anywhere, kept
    #: only so that redaction still removes them from output.
    withheld: dict[str, SecretStr] = {}

    def values(self) -> list[str]:
        """Every configured secret value, withheld ones too (for redaction)."""
        found = [self.database_url, self.lm_api_key, self.daytona_api_key, self.databricks_token]
        found.append(self.jev_api_key)
        found += list(self.role_api_keys.values())
        found += list(self.withheld.values())
        values = [s.get_secret_value() for s in found if s is not None and s.get_secret_value()]
        return list(dict.fromkeys(values))

    def lm_key(self, role: str) -> SecretStr | None:
        """The key ``role``'s endpoint may receive (``None``: none, or it was withheld)."""
        return self.role_api_keys.get(role) or self.lm_api_key

    def lm_key_withheld(self, role: str) -> bool:
        """Whether ``role``'s key was withheld (the role then runs without a key)."""
        return f"llm.{role}" in self.withheld


class _KeyStyle(NamedTuple):
    """How a ``KeyBinding`` rendering punctuates the key's part."""

    no_key: str
    key: str
    trusted: str
    not_sent: str


_LINE = _KeyStyle(", no key", " key ", " — sent: workspace trusted", " — not sent: ")
_PROVENANCE = _KeyStyle("; no key", "; key ", ", sent: workspace trusted", " not sent: ")


class KeyBinding(BaseModel):
    """Which source set an endpoint and which set its key, and whether the key is sent.

    The rule: a key from the user's scope is never sent to an endpoint a workspace file set
    (unless ``FLEET_TRUST_WORKSPACE_CONFIG`` trusts the workspace). Holds names, never values."""

    model_config = ConfigDict(frozen=True)

    name: str  # "llm.root" ... "llm.reflection", "sandbox.daytona", "jev", "mlflow"
    label: str  # "root", "daytona", "jev", "mlflow"
    endpoint: str | None  # shown without credentials or query
    endpoint_setting: str | None  # the dotted key that set it, e.g. "llm.root.api_base"
    endpoint_source: Source
    endpoint_origin: str  # "config/fleet.toml", ".env FLEET_LM_API_BASE", "FLEET_LM_API_BASE", ...
    endpoint_scope: Scope
    key: str | None  # the variable that would be sent without the rule
    key_origin: str | None  # "environment" or ".env"
    key_scope: Scope | None
    key_sent: bool  # whether ``key`` is sent to ``endpoint``
    key_used: str | None = None  # another key sent instead (a workspace's own .env key)
    reason: str | None = None  # why ``key`` is not sent
    trusted: bool = False  # a workspace endpoint that receives the user's key by opt-in

    def describe(self, *, provenance: bool = False) -> str:
        """One line, names only: ``root: api_base https://x (from config/fleet.toml, workspace)
        key FLEET_LM_API_KEY (environment, user) — not sent: ...`` (``config show``). With
        ``provenance`` (doctor), where the endpoint and its key came from, without the endpoint
        itself: ``llm.root.api_base from config/fleet.toml (workspace); key FLEET_LM_API_KEY
        (environment, user) not sent: ...``."""
        if provenance:
            return self._with_key(self._endpoint_origin(), _PROVENANCE)
        return self._with_key(self._endpoint_line(), _LINE)

    def provenance(self) -> str:
        """``describe(provenance=True)``."""
        return self.describe(provenance=True)

    def _endpoint_line(self) -> str:
        what = {"jev": "base_url", "mlflow": "tracking_uri", "sandbox.daytona": "api_url"}
        setting = what.get(self.name, "api_base")
        if self.endpoint is None and self.name.startswith("llm."):
            return f"{self.label}: no {setting}"
        if self.endpoint is None:
            return f"{self.label}: {setting} (built-in default)"
        where = (
            "built-in default"
            if self.endpoint_source == "default"
            else f"from {self.endpoint_origin}, {self.endpoint_scope}"
        )
        return f"{self.label}: {setting} {self.endpoint} ({where})"

    def _endpoint_origin(self) -> str:
        setting = self.endpoint_setting or "endpoint"
        if self.endpoint is None or self.endpoint_source == "default":
            return f"{setting}: built-in default"
        return f"{setting} from {self.endpoint_origin} ({self.endpoint_scope})"

    def _with_key(self, text: str, style: _KeyStyle) -> str:
        """``text`` and the key's part: which variable, where it came from, whether it is sent."""
        if self.key is None:
            return text + style.no_key
        text += f"{style.key}{self.key} ({self.key_origin}, {self.key_scope})"
        if self.key_sent:
            return text + (style.trusted if self.trusted else "")
        text += f"{style.not_sent}{self.reason}"
        return text + (f"; sending {self.key_used} instead" if self.key_used else "")

    def wire(self) -> dict[str, Any]:
        """camelCase fields for ``config show --json`` (names and origins, never values)."""
        return {
            "endpoint": self.endpoint,
            "endpointSetting": self.endpoint_setting,
            "endpointSource": self.endpoint_source,
            "endpointOrigin": self.endpoint_origin,
            "endpointScope": self.endpoint_scope,
            "key": self.key,
            "keyOrigin": self.key_origin,
            "keyScope": self.key_scope,
            "keySent": self.key_sent,
            "keyUsed": self.key_used,
            "reason": self.reason,
            "trusted": self.trusted,
        }


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
    "FLEET_HOST_NAME": "runtime.host_name",
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
    #: The secrets each consumer may use: keys the binding rule withheld are absent here (see
    #: ``Secrets.withheld``), so ``secrets.lm_key(role)`` is what ``role``'s endpoint may receive.
    secrets: Secrets
    sources: dict[str, Source]
    config_file: Path | None
    state_dir: Path
    #: Per endpoint (``llm.<role>``, ``sandbox.daytona``, ``jev``, ``mlflow``): which source set
    #: it and its key, and whether the key is sent.
    bindings: dict[str, KeyBinding] = {}
    #: What the user must be told (keys withheld, workspace values ignored); never a value.
    warnings: tuple[str, ...] = ()
    #: Secret variable names that are set, and where: ``env`` or ``dotenv``.
    secret_sources: dict[str, Source] = {}
    #: The config file's scope: ``workspace`` for the working directory's, ``user`` for
    #: ``FLEET_CONFIG``'s.
    config_file_scope: Scope | None = None
    #: Whether the working directory's files are trusted (``FLEET_TRUST_WORKSPACE_CONFIG``).
    workspace_trusted: bool = False
    #: Workspace files present but not read (``FLEET_IGNORE_WORKSPACE_CONFIG``).
    workspace_ignored: tuple[Path, ...] = ()

    def items(self) -> Iterator[tuple[str, Any, Source]]:
        """(dotted key, value, source) for every non-secret leaf, sorted by key."""
        for key, value in sorted(_flatten(self.settings.model_dump(mode="json")).items()):
            yield key, value, self.sources.get(key, "default")

    def secret_status(self) -> dict[str, bool]:
        """Secret setting names and whether each is set (never the value)."""
        names = [*_SECRET_ENV, *(f"FLEET_LM_{role.upper()}_API_KEY" for role in ROLES)]
        return {name: name in self.secret_sources for name in names}

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


def owner_identity(config: EffectiveConfig) -> tuple[str, str]:
    """The (host name, OS user) recorded as the owner of the Sessions this process creates or
    takes: ``runtime.host_name`` (FLEET_HOST_NAME) or the machine's host name, and the OS user."""
    import getpass
    import socket

    host = config.settings.runtime.host_name or socket.gethostname() or "localhost"
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry and no USER/LOGNAME (some containers)
        user = str(os.getuid())
    return host[:255], user[:255]


def load_config(
    overrides: Mapping[str, Any] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    log_warnings: bool = True,
) -> EffectiveConfig:
    """Read every source, apply precedence and validate; raises ``ConfigError`` naming the key.

    Then the key-binding rule (module docstring): a key the user's scope holds is withheld from
    an endpoint a workspace file set; each case is one ``warnings`` entry, logged once per
    process at WARNING (``log_warnings=False``: a caller that prints them itself)."""
    environ = os.environ if environ is None else environ
    cwd = Path.cwd() if cwd is None else cwd
    ignored: list[Path] = []
    ignore_workspace = _truthy(environ.get(IGNORE_ENV))
    config_file = _config_path(environ, cwd)
    config_file_scope: Scope | None = None
    if config_file is not None:
        config_file_scope = "user" if environ.get("FLEET_CONFIG") else "workspace"
        if ignore_workspace and config_file_scope == "workspace":
            ignored.append(config_file)
            config_file, config_file_scope = None, None
    dotenv: dict[str, str] = {}
    if ignore_workspace:
        ignored += [cwd / ".env"] if (cwd / ".env").is_file() else []
    else:
        dotenv = _read_dotenv(cwd / ".env")
    trusted = not ignore_workspace and _trusted(environ.get(TRUST_ENV), cwd)
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
    names = _aliased_names(dotenv) | _aliased_names(environ)
    names = {k: v for k, v in names.items() if sources.get(k) in ("dotenv", "env")}
    draft = _Draft(cwd, config_file, config_file_scope, sources, names, trusted)
    warnings: list[str] = []
    settings = _validate(merged, origin="configuration")
    switched = settings.model_dump()
    for key in _USER_ONLY_SWITCHES:  # a workspace file may not turn a safety switch on
        if draft.scope(key) == "workspace" and not trusted and _get_dotted(switched, key) is True:
            warnings.append(
                f"{key} = true from {draft.origin(key)} (a workspace file) is ignored: a safety "
                f"switch is turned on only from your environment (or set {TRUST_ENV}=1)"
            )
            _pop_dotted(merged, key)
            del sources[key]
            settings = _validate(merged, origin="configuration")
    for key in _USER_ONLY_KEYS:  # nor choose where workspace content is sent
        if draft.scope(key) == "workspace" and not trusted:
            warnings.append(
                f"{key} from {draft.origin(key)} (a workspace file) is ignored: where workspace "
                f"content is stored is set only from your environment (or set {TRUST_ENV}=1)"
            )
            _pop_dotted(merged, key)
            del sources[key]
            settings = _validate(merged, origin="configuration")
    settings, mlflow_binding = _bind_mlflow(settings, draft, environ, warnings, sources)
    secret_sources: dict[str, Source] = {}
    for name in [*_SECRET_ENV, *(f"FLEET_LM_{role.upper()}_API_KEY" for role in ROLES)]:
        if environ.get(name):
            secret_sources[name] = "env"
        elif dotenv.get(name):
            secret_sources[name] = "dotenv"
    secrets = _read_secrets({**dotenv, **environ})
    secrets, bindings = _bind_keys(settings, secrets, draft, environ, dotenv, warnings)
    if mlflow_binding is not None:
        bindings["mlflow"] = mlflow_binding
    state_dir = _state_dir(environ, dotenv, cwd, trusted, warnings)
    for warning in warnings if log_warnings else ():
        _warn_once(warning)
    return EffectiveConfig(
        settings=settings,
        secrets=secrets,
        sources=sources,
        config_file=config_file,
        state_dir=state_dir,
        bindings=bindings,
        warnings=tuple(warnings),
        secret_sources=secret_sources,
        config_file_scope=config_file_scope,
        workspace_trusted=trusted,
        workspace_ignored=tuple(ignored),
    )


class _Draft:
    """Where the values of one ``load_config`` came from (scopes and readable origins)."""

    def __init__(
        self,
        cwd: Path,
        config_file: Path | None,
        config_file_scope: Scope | None,
        sources: Mapping[str, Source],
        names: Mapping[str, str],
        trusted: bool,
    ) -> None:
        self.cwd = cwd
        self.config_file = config_file
        self.config_file_scope = config_file_scope
        self.sources = sources
        self.names = names
        self.trusted = trusted

    def source(self, key: str) -> Source:
        return self.sources.get(key, "default")

    def scope(self, key: str) -> Scope:
        source = self.source(key)
        if source == "default":
            return "default"
        if source == "dotenv" or (source == "file" and self.config_file_scope == "workspace"):
            return "workspace"
        return "user"

    def origin(self, key: str) -> str:
        """``config/fleet.toml``, ``.env FLEET_LM_API_BASE``, ``FLEET_LM_API_BASE``, ..."""
        source = self.source(key)
        if source == "file" and self.config_file is not None:
            return _shown_path(self.config_file, self.cwd)
        if source == "dotenv":
            return f".env {self.names.get(key, '')}".strip()
        if source == "env":
            return self.names.get(key, "the environment")
        if source == "override":
            return "an override (a CLI flag or the editor's fleet settings)"
        return source


def _shown_path(path: Path, cwd: Path) -> str:
    try:
        return str(path.relative_to(cwd))
    except ValueError:
        return str(path)


def _shown_url(url: str) -> str:
    """``url`` without credentials, query or fragment (for messages)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "(an invalid URL)"
    if not parts.scheme or not host:
        return url.split("?")[0].split("#")[0] if "@" not in url else "(a URL with credentials)"
    host = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{host}{port}{parts.path}"


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def _trusted(value: str | None, cwd: Path) -> bool:
    """``FLEET_TRUST_WORKSPACE_CONFIG``: true, or a list of folders that hold ``cwd``."""
    text = (value or "").strip()
    if not text or text.lower() in ("0", "false", "no", "off"):
        return False
    if _truthy(text):
        return True
    here = cwd.resolve()
    for part in text.split(os.pathsep):
        folder = Path(part.strip()).expanduser()
        if part.strip() and folder.is_absolute() and here.is_relative_to(folder.resolve()):
            return True
    return False


def _warn_once(message: str) -> None:
    """Log ``message`` at WARNING the first time this process sees it."""
    with _warned_lock:
        if message in _warned:
            return
        _warned.add(message)
    _log.warning("configuration: %s", message)


_ROLE_KEY = "FLEET_LM_{}_API_KEY"
_ORIGIN = {"env": "environment", "dotenv": ".env"}


def _bind_keys(
    settings: FleetSettings,
    secrets: Secrets,
    draft: _Draft,
    environ: Mapping[str, str],
    dotenv: Mapping[str, str],
    warnings: list[str],
) -> tuple[Secrets, dict[str, KeyBinding]]:
    """Apply the key-binding rule to every model role, Daytona and Jev: the filtered secrets
    and one binding per endpoint."""
    bindings: dict[str, KeyBinding] = {}
    withheld: dict[str, SecretStr] = {}
    role_keys: dict[str, SecretStr] = {}
    lm_changed = False
    groups: dict[tuple[str, str, str, str], list[str]] = {}  # one warning per key and endpoint
    llm = settings.llm
    for role in ROLES:
        own = getattr(llm, role).api_base
        setting = f"llm.{role}.api_base" if own else ("llm.api_base" if llm.api_base else None)
        names = [_ROLE_KEY.format(role.upper()), "FLEET_LM_API_KEY"]
        binding, value, kept_back = _bind(
            f"llm.{role}", role, own or llm.api_base, setting, names, draft, environ, dotenv
        )
        bindings[binding.name] = binding
        if value is not None:
            role_keys[role] = SecretStr(value)
        if kept_back is not None:
            lm_changed = True
            withheld[binding.name] = SecretStr(kept_back)
            group = (
                binding.key or "",
                binding.key_origin or "",
                binding.endpoint or "",
                binding.endpoint_origin,
            )
            groups.setdefault(group, []).append(role)
    for (key, key_origin, endpoint, origin), roles in groups.items():
        one = len(roles) == 1
        which = f"role {roles[0]}" if one else f"roles {', '.join(roles)}"
        instead = bindings[f"llm.{roles[0]}"].key_used
        if instead:
            then = f"{'it sends' if one else 'they send'} {instead} instead"
        else:
            then = "the role runs without a key" if one else "the roles run without a key"
        warnings.append(
            f"the key {key} ({key_origin}) is not sent to {endpoint} ({which}): that endpoint "
            f"was set by {origin}, a workspace file; {then}. If you trust this folder, set "
            f"{TRUST_ENV}=1 (or list the folder in it)"
        )
    updates: dict[str, Any] = {}
    if lm_changed:  # every role's key explicit, so lm_key(role) cannot fall back to the shared one
        updates |= {"role_api_keys": role_keys, "lm_api_key": None}
    sandbox = settings.sandbox
    for name, label, url, setting, env, attr in (
        ("sandbox.daytona", "daytona", sandbox.daytona_api_url, "sandbox.daytona_api_url",
         "FLEET_DAYTONA_API_KEY", "daytona_api_key"),
        ("jev", "jev", settings.jev.base_url, "jev.base_url", "FLEET_JEV_API_KEY", "jev_api_key"),
    ):  # fmt: skip
        binding, value, kept_back = _bind(name, label, url, setting, [env], draft, environ, dotenv)
        bindings[name] = binding
        if kept_back is not None:
            updates[attr] = None if value is None else SecretStr(value)
            withheld[name] = SecretStr(kept_back)
            used = binding.key_used
            then = f"{used} is sent instead" if used else f"{label} runs without it"
            warnings.append(
                f"the key {binding.key} ({binding.key_origin}) is not sent to {binding.endpoint}: "
                f"{setting} was set by {binding.endpoint_origin}, a workspace file; {then}. If "
                f"you trust this folder, set {TRUST_ENV}=1 (or list the folder in it)"
            )
    if withheld:
        updates["withheld"] = withheld
    return (secrets.model_copy(update=updates) if updates else secrets), bindings


def _bind(
    name: str,
    label: str,
    endpoint: str | None,
    setting: str | None,
    key_names: list[str],
    draft: _Draft,
    environ: Mapping[str, str],
    dotenv: Mapping[str, str],
) -> tuple[KeyBinding, str | None, str | None]:
    """One endpoint's binding, the key value it may receive, and the value withheld from it
    (if any). Candidates in precedence order: each name from the environment, then from
    ``.env``; the first is withheld when it is the user's and the endpoint the workspace's,
    and then the workspace's own ``.env`` key, if any, is sent instead."""
    source: Source = draft.source(setting) if setting and endpoint else "default"
    scope: Scope = draft.scope(setting) if setting and endpoint else "default"
    candidates: list[tuple[str, Source, str]] = []
    for key_name in key_names:
        for key_source, values in (("env", environ), ("dotenv", dotenv)):
            if values.get(key_name):
                candidates.append((key_name, key_source, values[key_name]))  # type: ignore[arg-type]
    fields: dict[str, Any] = {
        "name": name,
        "label": label,
        "endpoint": _shown_url(endpoint) if endpoint else None,
        "endpoint_setting": setting if endpoint else None,
        "endpoint_source": source,
        "endpoint_origin": draft.origin(setting) if setting and endpoint else "default",
        "endpoint_scope": scope,
        "key": None,
        "key_origin": None,
        "key_scope": None,
        "key_sent": False,
    }
    if not candidates:
        return KeyBinding(**fields), None, None
    first_name, first_source, first_value = candidates[0]
    first_scope: Scope = "user" if first_source == "env" else "workspace"
    fields |= {"key": first_name, "key_origin": _ORIGIN[first_source], "key_scope": first_scope}
    if not endpoint or scope != "workspace" or first_scope == "workspace":
        return KeyBinding(**fields | {"key_sent": True}), first_value, None
    if draft.trusted:
        sent = {"key_sent": True, "trusted": True}
        return KeyBinding(**fields | sent), first_value, None
    fields["reason"] = "the endpoint was set by a workspace file"
    for key_name, key_source, value in candidates[1:]:
        if key_source == "dotenv":  # the workspace's own key may go to its endpoint
            used = f"{key_name} (.env, workspace)"
            return KeyBinding(**fields | {"key_used": used}), value, first_value
    return KeyBinding(**fields), None, first_value


def _bind_mlflow(
    settings: FleetSettings,
    draft: _Draft,
    environ: Mapping[str, str],
    warnings: list[str],
    sources: dict[str, Source],
) -> tuple[FleetSettings, KeyBinding | None]:
    """MLflow sends the user's ``MLFLOW_TRACKING_*`` credentials to its tracking server: a
    server a workspace file named is then not used (traces stay in the local store)."""
    mlflow = settings.mlflow
    if mlflow.destination != "server" or not mlflow.tracking_uri:
        return settings, None
    setting = "mlflow.tracking_uri"
    credentials = [name for name in _MLFLOW_CREDENTIALS if environ.get(name)]
    scope = draft.scope(setting)
    fields: dict[str, Any] = {
        "name": "mlflow",
        "label": "mlflow",
        "endpoint": _shown_url(mlflow.tracking_uri),
        "endpoint_setting": setting,
        "endpoint_source": draft.source(setting),
        "endpoint_origin": draft.origin(setting),
        "endpoint_scope": scope,
        "key": ", ".join(credentials) or None,
        "key_origin": "environment" if credentials else None,
        "key_scope": "user" if credentials else None,
        "key_sent": bool(credentials),
    }
    if not credentials or scope != "workspace":
        return settings, KeyBinding(**fields)
    if draft.trusted:
        return settings, KeyBinding(**fields | {"trusted": True})
    fields |= {"key_sent": False, "reason": "the tracking server was set by a workspace file"}
    warnings.append(
        f"the MLflow tracking server {fields['endpoint']} was set by {fields['endpoint_origin']}, "
        f"a workspace file, and your environment holds {fields['key']}: traces stay in the local "
        f"store instead (mlflow.destination = local). If you trust this folder, set {TRUST_ENV}=1"
    )
    sources["mlflow.destination"] = "default"
    local = mlflow.model_copy(update={"destination": "local"})
    return settings.model_copy(update={"mlflow": local}), KeyBinding(**fields)


def _state_dir(
    environ: Mapping[str, str],
    dotenv: Mapping[str, str],
    cwd: Path,
    trusted: bool,
    warnings: list[str],
) -> Path:
    """``FLEET_STATE_DIR`` (environment, then ``.env``) or ``./.fleet``. A workspace's ``.env``
    may place it only inside the working directory (unless trusted); system folders are
    refused whatever the source."""
    named = environ.get("FLEET_STATE_DIR")
    from_dotenv = not named and bool(dotenv.get("FLEET_STATE_DIR"))
    state_dir = Path(named or dotenv.get("FLEET_STATE_DIR") or ".fleet")
    if not state_dir.is_absolute():
        state_dir = cwd / state_dir
    if from_dotenv and not trusted and not _inside(state_dir, cwd):
        warnings.append(
            f"FLEET_STATE_DIR={dotenv['FLEET_STATE_DIR']} from .env (a workspace file) is "
            f"outside the working directory and is ignored; the state stays in {cwd / '.fleet'}. "
            f"Set FLEET_STATE_DIR in your environment, or {TRUST_ENV}=1"
        )
        state_dir = cwd / ".fleet"
    problem = _system_dir(state_dir)
    if problem:
        raise ConfigError(
            f"FLEET_STATE_DIR is {state_dir}, {problem}; fleet-lsp would create fleet.db and "
            "workspaces/ there: set it to a folder of its own (e.g. ~/.fleet or ./.fleet)"
        )
    return state_dir


def _inside(path: Path, folder: Path) -> bool:
    return Path(os.path.abspath(path)).resolve().is_relative_to(folder.resolve())


def _system_dir(path: Path) -> str | None:
    """Why ``path`` may not be a state directory (a filesystem root or a system folder), or
    ``None``. Exact folders only (``/usr`` is refused, ``/usr/local/fleet`` is not), compared
    as written and resolved."""
    seen = {Path(os.path.abspath(path))}
    with contextlib.suppress(OSError, RuntimeError):
        seen.add(path.resolve())
    for candidate in seen:
        if candidate.parent == candidate:
            return "a filesystem root"
        text = candidate.as_posix()
        if text in _SYSTEM_DIRS or (
            candidate.parent == Path(candidate.anchor) and candidate.name.startswith("lib")
        ):
            return "a system directory"
    return None


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
        return _checked_toml(path)
    except RecursionError:  # tomllib, _flatten and pydantic all recurse into nested values
        raise ConfigError(f"{path}: cannot read TOML: values or tables nested too deeply") from None


def _checked_toml(path: Path) -> dict[str, Any]:
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


def _aliased_names(environ: Mapping[str, str]) -> dict[str, str]:
    """Dotted setting key -> the environment-style name that sets it (as :func:`_aliased`)."""
    found: dict[str, str] = {}
    for name in environ:
        if name in _ENV_ALIASES:
            found[_ENV_ALIASES[name]] = name
        elif name.startswith("FLEET_") and "__" in name:
            found[name.removeprefix("FLEET_").lower().replace("__", ".")] = name
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


def _get_dotted(data: Mapping[str, Any], dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(data, Mapping):
            return None
        data = data.get(part)  # type: ignore[assignment]
    return data


def _pop_dotted(data: dict[str, Any], dotted: str) -> None:
    *parents, leaf = dotted.split(".")
    for part in parents:
        data = data[part]
    data.pop(leaf, None)


def _set_dotted(target: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, leaf = dotted.split(".")
    for part in parents:
        child = target.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"'{dotted}': '{part}' is a value, not a table")
        target = child
    target[leaf] = value
