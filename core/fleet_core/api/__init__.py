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
