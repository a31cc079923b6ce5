"""``fleet:/`` URIs and the text behind them: artifacts and trace documents.

URIs (single slash, no authority, no query; see docs/protocol.md):

- ``fleet:/sessions/<sessionId>/artifacts/<path under artifacts/>``
- ``fleet:/sessions/<sessionId>/traces/<traceId>.md``
- ``fleet:/sessions/<sessionId>/optimization/<version>.md`` (a GEPA candidate's report)

Artifacts are served as text when they look like text, or as a readable summary (size, digest,
type) when they are binary. Trace documents come from :class:`fleet_lsp.traces.TraceService`,
which renders the stored MLflow trace; :class:`StoreTraceSource` here is its fallback when
tracing is off or unavailable: what the store holds (Turn, route, answer, usage, artifacts with
provenance) plus any TurnEvents this server process saw.
"""

from __future__ import annotations

import json
import mimetypes
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import quote, unquote

from fleet_core.errors import InvalidInput, TurnNotFound
from fleet_core.workspace import is_probably_text, validate_relative_path, validate_session_id
from fleet_lsp.protocol import URI_SCHEME, ArtifactReadResult

if TYPE_CHECKING:
    from fleet_core.events import TurnEvent
    from fleet_core.models import TurnResult, TurnSummary
    from fleet_core.runtime import FleetRuntime

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


def artifact_uri(session_id: str, path: str) -> str:
    """The URI of a workspace artifact (``path`` with or without the ``artifacts/`` root)."""
    relative = path.removeprefix("artifacts/")
    return f"{URI_SCHEME}:/sessions/{quote(session_id)}/artifacts/{quote(relative)}"


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
    """Renders a Turn's trace document from its stored outcome and the events this process
    observed (the fallback when its MLflow trace cannot be read)."""

    def __init__(self, events: EventLookup | None = None) -> None:
        self._events: EventLookup = events if events is not None else {}

    async def get(self, runtime: FleetRuntime, turn: TurnSummary) -> TraceDocument:
        session_id = await runtime.turn_session(turn.turn_id)
        try:
            result = await runtime.turn_result(turn.turn_id)
        except TurnNotFound:  # still running: no stored result yet
            result = {}
        artifacts = await runtime.list_artifacts(session_id)
        tid = turn.trace_id or turn.turn_id
        markdown = render_trace(
            session_id=session_id,
            turn=turn,
            result=result,
            artifacts=[
                {
                    "path": a.path,
                    "sizeBytes": a.size_bytes,
                    "sha256": a.sha256,
                    "provenance": [p.wire() for p in a.provenance],
                }
                for a in artifacts
            ],
            events=self._events.get(turn.turn_id, ()),
        )
        return TraceDocument(tid, turn.turn_id, session_id, trace_uri(session_id, tid), markdown)


def _stored_result(result: Mapping[str, Any]) -> TurnResult | None:
    """The stored ``TurnResult`` (wire form), or ``None`` while the Turn has none."""
    from fleet_core.models import TurnResult

    try:
        return TurnResult.model_validate(result) if result else None
    except ValueError:
        return None


def _short(text: str, limit: int = 4000) -> str:
    return (
        text if len(text) <= limit else text[:limit] + f"\n… [{len(text) - limit} more characters]"
    )


def _fence(text: str, lang: str = "") -> str:
    ticks = "````" if "```" in text else "```"
    return f"{ticks}{lang}\n{_short(text).rstrip()}\n{ticks}"


def render_trace(
    *,
    session_id: str,
    turn: TurnSummary,
    result: Mapping[str, Any],
    artifacts: Iterable[Mapping[str, Any]],
    events: Sequence[TurnEvent] = (),
) -> str:
    """A Turn as a readable markdown document."""
    from fleet_core.event_payloads import TriageDecisionPayload  # pydantic: not at server start

    first_line = turn.task.strip().splitlines()[0] if turn.task.strip() else ""
    lines = [f"# Turn {turn.seq}: {_short(first_line, 120)}", ""]
    stored = _stored_result(result)
    route = turn.route or (stored.route if stored else None)
    reason = None
    for event in events:
        triage = event.data
        if isinstance(triage, TriageDecisionPayload):
            route = route or triage.route
            reason = reason or triage.summary
    lines += [
        f"- Session: `{session_id}`",
        f"- Turn: `{turn.turn_id}` (#{turn.seq})",
        f"- Status: **{turn.status}**",
        f"- Started: {turn.created_at.isoformat()}",
        f"- Route: {route or 'n/a'}" + (f" — {reason}" if reason else ""),
    ]
    if turn.trace_id:
        lines.append(f"- Trace: `{turn.trace_id}`")
    lines += ["", "## Task", "", _short(turn.task), ""]
    answer = turn.answer or (stored.answer if stored else "")
    lines += ["## Answer", "", answer or "_(no answer)_", ""]
    note = turn.learned_note or (stored.learned_note if stored else None)
    if note:
        lines += ["## Learned note", "", str(note), ""]
    error = turn.error or (stored.error if stored else None)
    if error:
        lines += ["## Error", "", f"**{error.kind}**: {error.message}", ""]
    lines += _render_agents(events)
    usage = stored.usage.wire() if stored else {}
    if usage:
        lines += ["## Usage", "", "| measure | value |", "|---|---|"]
        for key, value in usage.items():
            if isinstance(value, Mapping):
                value = ", ".join(f"{k}: {v}" for k, v in value.items()) or "—"
            lines.append(f"| {key} | {value} |")
        lines.append("")
    lines += _render_artifacts(session_id, turn.turn_id, artifacts)
    return "\n".join(lines).rstrip() + "\n"


def _render_artifacts(
    session_id: str, turn_id: str, artifacts: Iterable[Mapping[str, Any]]
) -> list[str]:
    mine = []
    for artifact in artifacts:
        provenance = artifact.get("provenance", [])
        records = [record for record in provenance if record.get("turnId") == turn_id]
        if records:
            mine.append((artifact, records))
    if not mine:
        return ["## Artifacts", "", "_(none)_", ""]
    lines = ["## Artifacts", ""]
    for artifact, records in mine:
        path = str(artifact["path"])
        lines.append(
            f"- [`{path}`]({artifact_uri(session_id, path)}) — {artifact['sizeBytes']:,} bytes, "
            f"sha256 `{str(artifact['sha256'])[:16]}…`"
        )
        for record in records:
            chain = " → ".join([*record.get("parentChain", []), record.get("agentId", "?")])
            source = record.get("sourceSandbox")
            lines.append(
                f"  - from agent `{record.get('agentId')}` ({chain})"
                + (f", sandbox `{source}`" if source else "")
                + f", copied from `{record.get('rootPath')}`"
                + f", sha256 `{str(record.get('sha256'))[:16]}…`"
            )
    lines.append("")
    return lines


def _event_lines(event: TurnEvent, cell: int) -> list[str]:
    """One event of an agent as markdown lines (typed payloads; unknown kinds show nothing)."""
    from fleet_core.event_payloads import (
        ArtifactPayload,
        CellOutputPayload,
        CodeCellPayload,
        ToolCallEndPayload,
        ToolCallStartPayload,
        TriageDecisionPayload,
        TurnEndedPayload,
    )

    data = event.data
    if isinstance(data, CodeCellPayload):
        return [f"**Cell {cell}**", "", _fence(data.code, "python"), ""]
    if isinstance(data, CellOutputPayload):
        lines = []
        if data.output:
            lines += ["Output:", "", _fence(data.output), ""]
        if data.error:
            lines += ["Error:", "", _fence(data.error), ""]
        return lines
    if isinstance(data, ToolCallStartPayload):
        shown = json.dumps(data.inputs, default=str)[:500] if data.inputs else ""
        return [f"- Tool call `{data.tool}` {shown}".rstrip()]
    if isinstance(data, ToolCallEndPayload):
        return [f"- Tool `{data.tool}`: {'done' if data.ok else data.error_type or 'failed'}"]
    if isinstance(data, ArtifactPayload):
        return [f"- Artifact `{data.path}`"]
    if isinstance(data, TriageDecisionPayload):
        return [f"- Triage: {data.route} — {data.summary}"]
    if isinstance(data, TurnEndedPayload) and event.kind != "turn_completed":
        message = data.error.message if data.error else ""
        return [f"- {event.kind.replace('_', ' ')}: {message}"]
    return []


def _render_agents(events: Sequence[TurnEvent]) -> list[str]:
    if not events:
        return [
            "## Agents",
            "",
            "_Agent steps were not recorded by this server process; the stored outcome is below._",
            "",
        ]
    by_agent: dict[str, list[TurnEvent]] = {}
    parents: dict[str, str | None] = {}
    for event in events:
        by_agent.setdefault(event.agent_id, []).append(event)
        parents.setdefault(event.agent_id, event.parent_agent_id)
    lines = ["## Agents", ""]

    def walk(agent: str, depth: int) -> None:
        heading = "#" * min(3 + depth, 6)
        parent = parents.get(agent)
        lines.append(f"{heading} Agent `{agent}`" + (f" (child of `{parent}`)" if parent else ""))
        lines.append("")
        cell = 0
        for event in by_agent.get(agent, []):
            if event.kind == "code_cell":
                cell += 1
            lines.extend(_event_lines(event, cell))
        lines.append("")
        for child, parent_of in parents.items():
            if parent_of == agent and child != agent:
                walk(child, depth + 1)

    roots = [a for a, parent in parents.items() if parent is None or parent not in parents]
    for agent in roots:
        walk(agent, 0)
    return lines
