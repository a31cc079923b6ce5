"""The span builder: a Turn's ``TurnEvent``s become a tree of ``SpanRecord``s.

Pure Python and thread-safe (children emit from their own threads); it never touches a backend.
Span tree (names are stable; ``fleet.kind`` tells a reader what each span is; every attribute key
is a constant of ``attributes``)::

    fleet_turn [CHAIN]                      session, turn, mode, route + reason, digests, usage
      turn.prepare_inputs [CHAIN]           (and any other ``phase``: capture_replay, commit)
      turn.triage [CHAIN]                   route, reason; triage LM calls nested
        lm.call [CHAT_MODEL]
      agent.root [AGENT]                    the route's program
        lm.call [CHAT_MODEL]                mlflow.chat.tokenUsage
        sandbox.exec [TOOL]                 code, bounded stdout/stderr, outcome
        tool.spawn_agent [TOOL]
        agent.<child id> [AGENT]            subtask, inputs, status; nested by parent agent
          sandbox.exec [TOOL] ...
      turn.commit [CHAIN]

The root span also lists what the Turn's code asked the Session to keep:
``fleet.memories_proposed`` and ``fleet.skills_saved`` (``memory_proposed``/``skill_saved``),
and the Turn's typed decisions: ``fleet.jev_decisions`` (one record per ``jev_decision`` batch)
and ``fleet.skill_selection`` (Skill preloading's decisions).
"""

from __future__ import annotations

import itertools
import logging
import random
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from fleet_core.event_payloads import (
    ArtifactPayload,
    BudgetUpdatePayload,
    CellOutputPayload,
    ChildFinishedPayload,
    ChildSpawnedPayload,
    CodeCellPayload,
    EventPayload,
    JevDecisionPayload,
    LmEndPayload,
    LmStartPayload,
    MemoryProposedPayload,
    SkillSavedPayload,
    SkillSelectionPayload,
    ToolCallEndPayload,
    ToolCallStartPayload,
    TriageDecisionPayload,
    TurnEndedPayload,
    TurnStartedPayload,
    UngroundedSubmitPayload,
)
from fleet_core.events import ROOT_AGENT, TurnEvent
from fleet_core.models import TurnResult
from fleet_core.observability import attributes as attr
from fleet_core.observability.records import (
    SpanRecord,
    SpanStatus,
    TraceRecord,
    TurnTraceStart,
    new_trace_id,
)
from fleet_core.observability.redaction import NO_SECRETS, Redactor

log = logging.getLogger(__name__)
MAX_CODE_CHARS = 20_000
MAX_OUTPUT_CHARS = 8_000
MAX_SPANS = 5_000
PREVIEW_CHARS = 200
MAX_LISTED = 50  # records per list attribute of the root span (memories proposed, Skills saved)
TRIAGE_CATEGORIES = ("triage", "routing")  # the engine charges triage calls as "routing"
OK_CELL_OUTCOMES = ("ok", "submitted", "success", "completed", "submit_rejected")


class TraceBuilder:
    """Builds a Turn's span tree from ``TurnEvent``s; pure Python, thread-safe."""

    def __init__(
        self,
        start: TurnTraceStart,
        *,
        redactor: Redactor = NO_SECRETS,
        trace_id: str | None = None,
        clock: Any = time.time_ns,
    ) -> None:
        self.start_info = start
        self.redactor = redactor
        self.trace_id = trace_id or new_trace_id()[0]
        self._clock = clock
        self._lock = threading.Lock()
        self._rng = random.Random(uuid.uuid4().int)  # noqa: S311 - span ids, not secrets
        self._ids: Iterator[int] = itertools.count(1)
        self.spans: dict[int, SpanRecord] = {}
        self._agents: dict[str, int] = {}
        self._open: dict[tuple[str, str], int] = {}  # (kind, key) -> span id
        self._open_cells: dict[str, list[int]] = {}
        self._triage: int | None = None
        self._artifacts: list[dict[str, Any]] = []
        self._usage: dict[str, Any] | None = None
        self._sandbox_errors = 0
        self._terminal: str | None = None
        self.finished = False
        now = clock()
        self.root = self._new(
            None,
            "fleet_turn",
            "CHAIN",
            "turn",
            now,
            inputs={
                "session_id": start.session_id,
                "turn_id": start.turn_id,
                "task": start.task,
                "workspace_manifest": start.workspace_manifest,
                "context_files": start.context_files,
                "replay_snapshot_selected": start.record_replay,
            },
            attributes={
                attr.SESSION_ID: start.session_id,
                attr.TURN_ID: start.turn_id,
                attr.EXECUTION_MODE: start.mode,
                attr.CONFIGURATION_DIGEST: start.configuration_digest,
                attr.COMPILED_PROGRAM_DIGEST: start.compiled_program_digest,
                attr.IDEMPOTENCY_KEY: start.idempotency_key,
                attr.MODEL_SETTINGS: start.model_settings,
                attr.TURN_TIMEOUT_SECONDS: start.turn_timeout_seconds,
            },
        )

    # span bookkeeping ---------------------------------------------------------------------

    def _span_id(self) -> int:
        while True:
            value = self._rng.getrandbits(64)
            if value and value not in self.spans:
                return value

    def _new(
        self,
        parent: int | None,
        name: str,
        span_type: str,
        kind: str,
        start_ns: int,
        *,
        inputs: dict[str, Any] | None = None,
        attributes: dict[str, Any] | None = None,
    ) -> int:
        if len(self.spans) >= MAX_SPANS:
            self.spans[self.root].attributes[attr.SPANS_DROPPED] = (
                int(self.spans[self.root].attributes.get(attr.SPANS_DROPPED, 0)) + 1
            )
            return self.root if parent is None else parent
        span_id = self._span_id()
        self.spans[span_id] = SpanRecord(
            span_id=span_id,
            parent_id=parent,
            name=name,
            span_type=span_type,
            kind=kind,
            start_ns=start_ns,
            inputs={k: v for k, v in (inputs or {}).items() if v is not None},
            attributes={attr.KIND: kind}
            | {k: v for k, v in (attributes or {}).items() if v is not None},
        )
        return span_id

    def _end(
        self,
        span_id: int,
        end_ns: int,
        *,
        outputs: dict[str, Any] | None = None,
        attributes: dict[str, Any] | None = None,
        status: SpanStatus = "OK",
        message: str = "",
    ) -> None:
        span = self.spans.get(span_id)
        if span is None or span.end_ns is not None or (span_id == self.root and not self.finished):
            if span is not None and span_id == self.root:
                span.attributes.update(attributes or {})
            return
        span.end_ns = max(end_ns, span.start_ns)
        span.outputs.update({k: v for k, v in (outputs or {}).items() if v is not None})
        span.attributes.update({k: v for k, v in (attributes or {}).items() if v is not None})
        span.status = status
        span.status_message = message

    def _agent(self, agent_id: str, parent_agent_id: str | None, at: int) -> int:
        """The span of an agent, created (under its parent agent) on first sight."""
        found = self._agents.get(agent_id)
        if found is not None:
            return found
        if agent_id == ROOT_AGENT:
            parent = self.root
        else:
            parent = self._agent(parent_agent_id or ROOT_AGENT, None, at)
        span_id = self._new(
            parent,
            f"agent.{agent_id}",
            "AGENT",
            "agent",
            at,
            attributes={attr.AGENT_ID: agent_id, attr.PARENT_AGENT_ID: parent_agent_id},
        )
        self._agents[agent_id] = span_id
        return span_id

    # host phases -------------------------------------------------------------------------

    @contextmanager
    def phase(self, name: str, **attributes: Any) -> Iterator[None]:
        with self._lock:
            span_id = self._new(
                self.root,
                f"turn.{name}",
                "CHAIN",
                "phase",
                self._clock(),
                attributes={attr.fleet_key(k): v for k, v in attributes.items()},
            )
        try:
            yield
        except BaseException as exc:
            with self._lock:
                self._end(
                    span_id,
                    self._clock(),
                    status="ERROR",
                    message=self.redactor.error(exc),
                    attributes={attr.ERROR_TYPE: type(exc).__name__},
                )
            raise
        with self._lock:
            self._end(span_id, self._clock())

    def annotate(self, **attributes: Any) -> None:
        with self._lock:
            self.spans[self.root].attributes.update(
                {attr.fleet_key(k): v for k, v in attributes.items() if v is not None}
            )

    # events -------------------------------------------------------------------------------

    def on_event(self, event: TurnEvent) -> None:
        try:
            with self._lock:
                if self.finished:
                    return
                handler = getattr(self, f"_on_{event.kind}", None)
                if handler is None:
                    return
                data = event.data  # the kind's payload model; None if it cannot be read
                if data is not None:
                    handler(event, _ns(event.at), data)
        except Exception:  # tracing must never break a Turn
            log.warning("could not trace a %s event", event.kind, exc_info=True)

    def record(
        self,
        kind: str,
        payload: dict[str, Any] | None = None,
        *,
        agent_id: str = ROOT_AGENT,
        parent_agent_id: str | None = None,
    ) -> None:
        """Record an event given as ``TurnControl.emit`` arguments (see ``tee_emit``)."""
        try:
            event = TurnEvent(
                turn_id=self.start_info.turn_id,
                session_id=self.start_info.session_id,
                seq=0,
                agent_id=agent_id,
                parent_agent_id=parent_agent_id,
                kind=kind,
                payload=dict(payload or {}),
            )
        except Exception:
            return
        self.on_event(event)

    def _on_turn_started(self, event: TurnEvent, at: int, data: TurnStartedPayload) -> None:
        self.spans[self.root].attributes[attr.MODE] = data.mode

    def _triage_span(self, at: int) -> int:
        if self._triage is None:
            self._triage = self._new(self.root, "turn.triage", "CHAIN", "triage", at)
        return self._triage

    def _on_triage_decision(self, event: TurnEvent, at: int, data: TriageDecisionPayload) -> None:
        triage = self._triage_span(at)
        route, reason = data.route, data.summary or data.override_reason
        evidence = data.evidence.model_dump(mode="json") if data.evidence else None
        self._end(
            triage,
            at,
            outputs={"route": route, "reason": reason},
            attributes={
                attr.ROUTE: route,
                attr.ROUTE_REASON: reason,
                attr.OVERRIDE_REASON: data.override_reason,
                attr.ROUTE_EVIDENCE: evidence,
            },
        )
        root = self.spans[self.root].attributes
        root[attr.ROUTE] = route
        root[attr.ROUTE_REASON] = reason
        if data.override_reason:
            root[attr.OVERRIDE_REASON] = data.override_reason

    def _parent_for(self, event: TurnEvent, at: int) -> int:
        return self._agent(event.agent_id, event.parent_agent_id, at)

    def _on_lm_start(self, event: TurnEvent, at: int, data: LmStartPayload | LmEndPayload) -> None:
        category = data.category
        triage = category in TRIAGE_CATEGORIES
        if triage and event.agent_id == ROOT_AGENT and not self._triage_done():
            parent = self._triage_span(at)
        else:
            parent = self._parent_for(event, at)
        span_id = self._new(
            parent,
            "lm.call",
            "CHAT_MODEL",
            "lm",
            at,
            inputs={"model": data.model, "category": category},
            attributes={
                attr.AGENT_ID: event.agent_id,
                attr.CATEGORY: category,
                attr.MODEL: data.model,
            },
        )
        self._open[("lm", f"{event.agent_id}:{data.call_id}")] = span_id

    def _triage_done(self) -> bool:
        return self._triage is not None and self.spans[self._triage].end_ns is not None

    def _on_lm_end(self, event: TurnEvent, at: int, data: LmEndPayload) -> None:
        key = ("lm", f"{event.agent_id}:{data.call_id}")
        span_id = self._open.pop(key, None)
        if span_id is None:  # the start event was lost: record the call anyway
            self._on_lm_start(event, at - int(data.duration_ms * 1e6), data)
            span_id = self._open.pop(key)
        usage = data.usage.model_dump(mode="json") if data.usage else None
        attributes: dict[str, Any] = {attr.DURATION_MS: data.duration_ms}
        if data.usage:
            inp, out = data.usage.input_tokens or 0, data.usage.output_tokens or 0
            attributes[attr.TOKEN_USAGE] = {
                "input_tokens": inp,
                "output_tokens": out,
                "total_tokens": inp + out,
            }
        self._end(
            span_id,
            at,
            outputs={"ok": data.ok, "error_type": data.error_type, "usage": usage},
            attributes=attributes,
            status="OK" if data.ok else "ERROR",
            message=data.error_type or "",
        )

    def _open_cell(self, event: TurnEvent, at: int, cell: int, phase: str, code: str) -> int:
        span_id = self._new(
            self._parent_for(event, at),
            "sandbox.exec",
            "TOOL",
            "cell",
            at,
            inputs={"code": code[:MAX_CODE_CHARS]},
            attributes={
                attr.AGENT_ID: event.agent_id,
                attr.CELL_ID: cell,
                attr.PHASE: phase,
                attr.CODE_CHARS: len(code),
            },
        )
        self._open_cells.setdefault(event.agent_id, []).append(span_id)
        self._open[("cell", f"{event.agent_id}:{cell}")] = span_id
        return span_id

    def _on_code_cell(self, event: TurnEvent, at: int, data: CodeCellPayload) -> None:
        self._open_cell(event, at, data.cell, data.phase, data.code)

    def _on_cell_output(self, event: TurnEvent, at: int, data: CellOutputPayload) -> None:
        stack = self._open_cells.get(event.agent_id, [])
        span_id = self._open.pop(("cell", f"{event.agent_id}:{data.cell}"), None)
        if span_id is None and stack:
            span_id = stack[-1]
        if span_id is None:  # the code_cell event was lost
            span_id = self._open_cell(event, at, data.cell, data.phase, "")
            self._open.pop(("cell", f"{event.agent_id}:{data.cell}"), None)
            stack = self._open_cells[event.agent_id]
        if span_id in stack:
            stack.remove(span_id)
        # the engine's "completed" is a cell that ran without error
        outcome = "ok" if data.outcome == "completed" else data.outcome
        failed = outcome not in OK_CELL_OUTCOMES
        if failed:
            self._sandbox_errors += 1
        self._end(
            span_id,
            at,
            outputs={"stdout": _bounded(data.output), "error": _bounded(data.error)},
            attributes={
                attr.OUTCOME: outcome,
                attr.ERROR_TYPE: data.error_type,
                attr.DURATION_MS: data.duration_ms,
            },
            status="ERROR" if failed else "OK",
            message=(data.error_type or f"cell {outcome}") if failed else "",
        )

    def _on_ungrounded_submit(
        self, event: TurnEvent, at: int, data: UngroundedSubmitPayload
    ) -> None:
        """Flag the submitting cell's span (still open: the event precedes its cell_output) and
        count the agent's ungrounded submissions on its span."""
        cell = self._open.get(("cell", f"{event.agent_id}:{data.cell}"))
        if cell is not None:
            self.spans[cell].attributes.update(
                {
                    attr.UNGROUNDED_FIGURES: list(data.figures),
                    attr.SUBMIT_REJECTED: data.rejected,
                }
            )
        agent = self.spans[self._parent_for(event, at)].attributes
        key = attr.SUBMIT_REJECTIONS if data.rejected else attr.UNGROUNDED_SUBMITS_ACCEPTED
        agent[key] = int(agent.get(key, 0)) + 1

    def _open_tool(
        self, event: TurnEvent, at: int, data: ToolCallStartPayload | ToolCallEndPayload
    ) -> int:
        inputs = data.inputs if isinstance(data, ToolCallStartPayload) else None
        span_id = self._new(
            self._parent_for(event, at),
            f"tool.{data.tool or 'tool'}",
            "TOOL",
            "tool",
            at,
            inputs={"inputs": inputs},
            attributes={
                attr.AGENT_ID: event.agent_id,
                attr.TOOL: data.tool,
                attr.SOURCE: data.source,
            },
        )
        self._open[("tool", f"{event.agent_id}:{data.call_id}")] = span_id
        return span_id

    def _on_tool_call_start(self, event: TurnEvent, at: int, data: ToolCallStartPayload) -> None:
        self._open_tool(event, at, data)

    def _on_tool_call_end(self, event: TurnEvent, at: int, data: ToolCallEndPayload) -> None:
        span_id = self._open.pop(("tool", f"{event.agent_id}:{data.call_id}"), None)
        if span_id is None:  # the start event was lost
            self._open_tool(event, at, data)
            span_id = self._open.pop(("tool", f"{event.agent_id}:{data.call_id}"))
        self._end(
            span_id,
            at,
            outputs={"output": data.output, "error_type": data.error_type},
            attributes={attr.DURATION_MS: data.duration_ms},
            status="OK" if data.ok else "ERROR",
            message=data.error_type or "",
        )

    def _on_child_spawned(self, event: TurnEvent, at: int, data: ChildSpawnedPayload) -> None:
        # the event's agent is the child, its parent_agent_id the parent
        span = self.spans[self._agent(event.agent_id, event.parent_agent_id, at)]
        span.inputs["subtask"] = data.subtask
        if data.input_paths is not None:
            span.inputs["input_paths"] = data.input_paths
        span.attributes[attr.DEPTH] = data.depth

    def _on_child_finished(self, event: TurnEvent, at: int, data: ChildFinishedPayload) -> None:
        span_id = self._agent(event.agent_id, event.parent_agent_id, at)
        ok = data.status == "succeeded"
        artifacts = [a.model_dump(mode="json") for a in data.artifacts or []] or None
        self._close_open_children(span_id, at, "the child agent ended first")
        self._end(
            span_id,
            at,
            outputs={"status": data.status, "artifacts": artifacts, "error": data.error},
            attributes={attr.STATUS: data.status},
            status="OK" if ok else "ERROR",
            message="" if ok else (data.error or data.status),
        )

    def _on_artifact(self, event: TurnEvent, at: int, data: ArtifactPayload) -> None:
        record = data.model_dump(mode="json", exclude_none=True)
        record["agent_id"] = event.agent_id
        self._artifacts.append(record)

    def _on_memory_proposed(self, event: TurnEvent, at: int, data: MemoryProposedPayload) -> None:
        self._listed(attr.MEMORIES_PROPOSED, event, data)

    def _on_skill_saved(self, event: TurnEvent, at: int, data: SkillSavedPayload) -> None:
        self._listed(attr.SKILLS_SAVED, event, data)

    def _listed(self, key: str, event: TurnEvent, data: EventPayload) -> None:
        """Append the event's record to a bounded list attribute of the root span."""
        records = self.spans[self.root].attributes.setdefault(key, [])
        if isinstance(records, list) and len(records) < MAX_LISTED:
            records.append(data.model_dump(mode="json") | {"agent_id": event.agent_id})

    def _on_jev_decision(self, event: TurnEvent, at: int, data: JevDecisionPayload) -> None:
        self._listed(attr.JEV_DECISIONS, event, data)

    def _on_skill_selection(self, event: TurnEvent, at: int, data: SkillSelectionPayload) -> None:
        self.spans[self.root].attributes[attr.SKILL_SELECTION] = data.model_dump(mode="json")

    def _on_budget_update(self, event: TurnEvent, at: int, data: BudgetUpdatePayload) -> None:
        self._usage = data.model_dump(mode="json")

    def _on_turn_completed(self, event: TurnEvent, at: int, data: TurnEndedPayload) -> None:
        self._terminal = "completed"

    def _on_turn_failed(self, event: TurnEvent, at: int, data: TurnEndedPayload) -> None:
        self._terminal = "failed"

    def _on_turn_cancelled(self, event: TurnEvent, at: int, data: TurnEndedPayload) -> None:
        self._terminal = "cancelled"

    # finishing ----------------------------------------------------------------------------

    def _close_open_children(self, parent: int, at: int, why: str) -> None:
        for span in list(self.spans.values()):
            if span.parent_id == parent and span.end_ns is None:
                self._close_open_children(span.span_id, at, why)
                self._end(
                    span.span_id,
                    at,
                    status="ERROR",
                    message=why,
                    attributes={attr.UNFINISHED: True},
                )

    def finish(self, result: TurnResult) -> TraceRecord:
        """Close everything and return the redacted record (idempotent per builder)."""
        with self._lock:
            end = self._clock()
            outcome = result.status
            why = {"cancelled": "the Turn was cancelled", "failed": "the Turn failed"}.get(
                outcome, "the Turn ended first"
            )
            for agent_span in self._agents.values():
                self._close_open_children(agent_span, end, why)
                ok = outcome == "completed" or agent_span != self._agents.get(ROOT_AGENT)
                self._end(
                    agent_span, end, status="OK" if ok else "ERROR", message="" if ok else why
                )
            self._close_open_children(self.root, end, why)
            self.finished = True
            usage = result.usage.model_dump(mode="json")
            root = self.spans[self.root]
            route = result.route or root.attributes.get(attr.ROUTE)
            error = result.error.model_dump(mode="json") if result.error else None
            answer_outcome = result.outcome.model_dump(mode="json") if result.outcome else None
            self._end(
                self.root,
                end,
                outputs={
                    "turn_id": result.turn_id,
                    "status": outcome,
                    "answer": result.answer,
                    "learned_note": result.learned_note,
                    "route": route,
                    "usage": usage,
                    "artifacts": [a.model_dump(mode="json") for a in result.artifacts]
                    or self._artifacts
                    or None,
                    "error": error,
                    "outcome": answer_outcome,
                },
                attributes={
                    attr.ROUTE: route,
                    attr.OUTCOME: outcome,
                    attr.ANSWER_OUTCOME: answer_outcome,
                    attr.USAGE: usage,
                    attr.SANDBOX_ERRORS_OBSERVED: self._sandbox_errors,
                    attr.BUDGET: self._usage,
                    attr.DURATION_SECONDS: round((end - root.start_ns) / 1e9, 3),
                    **(
                        {attr.ERROR_TRACEBACK: self.redactor.text(result.error.traceback)}
                        if result.error and result.error.traceback
                        else {}
                    ),
                },
                status="OK" if outcome == "completed" else "ERROR",
                message="" if outcome == "completed" else (error or {}).get("message", why),
            )
            if usage.get("input_tokens") is not None or usage.get("output_tokens") is not None:
                inp, out = usage.get("input_tokens") or 0, usage.get("output_tokens") or 0
                root.attributes[attr.TOKEN_USAGE] = {
                    "input_tokens": inp,
                    "output_tokens": out,
                    "total_tokens": inp + out,
                }
            return self._record(result, route, end)

    def _record(self, result: TurnResult, route: Any, end: int) -> TraceRecord:
        red = self.redactor
        spans = []
        for span in self.spans.values():
            spans.append(
                SpanRecord(
                    span_id=span.span_id,
                    parent_id=span.parent_id,
                    name=red.text(span.name, 200),
                    span_type=span.span_type,
                    kind=span.kind,
                    start_ns=span.start_ns,
                    end_ns=span.end_ns or end,
                    inputs=red.value(span.inputs),
                    outputs=red.value(span.outputs),
                    attributes=red.value(span.attributes),
                    status=span.status,
                    status_message=red.text(span.status_message, 2_000),
                )
            )
        root = self.spans[self.root]
        start = self.start_info
        tags = {
            attr.EXECUTION_MODE: start.mode,
            attr.CONFIGURATION_DIGEST: start.configuration_digest,
            attr.ROUTE: str(route or ""),
            attr.OUTCOME: result.status,
            attr.TURN_ID: start.turn_id,
        }
        if result.outcome is not None:
            tags[attr.ANSWER_OUTCOME] = result.outcome.kind
        if start.idempotency_key:
            tags[attr.IDEMPOTENCY_KEY] = start.idempotency_key
        replay = root.attributes.get(attr.REPLAY_SHA256)
        if replay:
            tags[attr.REPLAY_SHA256] = str(replay)
        metadata = {
            attr.TRACE_SESSION: start.session_id,
            attr.SESSION_ID: start.session_id,
            attr.TURN_ID: start.turn_id,
        }
        return TraceRecord(
            trace_id=self.trace_id,
            spans=spans,
            request_time_ms=root.start_ns // 1_000_000,
            duration_ms=max(0, (end - root.start_ns) // 1_000_000),
            state="OK" if result.status == "completed" else "ERROR",
            request_preview=red.text(start.task, PREVIEW_CHARS),
            response_preview=red.text(
                result.answer or (result.error.message if result.error else ""), PREVIEW_CHARS
            ),
            client_request_id=start.turn_id,
            metadata={k: red.text(v, 500) for k, v in metadata.items()},
            tags={k: red.text(v, 500) for k, v in tags.items()},
        )


def _ns(at: datetime) -> int:
    return int(at.timestamp() * 1_000_000_000)


def _bounded(value: Any) -> Any:
    if value is None:
        return None
    text = value if isinstance(value, str) else str(value)
    if len(text) > MAX_OUTPUT_CHARS:
        return text[:MAX_OUTPUT_CHARS] + f"... [truncated {len(text) - MAX_OUTPUT_CHARS} chars]"
    return text
