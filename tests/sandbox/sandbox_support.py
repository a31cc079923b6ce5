"""Shared helpers for the sandbox tests (importable as ``sandbox_support``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from fleet_core.sandbox import Sandbox, SandboxLimits, SandboxSpec
from fleet_core.sandbox.isolation import cgroup_available, find_bwrap
from fleet_core.sandbox.local import LocalSandbox

BACKENDS = ["local", "daytona"]  # "daytona" runs the real SDK against tests/sandbox/daytona_fake.py

TEST_LIMITS = SandboxLimits(cell_timeout_seconds=20, interrupt_grace_seconds=1.0)

MakeSandbox = Callable[..., Awaitable[Sandbox]]

needs_bwrap = pytest.mark.skipif(find_bwrap() is None, reason="bubblewrap not available")
needs_pids_cgroup = pytest.mark.skipif(
    not cgroup_available()["pids"], reason="no writable pids cgroup: fork bomb would be unbounded"
)


# What each backend's transport allows (the conformance suite asserts the rest everywhere).
CAPABILITIES: dict[str, dict[str, bool]] = {
    "local": {"fd_output_captured": True},
    # Daytona's interpreter drops non-protocol lines written straight to fd 1 (not captured).
    "daytona": {"fd_output_captured": False},
}


def build_sandbox(backend: str, spec: SandboxSpec, **options: Any) -> Sandbox:
    if backend == "local":
        return LocalSandbox(spec, **options)
    if backend == "daytona":
        from daytona_testing import build_daytona_sandbox

        return build_daytona_sandbox(spec, **options)
    raise AssertionError(f"unknown backend {backend}")


def break_transport_after_next_cell(sandbox: Sandbox) -> None:
    """Make the next cell's transport fail *after* the cell ran, where the backend needs help.

    Locally the cell itself closes the protocol fds; on Daytona the fake server drops the
    websocket with 1011 once the code has run.
    """
    remote_id = getattr(sandbox, "remote_id", None)
    if remote_id is not None:
        from daytona_testing import current_fake

        current_fake().drop_next_execution(remote_id)
