"""Every record a face receives from :mod:`fleet_core.api`, each a frozen value.

The core's own records that cross the boundary unchanged (``SessionInfo``, ``TurnResult``, ...,
from ``fleet_core.models``; ``ModelInUse``, one model role's record, from
``fleet_core.localmodel.selection``) are re-exported here, so a face names one module for all of
them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from fleet_core.localmodel.selection import ModelInUse
from fleet_core.models import (
    DatasetContext,
    Memory,
    ModelEntry,
    ModelList,
    ProvenanceRecord,
    SessionInfo,
    SessionModels,
    SessionPage,
    TurnError,
    TurnRequest,
    TurnResult,
    TurnSummary,
    Usage,
    WorkspaceFile,
    WorkspacePage,
)

__all__ = [
    "TRACING_OFF",
    "ArtifactInfo",
    "CandidateInfo",
    "DatasetContext",
    "JevCheck",
    "Memory",
    "ModelEntry",
    "ModelInUse",
    "ModelList",
    "OptimizationProgress",
    "OptimizationRun",
    "OptimizationStatus",
    "ProvenanceRecord",
    "QueuedExport",
    "SandboxIsolation",
    "SessionInfo",
    "SessionModels",
    "SessionPage",
    "StorageInfo",
    "TracingStatus",
    "TurnError",
    "TurnRequest",
    "TurnResult",
    "TurnSummary",
    "Usage",
    "WorkspaceFile",
    "WorkspacePage",
]

TRACING_OFF = 'Tracing is off ([mlflow] destination = "off")'


@dataclass(frozen=True, slots=True)
class QueuedExport:
    """A trace waiting in the export queue (``fleet-lsp trace export --status``)."""

    trace_id: str
    session_id: str
    turn_id: str
    origin_host: str | None
    attempts: int
    last_error: str | None
    next_attempt_at: datetime | None
    created_at: datetime | None

    def wire(self) -> dict[str, Any]:
        def stamp(value: datetime | None) -> str | None:
            return value.isoformat() if value is not None else None

        return {
            "traceId": self.trace_id,
            "sessionId": self.session_id,
            "turnId": self.turn_id,
            "originHost": self.origin_host,
            "attempts": self.attempts,
            "lastError": self.last_error,
            "nextAttemptAt": stamp(self.next_attempt_at),
            "createdAt": stamp(self.created_at),
        }


@dataclass(frozen=True, slots=True)
class ArtifactInfo:
    """An artifact in a Session workspace with its provenance chain (newest record last)."""

    path: str
    size_bytes: int
    sha256: str
    provenance: list[ProvenanceRecord]


@dataclass(frozen=True, slots=True)
class OptimizationProgress:
    """One progress report of an optimization run (see fleet_core.optimization.service)."""

    phase: str  # dataset | search | validation | saving | done
    done: int = 0
    total: int = 0
    best_score: float | None = None
    message: str = ""


@dataclass(frozen=True, slots=True)
class CandidateInfo:
    version: str
    created_at: str
    gate_passed: bool
    gate: list[tuple[str, bool, str]]
    candidate_digest: str
    changed_components: list[str]
    active: bool

    @classmethod
    def of(cls, manifest: Any, *, active: bool) -> CandidateInfo:
        """A stored candidate (``optimization.candidates.Manifest``) as the faces show it."""
        return cls(
            version=manifest.version,
            created_at=manifest.created_at,
            gate_passed=manifest.gate.passed,
            gate=[(c.name, c.passed, c.detail) for c in manifest.gate.checks],
            candidate_digest=manifest.candidate_digest,
            changed_components=list(manifest.changed_components),
            active=active,
        )


@dataclass(frozen=True, slots=True)
class OptimizationRun:
    version: str
    gate_passed: bool
    gate: list[tuple[str, bool, str]]
    changed_components: list[str]
    candidate_digest: str
    report_path: Path
    mlflow_run_id: str | None
    rollouts: int
    host_seconds: float
    dataset_sizes: dict[str, int]
    notes: list[str]


@dataclass(frozen=True, slots=True)
class OptimizationStatus:
    session_id: str
    active_digest: str
    active_version: str | None
    candidates: list[CandidateInfo]


@dataclass(frozen=True, slots=True)
class TracingStatus:
    """Whether Turns are traced: the destination kind, the experiment, or why not."""

    enabled: bool
    destination: str
    experiment: str | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class StorageInfo:
    backend: str  # "sqlite" | "postgresql"
    state_dir: Path


@dataclass(frozen=True, slots=True)
class JevCheck:
    """The optional Jev decision API: off (no ``FLEET_JEV_API_KEY``), or on at ``base_url``
    with the probe's ``problem`` ('' when ``/v1/models`` answered) and the models the key may
    use. Never the key."""

    on: bool
    base_url: str | None = None
    model: str | None = None
    problem: str = ""
    models: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SandboxIsolation:
    """The layers a LocalSandbox would get on this machine (no sandbox is started)."""

    backend: str  # "bwrap" | "none" (unisolated, allowed) | "refused"
    bwrap: str | None  # the bubblewrap binary
    bwrap_version: str | None
    cgroup_pids: bool
    cgroup_memory: bool
    fork_bound: str  # what bounds forks: a pids cgroup, a dedicated uid, or none (why)
    rlimits: tuple[str, ...]
    allow_unisolated: bool

    @classmethod
    def of(cls, found: dict[str, Any]) -> SandboxIsolation:
        """From ``sandbox.isolation.describe_local_isolation``'s summary."""
        return cls(
            backend=str(found["backend"]),
            bwrap=found.get("bwrap"),
            bwrap_version=found.get("bwrap_version"),
            cgroup_pids=bool(found.get("cgroup_pids")),
            cgroup_memory=bool(found.get("cgroup_memory")),
            fork_bound=str(found.get("fork_bound") or ""),
            rlimits=tuple(found.get("rlimits") or ()),
            allow_unisolated=bool(found.get("allow_unisolated")),
        )
