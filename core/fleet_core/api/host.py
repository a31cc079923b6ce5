"""What a capability object (``traces``, ``evaluation``, ``optimization``) needs of the runtime
that owns it: a narrow Protocol, so the capabilities never import ``api.runtime``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from fleet_core.config import EffectiveConfig
    from fleet_core.engine.lm import LmProvider
    from fleet_core.models import SessionInfo, TurnRequest, TurnResult, TurnSummary
    from fleet_core.observability.export import TraceExporter
    from fleet_core.observability.tracing import TurnTracer
    from fleet_core.store import Store


class RuntimeHost(Protocol):
    """The runtime's state and Session checks a capability uses (``FleetRuntime`` is one)."""

    config: EffectiveConfig
    store: Store

    @property
    def tracer(self) -> TurnTracer: ...

    @property
    def exporter(self) -> TraceExporter: ...

    @property
    def traces(self) -> Any: ...

    def models(self) -> LmProvider: ...

    async def get_turn(self, turn_id: str) -> TurnSummary: ...

    async def describe_session(self, session_id: str) -> SessionInfo: ...

    async def effective_config(self, session_id: str) -> EffectiveConfig: ...

    async def own_session(self, session_id: str) -> None: ...

    async def sync_session(self, session_id: str, *, publish: bool = False) -> None: ...

    async def new_session(self, session_id: str | None = None, mode: str | None = None) -> Any: ...

    async def write_file(self, session_id: str, path: str, data: bytes) -> Any: ...

    async def run_turn(self, request: TurnRequest) -> TurnResult: ...
