"""``fleet/debug/info`` (command ``fleet.printDebugInformation``): what a bug report needs."""

from __future__ import annotations

import asyncio
import sys
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from lsprotocol import types

from fleet_lsp import __version__
from fleet_lsp.protocol import PROTOCOL_VERSION, DebugParams

if TYPE_CHECKING:
    from fleet_core.api import FleetRuntime
    from fleet_core.config import EffectiveConfig
    from fleet_lsp.server import FleetServer


def register(server: FleetServer) -> None:
    @server.fleet_method("fleet/debug/info")
    async def info(ls: FleetServer, p: DebugParams) -> dict[str, Any]:
        runtime = await ls.runtime()
        config = await runtime.effective_config(p.session_id) if p.session_id else runtime.config
        data: dict[str, Any] = {
            "server": {
                "name": "fleet-lsp",
                "version": __version__,
                "python": sys.version.split()[0],
            },
            "protocolVersion": PROTOCOL_VERSION,
            "client": {
                "name": ls.client.name,
                "protocolVersion": ls.client.protocol_version,
                "turnEvents": ls.client.turn_events,
                "workDoneProgress": ls.client.work_done_progress,
                "showDocument": ls.client.show_document,
                "textDocumentContent": ls.client.text_document_content,
            },
            "stateDir": str(config.state_dir),
            "database": runtime.describe_storage().backend,
            "configDigest": config.digest(),
            "settings": {key: {"value": v, "source": s} for key, v, s in config.items()},
            "secrets": config.secret_status(),
            "sessions": len(await runtime.list_sessions()),
            "progressTokens": len(ls.work_done_progress.tokens),
            "runningTurns": [
                {"sessionId": sid, "turnId": r.turn_id} for sid, r in ls.turns_by_session.items()
            ],
            **await asyncio.to_thread(_health, runtime, config),
        }
        lines = [f"fleet-lsp {__version__} (protocol {PROTOCOL_VERSION}), client {ls.client.name}"]
        lines += [
            f"state: {data['stateDir']} ({data['database']}), config {data['configDigest'][:12]}"
        ]
        lines += [f"running turns: {len(data['runningTurns'])}"]
        ls.window_log_message(
            types.LogMessageParams(type=types.MessageType.Info, message="\n".join(lines))
        )
        return data


def endpoint_host(api_base: str | None) -> str | None:
    """An endpoint as ``scheme://host[:port]/path``: never its credentials or query."""
    if not api_base:
        return None
    parts = urlsplit(api_base)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}" if parts.scheme else None


def _health(runtime: FleetRuntime, config: EffectiveConfig) -> dict[str, Any]:
    """The sandbox's isolation and each model role's endpoint (no probe: no network here);
    blocking (bwrap --version), so it runs in a worker thread."""
    from fleet_core.api import diagnostics

    backend = config.settings.sandbox.backend
    sandbox: dict[str, Any] = {"backend": backend}
    if backend == "local":
        found = diagnostics.describe_sandbox(config)
        sandbox.update(
            isolation=found.backend,
            bwrapVersion=found.bwrap_version,
            cgroupPids=bool(found.cgroup_pids),
            cgroupMemory=bool(found.cgroup_memory),
            forkBound=found.fork_bound,
            rlimits=list(found.rlimits or []),
        )
    models = [
        {
            "role": check.role,
            "configured": check.configured,
            "model": check.model,
            "endpoint": endpoint_host(check.api_base),
            "problem": check.problem or None,
        }
        for check in diagnostics.check_models(config, probe=False)
    ]
    return {"sandbox": sandbox, "models": models}
