"""Thin ``fleet/*`` handlers, one module per family; each has ``register(server)``."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fleet_lsp.server import FleetServer


def register_all(server: FleetServer) -> None:
    from fleet_lsp.features import (
        artifacts,
        context,
        debug,
        memory,
        models,
        optimize,
        sessions,
        traces,
        turns,
    )

    for module in (sessions, context, turns, artifacts, traces, memory, models, optimize, debug):
        module.register(server)
