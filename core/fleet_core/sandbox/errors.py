"""Typed sandbox errors.

User-code exceptions are *data* in an :class:`~fleet_core.sandbox.base.ExecutionResult`; these
errors are about the sandbox itself (it could not start, a cell ran out of time, the worker died).
"""

from __future__ import annotations

from typing import Any

from fleet_core.errors import FleetError, WorkspacePathError

__all__ = [
    "ExecutionCancelledError",
    "ExecutionOutcomeUnknownError",
    "ExecutionTimeoutError",
    "ResourceLimitError",
    "SandboxCrashedError",
    "SandboxError",
    "SandboxUnavailableError",
    "WorkspacePathError",
    "WorkspaceQuotaError",
]


class SandboxError(FleetError):
    """Base of every sandbox failure (not of errors raised by user code)."""

    kind = "SandboxError"


class SandboxUnavailableError(SandboxError):
    """The sandbox could not be created or started; nothing ran, so retrying is safe."""

    kind = "SandboxUnavailable"


class _InterruptedCell(SandboxError):
    """A cell that was stopped before it finished; ``state_preserved`` says if the REPL survived."""

    def __init__(self, message: str, *, state_preserved: bool, **data: Any) -> None:
        super().__init__(message, state_preserved=state_preserved, **data)
        self.state_preserved = state_preserved
        self.partial: Any = data.get("partial")


class ExecutionTimeoutError(_InterruptedCell):
    """The cell exceeded its wall-clock timeout.

    ``state_preserved`` is true when the soft interrupt (SIGINT) ended the cell and the REPL state
    survived, false when the worker had to be killed (state lost, workspace intact).
    """

    kind = "ExecutionTimeout"


class ExecutionCancelledError(_InterruptedCell):
    """The caller cancelled the cell (``interrupt()``); same ``state_preserved`` meaning."""

    kind = "ExecutionCancelled"


class ExecutionOutcomeUnknownError(SandboxError):
    """The transport broke after the cell was submitted: it may or may not have run.

    Never replay the cell. The worker is gone; ``start()`` gives a fresh REPL (files kept).
    """

    kind = "ExecutionOutcomeUnknown"


class SandboxCrashedError(SandboxError):
    """The worker process died (``os._exit``, a signal, OOM kill). REPL state is lost; the
    workspace is intact. ``start()`` gives a fresh REPL."""

    kind = "SandboxCrashed"


class ResourceLimitError(SandboxError):
    """A host-side limit was hit: promotion or transfer quotas, frame size, tool-call budget."""

    kind = "ResourceLimit"


class WorkspaceQuotaError(ResourceLimitError):
    """A cell grew the workspace past ``workspace_quota_bytes`` and kept writing after the soft
    stop, so the worker was killed (REPL state lost; the files written so far stay). The soft
    stop alone is not raised: it is the cell's ``WorkspaceQuotaExceeded`` error, state kept."""

    def __init__(self, message: str, *, state_preserved: bool = False, **data: Any) -> None:
        super().__init__(message, state_preserved=state_preserved, **data)
        self.state_preserved = state_preserved
