"""Typed errors of tracing, replays and labels (each ``kind`` maps to a protocol error code)."""

from __future__ import annotations

from fleet_core.errors import FleetError


class TracingUnavailable(FleetError):
    """Tracing is off, or the MLflow destination cannot be reached or is misconfigured."""

    kind = "TracingUnavailable"


class TraceNotFound(FleetError):
    kind = "TraceNotFound"


class ReplayError(FleetError):
    """A replay snapshot cannot be captured or read."""

    kind = "ReplayInvalid"


class ReplayTooLarge(ReplayError):
    """Capture would exceed a replay bound; raised before the Turn runs."""

    kind = "ReplayTooLarge"


class ReplayRefused(ReplayError):
    """Capture would put a configured secret into the snapshot; raised before the Turn runs."""

    kind = "ReplayRefused"


class ReplayCorrupt(ReplayError):
    """Stored bytes fail a digest, size or schema check (tampered or damaged)."""

    kind = "ReplayCorrupt"
