"""The provider-neutral sandbox interface: spec, limits, results, tool bridge, protocol."""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, Literal, Protocol, Self, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, model_validator

from fleet_core.config import SandboxSettings
from fleet_core.workspace import READONLY_ROOTS, FileInfo

ToolFunction = Callable[..., Any] | Callable[..., Awaitable[Any]]
"""A host callable reachable from sandbox code; sync (run in a thread) or async (awaited)."""

ToolBridge = Mapping[str, ToolFunction]
"""Tool name -> host callable. Names must be Python identifiers."""

ToolPolicy = Callable[[str], None]
"""Called on the event loop before every tool call of a cell with the tool's name; raise to
refuse the call (the refusal becomes a ``RuntimeError`` inside the sandbox). This is the
per-cell/per-tool budget hook."""


class SandboxState(enum.StrEnum):
    NEW = "new"
    STARTING = "starting"
    READY = "ready"
    BUSY = "busy"
    STOPPED = "stopped"
    FAILED = "failed"
    DESTROYED = "destroyed"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class SandboxLimits(_Frozen):
    """Per-sandbox resource limits. ``from_settings`` maps the ``[sandbox]`` config table."""

    memory_bytes: int = Field(2048 << 20, ge=64 << 20)
    cpu_seconds_per_cell: int = Field(900, ge=1)
    max_file_bytes: int = Field(256 << 20, ge=1 << 20)
    max_open_files: int = Field(256, ge=16)
    max_processes: int = Field(64, ge=4)
    cell_timeout_seconds: float = Field(300.0, gt=0)
    interrupt_grace_seconds: float = Field(2.0, gt=0)
    max_output_chars: int = Field(100_000, ge=1_000)
    max_value_chars: int = Field(1_000_000, ge=1_000)
    """The longest ``str`` a cell's trailing expression may return raw (longer: a cell error)."""
    max_frame_bytes: int = Field(64 << 20, ge=1 << 20)
    max_tool_calls_per_cell: int = Field(1_000, ge=0)
    max_concurrent_tool_calls: int = Field(16, ge=1)
    workspace_max_file_bytes: int = Field(25_000_000, ge=1)
    workspace_max_read_bytes: int = Field(25_000_000, ge=1)
    workspace_quota_bytes: int = Field(1 << 30, ge=1 << 20)
    """The most space the workspace's writable part may use (``sandbox.hygiene`` measures it);
    a cell that grows it past this is stopped with a ``WorkspaceQuotaExceeded`` error."""
    workspace_max_entries: int = Field(10_000, ge=1)
    """The most entries (files, directories, links; ``files/`` included) the workspace may hold
    (``sandbox.max_files``): a cell that creates more is stopped the same way."""

    @classmethod
    def from_settings(cls, settings: SandboxSettings, **overrides: Any) -> SandboxLimits:
        values: dict[str, Any] = {
            "memory_bytes": settings.memory_limit_mb << 20,
            "cpu_seconds_per_cell": settings.cpu_seconds,
            "max_file_bytes": settings.max_file_size_mb << 20,
            "max_open_files": settings.max_open_files,
            "max_processes": settings.max_processes,
            "cell_timeout_seconds": settings.cell_timeout_seconds,
            "interrupt_grace_seconds": settings.interrupt_grace_seconds,
            "max_output_chars": settings.max_output_chars,
            "workspace_quota_bytes": settings.workspace_quota_mb << 20,
            "workspace_max_entries": settings.max_files,
        }
        return cls(**(values | overrides))


class SandboxSpec(_Frozen):
    """What to create. ``workspace`` is the host directory mounted at ``/workspace``."""

    session_id: str
    agent_id: str
    parent_agent_id: str | None = None
    workspace: Path
    limits: SandboxLimits = SandboxLimits()
    network: bool = False
    readonly_roots: tuple[str, ...] = READONLY_ROOTS
    labels: dict[str, str] = Field(default_factory=dict)


class ExecutionError(_Frozen):
    """An exception raised by user code (data, not raised on the host)."""

    type: str
    message: str
    traceback: str = ""
    lineno: int | None = None


ValueType = Literal["str", "repr"]
"""How a cell's trailing-expression value came back: the ``str`` itself, raw, or the ``repr`` of
any other value (bounded by ``max_output_chars``)."""


class ExecutionResult(_Frozen):
    """The outcome of one cell. ``final`` is the SUBMIT payload, if SUBMIT was called.

    ``value``/``value_type``: the cell's trailing expression, when it was not None: a ``str`` comes
    back raw (``value_type == "str"``), anything else as its bounded repr (``"repr"``).
    """

    exec_id: str
    stdout: str = ""
    stderr: str = ""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    value: str | None = None
    value_type: ValueType | None = None
    error: ExecutionError | None = None
    final: dict[str, Any] | None = None
    duration_s: float = 0.0
    tool_calls: int = 0

    @model_validator(mode="after")
    def _value_is_typed(self) -> Self:
        if (self.value is None) != (self.value_type is None):
            raise ValueError("value and value_type are set together")
        return self

    @property
    def value_repr(self) -> str | None:
        """The value as Python shows it: ``repr`` of a raw ``str``, else the repr sent as is."""
        if self.value_type == "str":
            return repr(self.value)
        return self.value

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def interrupted(self) -> bool:
        return self.error is not None and self.error.type == "KeyboardInterrupt"


class SandboxInfo(_Frozen):
    """What a started sandbox reports about itself (shown to the model and in ``doctor``)."""

    sandbox_id: str
    backend: str
    isolation: dict[str, Any]
    python: str = ""
    packages: dict[str, bool] = Field(default_factory=dict)
    workdir: str = "/workspace"


@runtime_checkable
class Sandbox(Protocol):
    """An isolated, stateful Python REPL with a workspace. All methods are async.

    ``execute`` runs one cell at a time (callers are serialized). User-code exceptions are data in
    the result; sandbox failures raise :mod:`fleet_core.sandbox.errors` types. ``destroy`` is
    idempotent and safe to call in any state.
    """

    @property
    def id(self) -> str: ...

    @property
    def spec(self) -> SandboxSpec: ...

    @property
    def state(self) -> SandboxState: ...

    @property
    def info(self) -> SandboxInfo | None: ...

    async def start(self) -> SandboxInfo: ...

    async def execute(
        self,
        code: str,
        *,
        variables: Mapping[str, Any] | None = None,
        tools: ToolBridge | None = None,
        output_fields: list[dict[str, str]] | None = None,
        timeout: float | None = None,
        policy: ToolPolicy | None = None,
    ) -> ExecutionResult: ...

    async def interrupt(self) -> None: ...

    async def read_file(self, path: str, *, max_bytes: int | None = None) -> bytes: ...

    async def write_file(self, path: str, data: bytes) -> FileInfo: ...

    async def list_files(self, root: str | None = None) -> list[FileInfo]: ...

    async def delete_file(self, path: str) -> None: ...

    async def stop(self) -> None: ...

    async def destroy(self) -> None: ...

    async def __aenter__(self) -> Sandbox: ...

    async def __aexit__(self, *exc: object) -> None: ...
