"""Sandboxes: where model-written Python runs (never on the host).

``Sandbox`` is the async protocol; ``LocalSandbox`` (bubblewrap + rlimits + cgroups) is the default
backend. ``create_sandbox`` picks the configured backend. The DSPy adapter lives in
``fleet_core.sandbox.interpreter`` (imports dspy lazily); child workspaces and artifact promotion
in ``fleet_core.sandbox.children``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fleet_core.sandbox.base import (
    ExecutionError,
    ExecutionResult,
    Sandbox,
    SandboxInfo,
    SandboxLimits,
    SandboxSpec,
    SandboxState,
    ToolBridge,
    ToolPolicy,
)
from fleet_core.sandbox.errors import (
    ExecutionCancelledError,
    ExecutionOutcomeUnknownError,
    ExecutionTimeoutError,
    ResourceLimitError,
    SandboxCrashedError,
    SandboxError,
    SandboxUnavailableError,
    WorkspacePathError,
    WorkspaceQuotaError,
)

if TYPE_CHECKING:
    from fleet_core.config import SandboxSettings
    from fleet_core.tracking import WorkspaceTree

__all__ = [
    "ExecutionCancelledError",
    "ExecutionError",
    "ExecutionOutcomeUnknownError",
    "ExecutionResult",
    "ExecutionTimeoutError",
    "ResourceLimitError",
    "Sandbox",
    "SandboxCrashedError",
    "SandboxError",
    "SandboxInfo",
    "SandboxLimits",
    "SandboxSpec",
    "SandboxState",
    "SandboxUnavailableError",
    "ToolBridge",
    "ToolPolicy",
    "WorkspacePathError",
    "WorkspaceQuotaError",
    "create_sandbox",
]


def create_sandbox(
    spec: SandboxSpec, settings: SandboxSettings, *, tree: WorkspaceTree | None = None
) -> Sandbox:
    """The configured backend's sandbox for ``spec`` (not started); ``tree``: the workspace's
    change-tracked tree, if it has one (the local sandbox's walks then visit only changes)."""
    if settings.backend == "local":
        from fleet_core.sandbox.local import LocalSandbox

        return LocalSandbox(spec, allow_unisolated=settings.allow_unisolated, tree=tree)
    try:
        from fleet_core.sandbox import daytona  # type: ignore[attr-defined, unused-ignore]
    except ImportError:
        raise SandboxUnavailableError(
            "sandbox.backend = 'daytona' but the Daytona backend is not installed in this build"
        ) from None
    sandbox: Sandbox = daytona.DaytonaSandbox(spec, settings=settings)
    return sandbox
