"""``fleet/debug/info`` (command ``fleet.printDebugInformation``): what a bug report needs."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from fleet_lsp import __version__
from fleet_lsp.protocol import PROTOCOL_VERSION, DebugParams

if TYPE_CHECKING:
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
