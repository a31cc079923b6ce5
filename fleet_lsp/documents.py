"""``fleet:/`` URIs and the text behind them: artifacts and trace documents.

URIs (single slash, no authority, no query; see docs/protocol.md):

- ``fleet:/sessions/<sessionId>/artifacts/<path under artifacts/>``
- ``fleet:/sessions/<sessionId>/traces/<traceId>.md``
- ``fleet:/sessions/<sessionId>/optimization/<version>.md`` (a GEPA candidate's report)

Artifacts are served as text when they look like text, or as a readable summary (size, digest,
type) when they are binary. Trace documents come from :class:`fleet_lsp.traces.TraceService`,
which renders the stored MLflow trace; :class:`StoreTraceSource` here is its fallback when
tracing is off or unavailable: what the store holds (Turn, route, answer, usage, artifacts with
provenance) plus any TurnEvents this server process saw. Both are rendered by the core's one
trace renderer (``runtime.trace_markdown``).
"""

from __future__ import annotations

import mimetypes
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal
from urllib.parse import quote, unquote

from fleet_core.errors import InvalidInput, TurnNotFound
from fleet_core.workspace import (
    artifact_uri,
    is_probably_text,
    validate_relative_path,
    validate_session_id,
)
from fleet_lsp.protocol import URI_SCHEME, ArtifactReadResult

if TYPE_CHECKING:
    from fleet_core.api import FleetRuntime
    from fleet_core.events import TurnEvent
    from fleet_core.models import TurnSummary

MAX_TEXT_BYTES = 2_000_000
_LANGUAGES = {
    ".csv": "csv",
    ".tsv": "tsv",
    ".json": "json",
    ".jsonl": "jsonl",
    ".md": "markdown",
    ".py": "python",
    ".txt": "plaintext",
    ".log": "log",
    ".html": "html",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".toml": "toml",
    ".sql": "sql",
    ".xml": "xml",
    ".svg": "xml",
    ".js": "javascript",
    ".ts": "typescript",
    ".sh": "shellscript",
}


@dataclass(frozen=True, slots=True)
class FleetUri:
    kind: Literal["artifact", "trace", "optimization"]
    session_id: str
    path: str = ""  # workspace path, e.g. "artifacts/revenue.csv" (artifacts)
    trace_id: str = ""  # (traces)
    version: str = ""  # a candidate's version (optimization reports)


def normalize_uri(uri: str) -> str:
    """``fleet:///x`` and ``fleet://x`` become ``fleet:/x``."""
    if uri.startswith(f"{URI_SCHEME}://"):
        rest = uri[len(URI_SCHEME) + 3 :]
        return f"{URI_SCHEME}:/{rest.lstrip('/')}"
    return uri


def parse_uri(uri: str) -> FleetUri:
    """Parse a ``fleet:/`` URI; :class:`InvalidInput` (sent as -32602) says what is wrong."""
    normalized = normalize_uri(uri)
    prefix = f"{URI_SCHEME}:/sessions/"
    if not normalized.startswith(prefix) or "?" in normalized or "#" in normalized:
        raise InvalidInput(
            f"Not a fleet document URI: {uri[:200]!r}; expected "
            "fleet:/sessions/<sessionId>/artifacts/<path>, "
            "fleet:/sessions/<sessionId>/traces/<traceId>.md or "
            "fleet:/sessions/<sessionId>/optimization/<version>.md"
        )
    parts = [unquote(p) for p in normalized[len(prefix) :].split("/")]
    if len(parts) < 3:
        raise InvalidInput(f"Incomplete fleet URI {uri[:200]!r}: name an artifact or a trace")
    session_id = validate_session_id(parts[0])
    if parts[1] == "artifacts":
        path = "/".join(["artifacts", *parts[2:]])
        validate_relative_path(path)
        return FleetUri("artifact", session_id, path=path)
    if parts[1] == "traces" and len(parts) == 3 and parts[2].endswith(".md"):
        trace_id = parts[2][: -len(".md")]
        if not trace_id:
            raise InvalidInput(f"Empty trace id in {uri[:200]!r}")
        return FleetUri("trace", session_id, trace_id=trace_id)
    if parts[1] == "optimization" and len(parts) == 3 and parts[2].endswith(".md"):
        version = parts[2][: -len(".md")]
        if not version:
            raise InvalidInput(f"Empty candidate version in {uri[:200]!r}")
        return FleetUri("optimization", session_id, version=version)
    raise InvalidInput(
        f"Unknown fleet URI {uri[:200]!r}: the second segment must be 'artifacts', "
        "'traces/<traceId>.md' or 'optimization/<version>.md'"
    )


def trace_uri(session_id: str, trace_id: str) -> str:
    return f"{URI_SCHEME}:/sessions/{quote(session_id)}/traces/{quote(trace_id, safe='')}.md"


def optimization_report_uri(session_id: str, version: str) -> str:
    """The read-only report of a GEPA candidate (``fleet/optimize/status`` lists them)."""
    return f"{URI_SCHEME}:/sessions/{quote(session_id)}/optimization/{quote(version, safe='')}.md"


def language_id(path: str) -> str | None:
    lowered = path.lower()
    for suffix, lang in _LANGUAGES.items():
        if lowered.endswith(suffix):
            return lang
    return None


async def read_artifact(runtime: FleetRuntime, uri: str) -> ArtifactReadResult:
    """The artifact's text, or a readable summary when it is binary or too large."""
    parsed = parse_uri(uri)
    if parsed.kind != "artifact":
        raise InvalidInput(f"{uri[:200]!r} is not an artifact; read the URI as a document")
    info = await runtime.stat_file(parsed.session_id, parsed.path)
    head = await runtime.read_file(parsed.session_id, parsed.path, max_bytes=MAX_TEXT_BYTES)
    canonical = artifact_uri(parsed.session_id, parsed.path)
    lang = language_id(parsed.path)
    binary = not is_probably_text(head[:8192])
    if binary:
        text = binary_summary(parsed.path, info.size_bytes, info.sha256)
        lang = "markdown"
    else:
        text = head.decode("utf-8", errors="replace")
        if info.size_bytes > len(head):
            text += (
                f"\n\n[fleet: showing the first {len(head):,} of {info.size_bytes:,} bytes; "
                "save the artifact with fleet/artifact/save to get all of it]\n"
            )
    result: ArtifactReadResult = {
        "uri": canonical,
        "text": text,
        "sizeBytes": info.size_bytes,
        "sha256": info.sha256,
        "binary": binary,
    }
    if lang:
        result["languageId"] = lang
    return result


def binary_summary(path: str, size_bytes: int, sha256: str) -> str:
    kind = mimetypes.guess_type(path)[0] or "application/octet-stream"
    return (
        f"# Binary artifact `{path}`\n\n"
        f"- Type: {kind}\n- Size: {size_bytes:,} bytes\n- sha256: `{sha256}`\n\n"
        "The bytes are not shown here. Save it with `fleet/artifact/save` "
        "(command `fleet.saveArtifact`) or `fleet-lsp artifacts get`.\n"
    )


# ---------------------------------------------------------------------------------------------
# Traces
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TraceDocument:
    trace_id: str
    turn_id: str
    session_id: str
    uri: str
    markdown: str


EventLookup = Mapping[str, Sequence["TurnEvent"]]


class StoreTraceSource:
    """A Turn's trace document from its stored outcome and the events this process observed
    (the fallback when its MLflow trace cannot be read), rendered by the core's one trace
    renderer (``fleet_core.observability.traceview``) through the facade."""

    def __init__(self, events: EventLookup | None = None) -> None:
        self._events: EventLookup = events if events is not None else {}

    async def get(
        self, runtime: FleetRuntime, turn: TurnSummary, note: str | None = None
    ) -> TraceDocument:
        """The document; ``note`` (why there is no trace) is rendered at its top."""
        from fleet_core.api.traces import stored_trace_view

        session_id = await runtime.turn_session(turn.turn_id)
        try:
            result = await runtime.turn_result(turn.turn_id)
        except TurnNotFound:  # still running: no stored result yet
            result = {}
        artifacts = [
            {
                "path": a.path,
                "size_bytes": a.size_bytes,
                "sha256": a.sha256,
                "uri": artifact_uri(session_id, a.path),
                "provenance": [p.model_dump(mode="json") for p in a.provenance],
            }
            for a in await runtime.list_artifacts(session_id)
        ]
        view = stored_trace_view(
            turn,
            session_id=session_id,
            result=result,
            artifacts=artifacts,
            events=self._events.get(turn.turn_id, ()),
            note=note,
        )
        markdown = await runtime.traces.markdown(view)
        tid = view.trace_id
        return TraceDocument(tid, turn.turn_id, session_id, trace_uri(session_id, tid), markdown)
