"""``fleet/trace/*``: get (markdown document), list, label."""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fleet_core.errors import InvalidInput
from fleet_lsp.protocol import TraceGetParams, TraceLabelParams, TraceListParams

if TYPE_CHECKING:
    from fleet_lsp.server import FleetServer

LABEL_FIELDS = ("status", "answer", "values", "route", "critical", "group", "expectations")
LABEL_STATUSES = ("good", "bad", "pass", "fail", "unsure")


class FileLabelStore:
    """Trace labels as one JSON file per trace under ``<state>/labels/`` (until the MLflow
    evaluation store takes them over; the handler only sees ``get``/``merge``)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _path(self, trace_id: str) -> Path:
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in trace_id)
        return self.root / f"{safe}.json"

    def get(self, trace_id: str) -> dict[str, Any]:
        path = self._path(trace_id)
        if not path.is_file():
            return {}
        data = json.loads(path.read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}

    def merge(self, trace_id: str, labels: dict[str, Any]) -> dict[str, Any]:
        self.root.mkdir(parents=True, exist_ok=True)
        merged = self.get(trace_id) | labels
        fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".label.")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(merged, handle, sort_keys=True)
        os.replace(tmp, self._path(trace_id))
        return merged


def register(server: FleetServer) -> None:
    @server.fleet_method("fleet/trace/get")
    async def get(ls: FleetServer, p: TraceGetParams) -> dict[str, Any]:
        if not p.trace_id and not p.turn_id:
            raise InvalidInput("fleet/trace/get needs 'traceId' or 'turnId'")
        runtime = await ls.runtime()
        doc = await ls.trace_source.get(runtime, trace_id=p.trace_id, turn_id=p.turn_id)
        return {
            "traceId": doc.trace_id,
            "turnId": doc.turn_id,
            "sessionId": doc.session_id,
            "uri": doc.uri,
            "markdown": doc.markdown,
        }

    @server.fleet_method("fleet/trace/list")
    async def list_(ls: FleetServer, p: TraceListParams) -> dict[str, Any]:
        runtime = await ls.runtime()
        docs = await ls.trace_source.list(runtime, p.session_id, p.limit or 50)
        return {
            "traces": [
                {
                    "traceId": d.trace_id,
                    "turnId": d.turn_id,
                    "sessionId": d.session_id,
                    "uri": d.uri,
                }
                for d in docs
            ]
        }

    @server.fleet_method("fleet/trace/label")
    async def label(ls: FleetServer, p: TraceLabelParams) -> dict[str, Any]:
        runtime = await ls.runtime()
        doc = await ls.trace_source.get(runtime, trace_id=p.trace_id)  # exists, or TraceNotFound
        labels = {name: getattr(p, name) for name in LABEL_FIELDS if getattr(p, name) is not None}
        if not labels:
            raise InvalidInput(f"Give at least one label: {', '.join(LABEL_FIELDS)}")
        if "status" in labels and labels["status"] not in LABEL_STATUSES:
            raise InvalidInput(
                f"Label status must be one of: {', '.join(LABEL_STATUSES)}; "
                f"got {labels['status']!r}"
            )
        store = FileLabelStore(runtime.config.state_dir / "labels")
        merged = await asyncio.to_thread(store.merge, doc.trace_id, labels)
        return {"traceId": doc.trace_id, "labels": merged}
