"""The core's one API boundary: what the faces (the language server, the CLI, the demo) may use.

- :class:`FleetRuntime` (``api/runtime.py``): a process's Sessions, workspaces, datasets,
  artifacts, memory, history and Turns, with ``.traces`` (``api/traces.py``), ``.evaluation``
  (``api/evaluation.py``) and ``.optimization`` (``api/optimization.py``). Async throughout.
- :mod:`diagnostics` and :mod:`local_model`: configuration-only checks and the embedded model's
  control; synchronous and blocking, so call them from a thread.
- :mod:`records`: every record a face receives.

Nothing inside the core imports this package (tests/unit/test_invariants.py); faces import
nothing from the core but this package and the leaf modules (errors, config, events,
event_payloads, models, modes, workspace path rules, net, offline).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fleet_core.api import diagnostics, local_model
    from fleet_core.api.records import (
        TRACING_OFF,
        ArtifactInfo,
        CandidateInfo,
        JevCheck,
        ModelInUse,
        OptimizationProgress,
        OptimizationRun,
        OptimizationStatus,
        SandboxIsolation,
        StorageInfo,
        TracingStatus,
    )
    from fleet_core.api.runtime import FleetRuntime, TraceExportMode

# Loaded on first use (PEP 562), so a face that needs one module (``fleet-lsp config show``:
# the diagnostics) does not pay for the runtime and every record.
_HOMES = {
    "FleetRuntime": "runtime",
    "TraceExportMode": "runtime",
    "diagnostics": None,
    "local_model": None,
    **dict.fromkeys(
        (
            "TRACING_OFF",
            "ArtifactInfo",
            "CandidateInfo",
            "JevCheck",
            "ModelInUse",
            "OptimizationProgress",
            "OptimizationRun",
            "OptimizationStatus",
            "SandboxIsolation",
            "StorageInfo",
            "TracingStatus",
        ),
        "records",
    ),
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    home = _HOMES[name]
    if home is None:
        return importlib.import_module(f"{__name__}.{name}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)


__all__ = [
    "TRACING_OFF",
    "ArtifactInfo",
    "CandidateInfo",
    "FleetRuntime",
    "JevCheck",
    "ModelInUse",
    "OptimizationProgress",
    "OptimizationRun",
    "OptimizationStatus",
    "SandboxIsolation",
    "StorageInfo",
    "TraceExportMode",
    "TracingStatus",
    "diagnostics",
    "local_model",
]
