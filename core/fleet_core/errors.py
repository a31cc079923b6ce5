"""Typed errors of the Fleet core; each has a stable ``kind`` the protocol layer maps to a code."""

from __future__ import annotations

from typing import Any, ClassVar

REPORTED = "fleet_reported"
"""A log record's ``extra`` key: what it says also reaches the caller in a result (a failed
Turn's error), so a face that shows that result may leave the record out (the CLI does)."""


class FleetError(Exception):
    """Base of every error a person may see; the message is written for that person."""

    kind: ClassVar[str] = "FleetError"

    def __init__(self, message: str, **data: Any) -> None:
        super().__init__(message)
        self.message = message
        self.data = data


class ConfigError(FleetError):
    kind = "ConfigError"


class InvalidInput(FleetError):
    kind = "InvalidInput"


class SessionNotFound(FleetError):
    kind = "SessionNotFound"


class SessionExists(FleetError):
    kind = "SessionExists"


class SessionOwned(FleetError):
    kind = "SessionOwned"


class SessionLimit(FleetError):
    """This process already holds ``runtime.max_active_sessions`` Sessions."""

    kind = "SessionLimit"


class TurnBusy(FleetError):
    kind = "TurnBusy"

    @classmethod
    def running(cls, session_id: str, turn_id: str | None, action: str | None = None) -> TurnBusy:
        """The one message for a Session that already runs a Turn (``action``: what was
        refused, e.g. "delete the Session"; default: starting another Turn)."""
        turn = turn_id or "(starting)"
        then = f"before you {action}" if action else "or wait for it"
        return cls(
            f"Session '{session_id}' is already running Turn {turn}; cancel it "
            f"(fleet/turn/cancel) {then}",
            session_id=session_id,
            turn_id=turn_id,
        )


class TurnNotFound(FleetError):
    kind = "TurnNotFound"


class IdempotencyConflict(FleetError):
    kind = "IdempotencyConflict"


class WorkspacePathError(FleetError):
    kind = "WorkspacePath"


class WorkspaceFileNotFound(FleetError):
    kind = "WorkspaceFileNotFound"


class FileTooLarge(FleetError):
    kind = "FileTooLarge"


class DatasetChanged(FleetError):
    kind = "DatasetChanged"


class ModelUnavailable(FleetError):
    kind = "ModelUnavailable"


class MemoryNotFound(FleetError):
    kind = "MemoryNotFound"


class StoreError(FleetError):
    kind = "StoreError"
