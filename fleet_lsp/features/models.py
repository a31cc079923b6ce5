"""``fleet/models/list`` (the endpoint's models, cached briefly) and ``fleet/session/setModels``
(a Session's model ids)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fleet_lsp.protocol import ModelsListParams, SetModelsParams

if TYPE_CHECKING:
    from fleet_core.models import ModelList, SessionModels
    from fleet_lsp.server import FleetServer


def register(server: FleetServer) -> None:
    @server.fleet_method("fleet/models/list")
    async def list_(ls: FleetServer, p: ModelsListParams) -> ModelList:
        runtime = await ls.runtime()
        return await runtime.list_models(refresh=p.refresh)

    @server.fleet_method("fleet/session/setModels")
    async def set_models(ls: FleetServer, p: SetModelsParams) -> SessionModels:
        runtime = await ls.runtime()
        chosen = await runtime.set_models(p.session_id, root=p.root, sub=p.sub)
        ls.session_changed(p.session_id, "updated")
        return chosen
