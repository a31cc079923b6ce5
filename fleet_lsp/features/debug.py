"""``fleet/debug/info`` (command ``fleet.printDebugInformation``): what a bug report needs."""

from __future__ import annotations

import asyncio
import sys
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from lsprotocol import types

from fleet_lsp import __version__
from fleet_lsp.protocol import (
    PROTOCOL_VERSION,
    DebugInfoReply,
    DebugModelWire,
    DebugParams,
    DebugSandboxWire,
)

if TYPE_CHECKING:
    from fleet_core.api import FleetRuntime
    from fleet_core.config import EffectiveConfig
    from fleet_lsp.server import FleetServer


def register(server: FleetServer) -> None:
    @server.fleet_method("fleet/debug/info")
    async def info(ls: FleetServer, p: DebugParams) -> DebugInfoReply:
        runtime = await ls.runtime()
        config = await runtime.effective_config(p.session_id) if p.session_id else runtime.config
        sandbox, models = await asyncio.to_thread(_health, runtime, config)
        reply = DebugInfoReply(
            server={"name": "fleet-lsp", "version": __version__, "python": sys.version.split()[0]},
            protocol_version=PROTOCOL_VERSION,
            client=_client(ls),
            state_dir=str(config.state_dir),
            database=runtime.describe_storage().backend,
            config_digest=config.digest(),
            settings={key: {"value": v, "source": s} for key, v, s in config.items()},
            secrets=config.secret_status(),
            sessions=len(await runtime.list_sessions()),
            progress_tokens=len(ls.work_done_progress.tokens),
            running_turns=[
                {"sessionId": t.session_id, "turnId": t.turn_id} for t in ls.editor_turns.running()
            ],
            sandbox=sandbox,
            models=models,
        )
        ls.window_log_message(
            types.LogMessageParams(type=types.MessageType.Info, message=_summary(ls, reply))
        )
        return reply


def _client(ls: FleetServer) -> dict[str, Any]:
    """What the client told the server at ``initialize``."""
    client = ls.client
    return {
        "name": client.name,
        "protocolVersion": client.protocol_version,
        "turnEvents": client.turn_events,
        "workDoneProgress": client.work_done_progress,
        "showDocument": client.show_document,
        "textDocumentContent": client.text_document_content,
    }


def _summary(ls: FleetServer, reply: DebugInfoReply) -> str:
    """The debug information's first lines, for the client's log."""
    return "\n".join(
        [
            f"fleet-lsp {__version__} (protocol {PROTOCOL_VERSION}), client {ls.client.name}",
            f"state: {reply.state_dir} ({reply.database}), config {reply.config_digest[:12]}",
            f"running turns: {len(reply.running_turns)}",
        ]
    )


def endpoint_host(api_base: str | None) -> str | None:
    """An endpoint as ``scheme://host[:port]/path``: never its credentials or query."""
    if not api_base:
        return None
    parts = urlsplit(api_base)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}" if parts.scheme else None


def _health(
    runtime: FleetRuntime, config: EffectiveConfig
) -> tuple[DebugSandboxWire, list[DebugModelWire]]:
    """The sandbox's isolation and each model role's endpoint (no probe: no network here);
    blocking (bwrap --version), so it runs in a worker thread."""
    from fleet_core.api import diagnostics

    backend = config.settings.sandbox.backend
    sandbox: DebugSandboxWire = {"backend": backend}
    if backend == "local":
        found = diagnostics.describe_sandbox(config)
        sandbox = {
            "backend": backend,
            "isolation": found.backend,
            "bwrapVersion": found.bwrap_version,
            "cgroupPids": bool(found.cgroup_pids),
            "cgroupMemory": bool(found.cgroup_memory),
            "forkBound": found.fork_bound,
            "rlimits": list(found.rlimits or []),
        }
    models: list[DebugModelWire] = [
        {
            "role": check.role,
            "configured": check.configured,
            "model": check.model,
            "endpoint": endpoint_host(check.api_base),
            "problem": check.problem or None,
        }
        for check in diagnostics.check_models(config, probe=False)
    ]
    return sandbox, models
