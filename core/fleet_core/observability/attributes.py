"""The keys of a Turn trace: span attributes, trace tags and trace metadata, one name each.

``spans.TraceBuilder`` writes them; ``traceview`` and ``mlflow_backend`` read them back (tests
too). Stored traces hold these exact strings, so a value never changes: a renamed key would make
every existing trace read back without it. A leaf module (standard library only).

Each constant's comment says what it holds, its type, and on which spans it appears.
"""

from __future__ import annotations

from typing import Final

PREFIX: Final = "fleet."

# every span ----------------------------------------------------------------------------------
KIND: Final = "fleet.kind"  # str: what the span is: turn, phase, triage, agent, lm, cell, tool

# the root span (``fleet_turn``), from TurnTraceStart ------------------------------------------
SESSION_ID: Final = "fleet.session_id"  # str: the Session (also trace metadata)
TURN_ID: Final = "fleet.turn_id"  # str: the Turn (also a trace tag and trace metadata)
EXECUTION_MODE: Final = "fleet.execution_mode"  # str: the requested mode (also a trace tag)
CONFIGURATION_DIGEST: Final = "fleet.configuration_digest"  # str: config digest (also a tag)
COMPILED_PROGRAM_DIGEST: Final = "fleet.compiled_program_digest"  # str | None: program served
IDEMPOTENCY_KEY: Final = "fleet.idempotency_key"  # str | None: the request's key (also a tag)
MODEL_SETTINGS: Final = "fleet.model_settings"  # dict | None: the Session's model settings
TURN_TIMEOUT_SECONDS: Final = "fleet.turn_timeout_seconds"  # int | None: the Turn's timeout

# the root span, from events and annotations ---------------------------------------------------
MODE: Final = "fleet.mode"  # str: the mode the Turn started in (``turn_started``)
SPANS_DROPPED: Final = "fleet.spans_dropped"  # int: spans not recorded past MAX_SPANS
DATASET: Final = "fleet.dataset"  # str: the Session's dataset path (``annotate``)
SKILLS: Final = "fleet.skills"  # list[str]: the Skills given to the Turn (``annotate``)
REPLAY_SHA256: Final = "fleet.replay_sha256"  # str: the replay snapshot's digest (also a tag)
MEMORIES_PROPOSED: Final = "fleet.memories_proposed"  # list[dict]: ``memory_proposed`` records
SKILLS_SAVED: Final = "fleet.skills_saved"  # list[dict]: ``skill_saved`` records
JEV_DECISIONS: Final = "fleet.jev_decisions"  # list[dict]: one record per ``jev_decision`` batch
SKILL_SELECTION: Final = "fleet.skill_selection"  # dict: Skill preloading's decisions

# the root span at finish ----------------------------------------------------------------------
ANSWER_OUTCOME: Final = "fleet.answer_outcome"  # dict: models.AnswerOutcome; its kind a tag
OUTCOME: Final = "fleet.outcome"  # str: completed|failed|cancelled (also a tag); cells: below
USAGE: Final = "fleet.usage"  # dict: the TurnResult's Usage (snake_case)
SANDBOX_ERRORS_OBSERVED: Final = "fleet.sandbox_errors_observed"  # int: failed cells seen
BUDGET: Final = "fleet.budget"  # dict | None: the last ``budget_update`` payload
DURATION_SECONDS: Final = "fleet.duration_seconds"  # float: the root span's duration
ERROR_TRACEBACK: Final = "fleet.error_traceback"  # str: a failed Turn's traceback (redacted)

# the root span and ``turn.triage`` ------------------------------------------------------------
ROUTE: Final = "fleet.route"  # str: direct|flex|rlm (also a trace tag)
ROUTE_REASON: Final = "fleet.route_reason"  # str | None: triage's summary or override reason
OVERRIDE_REASON: Final = "fleet.override_reason"  # str | None: why triage's choice was overridden
ROUTE_EVIDENCE: Final = "fleet.route_evidence"  # dict | None: triage's evidence (triage span only)

# agent spans (``agent.<id>``) -------------------------------------------------------------------
AGENT_ID: Final = "fleet.agent_id"  # str: the agent (also on its lm, cell and tool spans)
PARENT_AGENT_ID: Final = "fleet.parent_agent_id"  # str | None: the spawning agent
DEPTH: Final = "fleet.depth"  # int: a child agent's depth (``child_spawned``)
STATUS: Final = "fleet.status"  # str: a child agent's final status (``child_finished``)
SUBMIT_REJECTIONS: Final = "fleet.submit_rejections"  # int: ungrounded SUBMITs refused
UNGROUNDED_SUBMITS_ACCEPTED: Final = "fleet.ungrounded_submits_accepted"  # int: let through

# lm, cell and tool spans ----------------------------------------------------------------------
CATEGORY: Final = "fleet.category"  # str: an lm call's budget category (triage, root, ...)
DURATION_MS: Final = "fleet.duration_ms"  # float: the call's, cell's or tool call's duration
CELL_ID: Final = "fleet.cell_id"  # int: the cell's number within its agent
PHASE: Final = "fleet.phase"  # str: a cell's phase: bootstrap or task
CODE_CHARS: Final = "fleet.code_chars"  # int: the cell's full code length (inputs are bounded)
ERROR_TYPE: Final = "fleet.error_type"  # str | None: a failed cell's or host phase's error type
UNGROUNDED_FIGURES: Final = "fleet.ungrounded_figures"  # list[str]: figures a SUBMIT invented
SUBMIT_REJECTED: Final = "fleet.submit_rejected"  # bool: that SUBMIT was refused
TOOL: Final = "fleet.tool"  # str: a tool span's tool name
SOURCE: Final = "fleet.source"  # str: where the tool call came from (dspy)
UNFINISHED: Final = "fleet.unfinished"  # bool: closed by the builder, not by its end event

# keys outside the ``fleet.`` namespace (MLflow's conventions) ----------------------------------
MODEL: Final = "model"  # str: an lm span's model
TOKEN_USAGE: Final = "mlflow.chat.tokenUsage"  # noqa: S105 - dict: tokens (lm spans, root)
TRACE_SESSION: Final = "mlflow.trace.session"  # str: the Session id (trace metadata)

#: Every ``fleet.*`` key above: the only ones a trace is written with.
FLEET_KEYS: Final[frozenset[str]] = frozenset(
    value
    for name, value in dict(globals()).items()
    if name.isupper() and isinstance(value, str) and value.startswith(PREFIX) and value != PREFIX
)


def fleet_key(name: str) -> str:
    """The key of an annotation or host phase attribute (``TurnTrace.annotate(dataset=...)``)."""
    return PREFIX + name
