"""``fleet/artifact/*`` and ``workspace/textDocumentContent`` for ``fleet:/`` URIs."""

from __future__ import annotations

import asyncio
import hashlib
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from lsprotocol import types

from fleet_core.errors import FleetError, InvalidInput
from fleet_core.workspace import artifact_uri
from fleet_lsp.documents import (
    FleetUri,
    optimization_report_uri,
    parse_uri,
    read_artifact,
)
from fleet_lsp.features.context import file_path
from fleet_lsp.protocol import (
    ArtifactEntry,
    ArtifactListReply,
    ArtifactOpenParams,
    ArtifactOpenReply,
    ArtifactReadResult,
    ArtifactSaveParams,
    ArtifactSaveReply,
    SessionParams,
    UriParams,
)

if TYPE_CHECKING:
    from fleet_core.api import ArtifactInfo
    from fleet_lsp.server import FleetServer


class ClientCapabilityMissing(FleetError):
    kind = "ClientCapabilityMissing"


async def document_text(ls: FleetServer, uri: str) -> str:
    """The text behind any ``fleet:/`` URI (artifact, trace or optimization report)."""
    parsed = parse_uri(uri)
    if parsed.kind != "artifact":
        return (await markdown_document(ls, parsed))[1]
    runtime = await ls.runtime()
    return (await read_artifact(runtime, uri))["text"]


async def markdown_document(ls: FleetServer, parsed: FleetUri) -> tuple[str, str]:
    """A trace or a candidate's optimization report: its canonical URI and markdown."""
    runtime = await ls.runtime()
    if parsed.kind == "optimization":
        text = await runtime.optimization.report(parsed.session_id, parsed.version)
        return optimization_report_uri(parsed.session_id, parsed.version), text
    doc = await ls.trace_documents.service.get(runtime, trace_id=parsed.trace_id)
    return doc.uri, doc.markdown


def _write_atomic(target: Path, data: bytes) -> None:
    if target.is_dir():
        raise InvalidInput(f"{target} is a folder; give a file path to save to")
    if not target.parent.is_dir():
        raise InvalidInput(f"Folder {target.parent} does not exist")
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _entry(session_id: str, info: ArtifactInfo) -> ArtifactEntry:
    """An artifact with its newest provenance record's Turn and agent, if it was promoted."""
    newest = info.provenance[-1] if info.provenance else None
    return ArtifactEntry(
        uri=artifact_uri(session_id, info.path),
        path=info.path,
        size_bytes=info.size_bytes,
        sha256=info.sha256,
        turn_id=(newest.turn_id or None) if newest else None,
        agent_id=newest.agent_id if newest else None,
        provenance=list(info.provenance) if newest else None,
    )


def register(server: FleetServer) -> None:
    @server.fleet_method("fleet/artifact/list")
    async def list_(ls: FleetServer, p: SessionParams) -> ArtifactListReply:
        runtime = await ls.runtime()
        infos = await runtime.list_artifacts(p.session_id)
        return ArtifactListReply(artifacts=[_entry(p.session_id, info) for info in infos])

    @server.fleet_method("fleet/artifact/read")
    async def read(ls: FleetServer, p: UriParams) -> ArtifactReadResult:
        parsed = parse_uri(p.uri)
        runtime = await ls.runtime()
        if parsed.kind != "artifact":
            uri, text = await markdown_document(ls, parsed)
            data = text.encode()
            return {
                "uri": uri,
                "text": text,
                "languageId": "markdown",
                "sizeBytes": len(data),
                "sha256": hashlib.sha256(data).hexdigest(),
                "binary": False,
            }
        return await read_artifact(runtime, p.uri)

    @server.fleet_method("fleet/artifact/open")
    async def open_(ls: FleetServer, p: ArtifactOpenParams) -> ArtifactOpenReply:
        parsed = parse_uri(p.uri)
        runtime = await ls.runtime()
        if parsed.kind == "artifact":
            await runtime.stat_file(parsed.session_id, parsed.path)  # exists, or a clear error
            uri = artifact_uri(parsed.session_id, parsed.path)
        else:
            uri = (await markdown_document(ls, parsed))[0]
        if not ls.client.show_document:
            raise ClientCapabilityMissing(
                "This client cannot show documents (window.showDocument); read the text with "
                "fleet/artifact/read instead",
                uri=uri,
            )
        result = await ls.window_show_document_async(
            types.ShowDocumentParams(uri=uri, take_focus=p.take_focus)
        )
        return ArtifactOpenReply(shown=bool(result and result.success), uri=uri)

    @server.fleet_method("fleet/artifact/save")
    async def save(ls: FleetServer, p: ArtifactSaveParams) -> ArtifactSaveReply:
        parsed = parse_uri(p.uri)
        if parsed.kind != "artifact":
            raise InvalidInput(
                "Only artifacts can be saved; traces and optimization reports are read-only "
                "documents (fleet/artifact/read)"
            )
        runtime = await ls.runtime()
        target = file_path(p.target)
        data = await runtime.read_file(parsed.session_id, parsed.path)
        await asyncio.to_thread(_write_atomic, target, data)
        return ArtifactSaveReply(
            target=target.as_uri(), size_bytes=len(data), sha256=hashlib.sha256(data).hexdigest()
        )

    @server.feature(types.WORKSPACE_TEXT_DOCUMENT_CONTENT)
    async def text_document_content(
        ls: FleetServer, params: types.TextDocumentContentParams
    ) -> types.TextDocumentContentResult:
        from fleet_lsp.server import rpc_error

        try:
            return types.TextDocumentContentResult(text=await document_text(ls, params.uri))
        except FleetError as exc:
            raise rpc_error(exc) from None
