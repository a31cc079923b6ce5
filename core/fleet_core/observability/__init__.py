"""Tracing (MLflow), redaction and immutable replays.

The only package that imports mlflow, and only lazily: importing ``fleet_core.observability`` or
creating a tracer does not load mlflow; the first trace written (or read) does.
"""

from __future__ import annotations

from fleet_core.observability.destination import MlflowDestination, resolve_destination
from fleet_core.observability.errors import (
    ReplayCorrupt,
    ReplayError,
    ReplayRefused,
    ReplayTooLarge,
    TraceNotFound,
    TracingUnavailable,
)
from fleet_core.observability.redaction import (
    RedactingFilter,
    Redactor,
    install_log_redaction,
)
from fleet_core.observability.tracing import (
    MlflowTracer,
    NoopTracer,
    TurnTrace,
    TurnTracer,
    TurnTraceStart,
    configured_tracer,
    create_tracer,
    load_trace,
    tee_emit,
)

__all__ = [
    "MlflowDestination",
    "MlflowTracer",
    "NoopTracer",
    "RedactingFilter",
    "Redactor",
    "ReplayCorrupt",
    "ReplayError",
    "ReplayRefused",
    "ReplayTooLarge",
    "TraceNotFound",
    "TracingUnavailable",
    "TurnTrace",
    "TurnTraceStart",
    "TurnTracer",
    "configured_tracer",
    "create_tracer",
    "install_log_redaction",
    "load_trace",
    "resolve_destination",
    "tee_emit",
]
