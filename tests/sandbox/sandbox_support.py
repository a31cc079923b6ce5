"""Shared helpers for the sandbox tests (importable as ``sandbox_support``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from fleet_core.sandbox import Sandbox, SandboxLimits, SandboxSpec
from fleet_core.sandbox.isolation import cgroup_available, find_bwrap
from fleet_core.sandbox.local import LocalSandbox

BACKENDS = ["local"]  # add "daytona" (against the fake server) here

TEST_LIMITS = SandboxLimits(cell_timeout_seconds=20, interrupt_grace_seconds=1.0)

MakeSandbox = Callable[..., Awaitable[Sandbox]]

needs_bwrap = pytest.mark.skipif(find_bwrap() is None, reason="bubblewrap not available")
needs_pids_cgroup = pytest.mark.skipif(
    not cgroup_available()["pids"], reason="no writable pids cgroup: fork bomb would be unbounded"
)


def build_sandbox(backend: str, spec: SandboxSpec, **options: Any) -> Sandbox:
    if backend == "local":
        return LocalSandbox(spec, **options)
    raise AssertionError(f"unknown backend {backend}")
