"""A stored Turn trace as a typed structure, and its markdown rendering: the one renderer.

``fleet-lsp trace show ID`` and the LSP trace document (``fleet:/sessions/<id>/traces/<id>.md``)
call ``runtime.load_trace(trace_id)`` (``tracer.load_trace`` or ``load_trace(config, trace_id)``)
and then ``render_trace_markdown(view)``. When a Turn's trace cannot be read (tracing off, the
destination unreadable), the same renderer shows ``stored_trace_view(...)``: the store's outcome
and the events this process saw, with a note saying why.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from fleet_core.observability import attributes as attr
from fleet_core.observability.records import SpanRecord

if TYPE_CHECKING:
    from fleet_core.events import TurnEvent
    from fleet_core.models import AnswerOutcome, TurnSummary

MD_CODE_CHARS = 4_000
MD_OUTPUT_CHARS = 2_000


@dataclass(frozen=True, slots=True)
class LmCallView:
    model: str | None
    category: str | None
    ok: bool
    input_tokens: int | None
    output_tokens: int | None
    duration_ms: float | None


@dataclass(frozen=True, slots=True)
class CellView:
    code: str
    outcome: str
    stdout: str | None
    stderr: str | None
    error: str | None
    error_type: str | None
    duration_ms: float | None
    phase: str | None = None  # "bootstrap" (facade, helpers, dataset setup) or "task"


@dataclass(frozen=True, slots=True)
class ToolCallView:
    tool: str
    ok: bool
    inputs: Any
    output: Any
    error_type: str | None


@dataclass(frozen=True, slots=True)
class RetrievalView:
    """A retrieval span (MLflow span type ``RETRIEVER``): the query and the documents' text."""

    query: str | None
    documents: tuple[str, ...]
    ok: bool = True


@dataclass(slots=True)
class AgentView:
    agent_id: str
    parent_agent_id: str | None
    status: str
    subtask: str | None = None
    input_paths: list[str] = field(default_factory=list)
    answer: str | None = None
    artifacts: Any = None
    error: str | None = None
    # Steps in time order: each is an LmCallView, CellView, ToolCallView, RetrievalView or
    # AgentView.
    steps: list[LmCallView | CellView | ToolCallView | RetrievalView | AgentView] = field(
        default_factory=list
    )

    @property
    def cells(self) -> list[CellView]:
        return [s for s in self.steps if isinstance(s, CellView)]

    @property
    def children(self) -> list[AgentView]:
        return [s for s in self.steps if isinstance(s, AgentView)]

    @property
    def tool_calls(self) -> list[ToolCallView]:
        return [s for s in self.steps if isinstance(s, ToolCallView)]

    @property
    def lm_calls(self) -> list[LmCallView]:
        return [s for s in self.steps if isinstance(s, LmCallView)]

    @property
    def retrievals(self) -> list[RetrievalView]:
        return [s for s in self.steps if isinstance(s, RetrievalView)]


@dataclass(frozen=True, slots=True)
class PhaseView:
    name: str
    ok: bool
    duration_ms: float
    error: str | None = None


@dataclass(slots=True)
class TraceView:
    """Everything a person needs to inspect one Turn."""

    trace_id: str
    session_id: str | None
    turn_id: str | None
    task: str
    mode: str | None
    route: str | None
    route_reason: str | None
    outcome: str
    answer: str | None
    error: Any
    usage: dict[str, Any]
    configuration_digest: str | None
    compiled_program_digest: str | None
    replay_sha256: str | None
    started_ms: int
    duration_ms: int | None  # None: not known (the stored outcome of a Turn still running)
    artifacts: list[dict[str, Any]]
    phases: list[PhaseView]
    triage_lm_calls: list[LmCallView]
    root: AgentView | None
    labels: dict[str, Any] = field(default_factory=dict)
    span_count: int = 0
    turn_retrievals: list[RetrievalView] = field(default_factory=list)
    pending: bool = False  # read from the export queue: not in MLflow yet
    learned_note: str | None = None
    # built from the store's Turn outcome, not a trace (``stored_trace_view``): what only a
    # trace records (phases, digests, the replay) is left out rather than shown as absent
    stored: bool = False
    note: str | None = None  # why this document shows less than a trace; rendered first
    answer_outcome: AnswerOutcome | None = None  # how the answer was reached (None: unknown)

    def agents(self) -> list[AgentView]:
        """Every agent, depth first from the root."""
        found: list[AgentView] = []
        stack = [self.root] if self.root else []
        while stack:
            agent = stack.pop()
            found.append(agent)
            stack.extend(reversed(agent.children))
        return found

    def cells(self) -> list[CellView]:
        return [cell for agent in self.agents() for cell in agent.cells]

    def retrievals(self) -> list[RetrievalView]:
        """Every retrieval span, the Turn's own (outside agents) first."""
        return list(self.turn_retrievals) + [r for a in self.agents() for r in a.retrievals]


def build_view(
    trace_id: str,
    spans: Iterable[SpanRecord],
    *,
    labels: Mapping[str, Any] | None = None,
) -> TraceView:
    """Assemble a ``TraceView`` from the spans a ``TraceBuilder`` wrote."""
    spans = sorted(spans, key=lambda s: (s.start_ns, s.span_id))
    by_parent: dict[int | None, list[SpanRecord]] = {}
    for span in spans:
        by_parent.setdefault(span.parent_id, []).append(span)
    roots = [s for s in spans if s.parent_id is None or s.kind == "turn"]
    if not roots:
        raise ValueError(f"trace {trace_id} has no root span")
    root = next((s for s in roots if s.kind == "turn"), roots[0])
    attrs = root.attributes
    phases: list[PhaseView] = []
    triage_calls: list[LmCallView] = []
    root_agent: AgentView | None = None
    turn_retrievals: list[RetrievalView] = []
    for child in by_parent.get(root.span_id, []):
        if _is_retrieval(child):
            turn_retrievals.append(_retrieval(child))
        elif child.kind == "phase":
            phases.append(
                PhaseView(
                    name=child.name.removeprefix("turn."),
                    ok=child.status != "ERROR",
                    duration_ms=_ms(child),
                    error=child.status_message or None,
                )
            )
        elif child.kind == "triage":
            triage_calls = [_lm(s) for s in by_parent.get(child.span_id, []) if s.kind == "lm"]
        elif child.kind == "agent":
            root_agent = _agent(child, by_parent)
    outputs = root.outputs
    usage = outputs.get("usage") or attrs.get(attr.USAGE) or {}
    artifacts = outputs.get("artifacts") or []
    return TraceView(
        trace_id=trace_id,
        session_id=_str(root.inputs.get("session_id") or attrs.get(attr.SESSION_ID)),
        turn_id=_str(root.inputs.get("turn_id") or attrs.get(attr.TURN_ID)),
        task=str(root.inputs.get("task") or ""),
        mode=_str(attrs.get(attr.EXECUTION_MODE) or attrs.get(attr.MODE)),
        route=_str(attrs.get(attr.ROUTE) or outputs.get("route")),
        route_reason=_str(attrs.get(attr.ROUTE_REASON)),
        outcome=str(attrs.get(attr.OUTCOME) or outputs.get("status") or "unknown"),
        answer=_str(outputs.get("answer")),
        error=outputs.get("error"),
        usage=dict(usage) if isinstance(usage, Mapping) else {},
        configuration_digest=_str(attrs.get(attr.CONFIGURATION_DIGEST)),
        compiled_program_digest=_str(attrs.get(attr.COMPILED_PROGRAM_DIGEST)),
        replay_sha256=_str(attrs.get(attr.REPLAY_SHA256)),
        started_ms=root.start_ns // 1_000_000,
        duration_ms=int(_ms(root)),
        artifacts=[a for a in artifacts if isinstance(a, dict)]
        if isinstance(artifacts, list)
        else [],
        phases=phases,
        triage_lm_calls=triage_calls,
        root=root_agent,
        labels=dict(labels or {}),
        span_count=len(spans),
        turn_retrievals=turn_retrievals,
        learned_note=_str(outputs.get("learned_note")),
        answer_outcome=_answer_outcome(attrs.get(attr.ANSWER_OUTCOME) or outputs.get("outcome")),
    )


def _answer_outcome(value: Any) -> AnswerOutcome | None:
    """The recorded outcome, if the trace has one that parses (older traces have none)."""
    if not isinstance(value, Mapping):
        return None
    from pydantic import ValidationError

    from fleet_core.models import AnswerOutcome

    try:
        return AnswerOutcome.model_validate(value)
    except ValidationError:
        return None


def stored_trace_view(
    turn: TurnSummary,
    *,
    session_id: str,
    result: Mapping[str, Any] | None = None,
    artifacts: Iterable[Mapping[str, Any]] = (),
    events: Sequence[TurnEvent] = (),
    note: str | None = None,
) -> TraceView:
    """A Turn's document when its trace cannot be read (tracing off, or the destination
    unreadable), for ``render_trace_markdown``: the Turn's summary and stored ``TurnResult``
    (wire form; empty while it runs), the workspace artifacts whose provenance names this Turn
    (mappings with ``path``, ``size_bytes``, ``sha256``, an optional ``uri`` and ``provenance``
    records in ``ProvenanceRecord``'s snake_case), and the agent steps of the ``TurnEvent``s this
    process saw, through the same ``TraceBuilder`` a trace is written with. ``note`` says why."""
    from fleet_core.models import TurnResult
    from fleet_core.observability.records import TurnTraceStart
    from fleet_core.observability.spans import TraceBuilder

    try:
        stored = TurnResult.model_validate(result) if result else None
    except ValueError:
        stored = None
    trace_id = turn.trace_id or turn.turn_id
    steps: TraceView | None = None
    if events:
        builder = TraceBuilder(
            TurnTraceStart(turn.turn_id, session_id, turn.task, mode="", configuration_digest=""),
            trace_id=trace_id,
        )
        for event in events:
            builder.on_event(event)
        spans = builder.finish(stored).spans if stored else list(builder.spans.values())
        steps = build_view(trace_id, spans)
    error = turn.error or (stored.error if stored else None)
    seconds = turn.duration_seconds
    if seconds is None and stored is not None:
        seconds = stored.duration_seconds
    mine = []
    for artifact in artifacts:
        records = [
            dict(r) for r in artifact.get("provenance") or () if r.get("turn_id") == turn.turn_id
        ]
        if records:
            mine.append({**artifact, "provenance": records})
    return TraceView(
        trace_id=trace_id,
        session_id=session_id,
        turn_id=turn.turn_id,
        task=turn.task,
        mode=steps.mode if steps else None,
        route=turn.route or (stored.route if stored else None) or (steps.route if steps else None),
        route_reason=steps.route_reason if steps else None,
        outcome=turn.status,
        answer=turn.answer or (stored.answer if stored else None) or None,
        error=error.model_dump(mode="json", include={"kind", "message"}) if error else None,
        usage=stored.usage.model_dump(mode="json") if stored else {},
        configuration_digest=None,
        compiled_program_digest=stored.compiled_program_digest if stored else None,
        replay_sha256=None,
        started_ms=int(turn.created_at.timestamp() * 1000),
        duration_ms=round(seconds * 1000) if seconds is not None else None,
        artifacts=mine,
        phases=[],
        triage_lm_calls=steps.triage_lm_calls if steps else [],
        root=steps.root if steps else None,
        learned_note=turn.learned_note or (stored.learned_note if stored else None),
        stored=True,
        note=note,
        answer_outcome=stored.outcome if stored else None,
    )


def _agent(span: SpanRecord, by_parent: Mapping[int | None, list[SpanRecord]]) -> AgentView:
    outputs = span.outputs
    agent = AgentView(
        agent_id=str(span.attributes.get(attr.AGENT_ID) or span.name.removeprefix("agent.")),
        parent_agent_id=_str(span.attributes.get(attr.PARENT_AGENT_ID)),
        status=str(outputs.get("status") or _agent_status(span)),
        subtask=_str(span.inputs.get("subtask")),
        input_paths=list(span.inputs.get("input_paths") or []),
        answer=_str(outputs.get("answer")),
        artifacts=outputs.get("artifacts"),
        error=_str(outputs.get("error")) or (span.status_message or None),
    )
    for child in by_parent.get(span.span_id, []):
        if _is_retrieval(child):
            agent.steps.append(_retrieval(child))
        elif child.kind == "lm":
            agent.steps.append(_lm(child))
        elif child.kind == "cell":
            agent.steps.append(
                CellView(
                    code=str(child.inputs.get("code") or ""),
                    outcome=str(
                        child.attributes.get(attr.OUTCOME)
                        or ("error" if child.status == "ERROR" else "ok")
                    ),
                    stdout=_str(child.outputs.get("stdout")),
                    stderr=_str(child.outputs.get("stderr")),
                    error=_str(child.outputs.get("error")) or (child.status_message or None),
                    error_type=_str(child.attributes.get(attr.ERROR_TYPE)),
                    duration_ms=_float(child.attributes.get(attr.DURATION_MS)),
                    phase=_str(child.attributes.get(attr.PHASE)),
                )
            )
        elif child.kind == "tool":
            agent.steps.append(
                ToolCallView(
                    tool=str(child.attributes.get(attr.TOOL) or child.name.removeprefix("tool.")),
                    ok=child.status != "ERROR",
                    inputs=child.inputs.get("inputs"),
                    output=child.outputs.get("output"),
                    error_type=_str(child.outputs.get("error_type")),
                )
            )
            # children spawned inside a tool span (if an engine nests them there)
            for nested in by_parent.get(child.span_id, []):
                if nested.kind == "agent":
                    agent.steps.append(_agent(nested, by_parent))
        elif child.kind == "agent":
            agent.steps.append(_agent(child, by_parent))
    return agent


def _agent_status(span: SpanRecord) -> str:
    if span.status == "ERROR":
        return "failed"
    return "running" if span.end_ns is None else "succeeded"  # open: a Turn still running


def _is_retrieval(span: SpanRecord) -> bool:
    return span.span_type.strip('"').upper() == "RETRIEVER" or span.kind == "retriever"


def _retrieval(span: SpanRecord) -> RetrievalView:
    """MLflow's retriever convention: inputs ``query``, outputs a list of documents (dicts with
    ``page_content``, or text)."""
    found = span.outputs.get("documents", span.outputs.get("value"))
    items = found if isinstance(found, list) else ([] if found is None else [found])
    documents = []
    for item in items:
        if isinstance(item, Mapping):
            text = item.get("page_content", item.get("content", item.get("text")))
            documents.append(text if isinstance(text, str) else json.dumps(item, default=str))
        else:
            documents.append(str(item))
    query = span.inputs.get("query", span.inputs.get("value"))
    return RetrievalView(query=_str(query), documents=tuple(documents), ok=span.status != "ERROR")


def _lm(span: SpanRecord) -> LmCallView:
    usage = span.attributes.get(attr.TOKEN_USAGE)
    usage = usage if isinstance(usage, Mapping) else {}
    return LmCallView(
        model=_str(span.inputs.get("model") or span.attributes.get(attr.MODEL)),
        category=_str(span.inputs.get("category") or span.attributes.get(attr.CATEGORY)),
        ok=span.status != "ERROR",
        input_tokens=_int(usage.get("input_tokens")),
        output_tokens=_int(usage.get("output_tokens")),
        duration_ms=_float(span.attributes.get(attr.DURATION_MS)) or _ms(span),
    )


def _ms(span: SpanRecord) -> float:
    if span.end_ns is None:
        return 0.0
    return round((span.end_ns - span.start_ns) / 1e6, 2)


def _str(value: Any) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


# markdown --------------------------------------------------------------------------------------


def _reached(outcome: AnswerOutcome | None) -> str | None:
    """'submitted', or the 'completed with errors: ...' line; None when not recorded."""
    if outcome is None:
        return None
    return outcome.kind if outcome.clean else f"{outcome.kind} ({outcome.summary()})"


def render_trace_markdown(view: TraceView) -> str:
    """The Turn, route and reason, each agent with its cells, outputs, tool calls and children,
    usage, artifacts with provenance, and labels; a ``stored_trace_view`` (no trace) the same
    way, after its note, leaving out what only a trace records."""
    out: list[str] = []
    if view.note:
        out += ["> **Note:** " + view.note.replace("\n", " "), ""]
    out += [f"# Turn trace `{view.trace_id}`", ""]
    duration = None if view.duration_ms is None else f"{view.duration_ms / 1000:.2f} s"
    replay = _short(view.replay_sha256) or (None if view.stored else "not captured")
    rows = [
        ("Session", view.session_id),
        ("Turn", view.turn_id),
        ("Outcome", view.outcome),
        ("Answer reached", _reached(view.answer_outcome)),
        ("Mode", view.mode),
        ("Route", view.route),
        ("Route reason", view.route_reason),
        ("Started", _started(view.started_ms)),
        ("Duration", duration),
        ("Configuration digest", _short(view.configuration_digest)),
        ("Compiled program digest", _short(view.compiled_program_digest)),
        ("Replay snapshot", replay),
    ]
    out += ["| | |", "|---|---|"]
    out += [f"| {k} | {_cell(v)} |" for k, v in rows if v is not None]
    out += ["", "## Task", "", _quote(view.task), ""]
    out += ["## Answer", "", _quote(view.answer) if view.answer else "_(no answer)_", ""]
    if view.learned_note:
        out += ["## Learned note", "", _quote(view.learned_note), ""]
    if view.error:
        err = view.error if isinstance(view.error, Mapping) else {"message": view.error}
        out += ["## Error", "", f"**{err.get('kind', 'error')}**: {err.get('message', '')}", ""]
    out += ["## Usage", ""]
    usage = view.usage
    if usage:
        out += [
            f"- model calls: {usage.get('model_calls', '?')}",
            f"- sandbox errors: {usage.get('sandbox_errors', '?')}",
            f"- tokens: {usage.get('input_tokens', '?')} in"
            f" / {usage.get('output_tokens', '?')} out",
        ]
        by_cat = usage.get("calls_by_category") or {}
        if by_cat:
            out.append(
                "- calls by category: " + ", ".join(f"{k} {v}" for k, v in sorted(by_cat.items()))
            )
    else:
        out.append("_(usage unavailable)_")
    out.append("")
    if view.phases or view.triage_lm_calls:
        out += ["## Steps", ""]
        for phase in view.phases:
            mark = "ok" if phase.ok else f"FAILED: {phase.error}"
            out.append(f"- `{phase.name}` ({phase.duration_ms:.0f} ms) {mark}")
        if view.triage_lm_calls:
            out.append(
                f"- `triage` ({len(view.triage_lm_calls)} model call(s)) → route **{view.route}**"
            )
        out.append("")
    out += ["## Agents", ""]
    if view.root is None and view.stored:
        out += ["_Agent steps were not recorded by this process; the stored outcome is shown._", ""]
    elif view.root is None:
        out += ["_(no agent activity recorded)_", ""]
    else:
        _render_agent(view.root, out, level=3)
    out += ["## Artifacts", ""]
    if not view.artifacts:
        out += ["_(none)_", ""]
    for artifact in view.artifacts:
        path = _link(f"`{artifact.get('path', '?')}`", artifact.get("uri"))
        out.append(
            f"- {path} ({artifact.get('size_bytes', '?')} bytes, "
            f"sha256 `{_short(artifact.get('sha256'))}`)"
        )
        for record in artifact.get("provenance") or []:
            chain = " → ".join(record.get("parent_chain") or [])
            sandbox = record.get("source_sandbox")
            out.append(
                f"  - from agent `{record.get('agent_id')}` at `{record.get('root_path')}`"
                + (f" in sandbox `{sandbox}`" if sandbox else "")
                + f" (sha256 `{_short(record.get('sha256'))}`){' via ' + chain if chain else ''}"
            )
    if view.artifacts:
        out.append("")
    if view.labels:
        out += [
            "## Labels",
            "",
            "```json",
            json.dumps(view.labels, indent=2, sort_keys=True),
            "```",
            "",
        ]
    return "\n".join(out).rstrip() + "\n"


def _render_agent(agent: AgentView, out: list[str], level: int) -> None:
    heading = "#" * min(level, 6)
    title = "Root agent" if agent.parent_agent_id is None else f"Child agent `{agent.agent_id}`"
    out += [f"{heading} {title} — {agent.status}", ""]
    if agent.subtask:
        out += [f"Subtask: {_inline(agent.subtask)}", ""]
    if agent.input_paths:
        out += ["Inputs: " + ", ".join(f"`{p}`" for p in agent.input_paths), ""]
    cell_no = 0
    for step in agent.steps:
        if isinstance(step, LmCallView):
            tokens = ""
            if step.input_tokens is not None or step.output_tokens is not None:
                tokens = f", {step.input_tokens} in / {step.output_tokens} out tokens"
            out.append(
                f"- model call `{step.model or '?'}` ({step.category or 'call'}{tokens})"
                + ("" if step.ok else " **failed**")
            )
        elif isinstance(step, ToolCallView):
            out.append(
                f"- tool `{step.tool}`" + ("" if step.ok else f" **failed** ({step.error_type})")
            )
        elif isinstance(step, RetrievalView):
            out.append(
                f"- retrieval ({len(step.documents)} document(s))"
                + (f": {_inline(step.query)}" if step.query else "")
                + ("" if step.ok else " **failed**")
            )
        elif isinstance(step, CellView):
            cell_no += 1
            out += [
                "",
                f"Cell {cell_no} — **{step.outcome}**",
                "",
                *_fence(_clip(step.code, MD_CODE_CHARS), "python"),
            ]
            if step.stdout:
                out += ["", "stdout:", "", *_fence(_clip(step.stdout, MD_OUTPUT_CHARS), "text")]
            if step.stderr:
                out += ["", "stderr:", "", *_fence(_clip(step.stderr, MD_OUTPUT_CHARS), "text")]
            if step.error and step.outcome != "ok":
                out += ["", f"error: {_inline(step.error)}"]
            out.append("")
        else:
            out.append("")
            _render_agent(step, out, level + 1)
    if agent.answer and agent.parent_agent_id is not None:
        out += ["", f"Child answer: {_inline(agent.answer)}"]
    if agent.error and agent.status not in ("succeeded", "completed"):
        out += ["", f"Error: {_inline(agent.error)}"]
    out.append("")


def _short(value: Any) -> str | None:
    return None if not value else str(value)[:12]


def _fence(text: str, lang: str) -> list[str]:
    """A fenced block that ``text`` cannot close: longer than any backtick run in it."""
    runs = re.findall(r"`{3,}", text)
    ticks = "`" * max([3, *(len(r) + 1 for r in runs)])
    return [ticks + lang, text, ticks]


def _started(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="seconds")


def _link(text: str, uri: Any) -> str:
    """``text`` linked to ``uri`` (an artifact's ``fleet:/`` URI) when it can be a link target."""
    if (
        not isinstance(uri, str)
        or not uri
        or not uri.isprintable()
        or any(c in "<>\\ " for c in uri)
    ):
        return text
    return f"[{text}](<{uri}>)"


def _cell(value: Any) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def _inline(value: str) -> str:
    return _clip(value, 500).replace("\n", " ")


def _quote(value: str | None) -> str:
    return "\n".join("> " + line for line in _clip(value or "", 20_000).splitlines()) or "> "


def _clip(value: str, limit: int) -> str:
    return (
        value if len(value) <= limit else value[:limit] + f"\n... [{len(value) - limit} more chars]"
    )
