"""One payload model per ``TurnEvent`` kind: the fields the engine emits, typed and documented.

Emitters build their kind's model and hand it to the event channel (``EventChannel.emit(kind,
model)``; a dict is refused), which serializes it once into the wire form ``TurnEvent.payload``:
the fields the emitter set (``exclude_unset``), in the order it set them, numbers as given. Policy
for keys a model does not define:

- emitters may not send them: building a model (``Model(field=...)``) validates every field, and
  a missing or mistyped field or an undefined one, nested models included, is a pydantic
  ``ValidationError`` at the emitter, always (``extra="forbid"``); the channel refuses a payload
  that is not its kind's model (``EventPayloadError``);
- consumers tolerate them (``parse_payload`` validates with ``extra="allow"``; a newer server may
  add fields, and the published schema allows additional properties: the protocol extends, it
  never breaks).

``parse_payload`` (``TurnEvent.data``) is what consumers read: the kind's model, with fields that
do not validate (e.g. bounded away by redaction) dropped, or ``None`` if a required field is gone.

``python -m fleet_core.event_payloads [PATH]`` prints (or writes) the JSON schema published as
``docs/schema/turn-events.schema.json``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapValidator,
    model_serializer,
    model_validator,
)
from pydantic.json_schema import models_json_schema

from fleet_core.models import TurnResult

EVENT_VERSION = 1
EventKind = Literal[
    "turn_started",
    "triage_decision",
    "module_start",
    "module_end",
    "lm_start",
    "lm_end",
    "code_cell",
    "cell_output",
    "tool_call_start",
    "tool_call_end",
    "child_spawned",
    "child_finished",
    "artifact",
    "budget_update",
    "status",
    "sandbox_environment_incomplete",
    "ungrounded_submit",
    "memory_proposed",
    "skill_saved",
    "jev_decision",
    "skill_selection",
    "turn_completed",
    "turn_failed",
    "turn_cancelled",
]
Terminal = Literal["cancelled", "deadline", "budget"]


class EventPayloadError(ValueError):
    """An emitted payload is not its kind's model (a dict, another kind's model, an unknown
    kind, or a model carrying keys its class does not define)."""


def _keep_int(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """An int stays an int (``5`` goes out as ``5``, not ``5.0``); anything else is a float."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return handler(value)


# A float field that sends a number as the emitter gave it (its JSON schema is "number").
Number = Annotated[float, WrapValidator(_keep_int)]


class EventPayload(BaseModel):
    """Base of the snake_case payload models.

    ``Model(field=...)`` is the emitter's constructor: an undefined key (nested ones too) is a
    ``ValidationError`` there (``extra="forbid"``). ``parse_payload`` is the consumer's: it
    validates with ``extra="allow"``, so undefined keys are tolerated (and the published schema
    allows additional properties). ``wire()`` is the payload as it goes out: the fields set, in
    the order they were given (that order is not part of a payload's value: ``==`` ignores it).
    """

    model_config = ConfigDict(
        extra="forbid", frozen=True, json_schema_extra={"additionalProperties": True}
    )
    _order: tuple[str, ...] = PrivateAttr(default=())

    @model_validator(mode="wrap")
    @classmethod
    def _remember_order(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        model = handler(data)
        if isinstance(data, Mapping) and isinstance(model, EventPayload):
            model._order = tuple(str(key) for key in data)
        return model

    @model_serializer(mode="wrap")
    def _in_given_order(self, handler: SerializerFunctionWrapHandler) -> Any:
        out = handler(self)
        if not self._order or not isinstance(out, dict):
            return out
        ordered = {key: out[key] for key in self._order if key in out}
        return ordered | {key: value for key, value in out.items() if key not in ordered}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BaseModel):
            return NotImplemented
        return (
            type(self) is type(other)
            and self.__dict__ == other.__dict__
            and (self.__pydantic_extra__ or {}) == (other.__pydantic_extra__ or {})
        )

    def wire(self) -> dict[str, Any]:
        """The wire form: the fields set (explicit ``None`` included), in the order given."""
        return self.model_dump(exclude_unset=True)


def _undefined(model: BaseModel, at: tuple[str | int, ...] = ()) -> list[tuple[Any, Any]]:
    """Undefined keys anywhere in a payload model (nested models included): (location, value)."""
    extra = model.model_extra or {}
    found: list[tuple[Any, Any]] = [((*at, str(k)), v) for k, v in extra.items()]
    for name in type(model).model_fields:
        value = getattr(model, name)
        items = enumerate(value) if isinstance(value, list) else [(None, value)]
        for index, item in items:
            if isinstance(item, EventPayload):
                where = (*at, name) if index is None else (*at, name, index)
                found += _undefined(item, where)
    return found


class TurnStartedPayload(EventPayload):
    """The Turn started (root agent)."""

    task: str = Field(description="The task, at most 2000 characters.")
    mode: str = Field(description="The Session's execution mode: hybrid, rlm or flex.")


class TriageEvidence(EventPayload):
    raw_choice: str | None = Field(None, description="The triage model's own label.")
    backend: str | None = Field(None, description="How the route was chosen.")
    model: str | None = None
    effective_route: str | None = None
    override_reason: str | None = None
    error: str | None = None
    probabilities: dict[str, Number] | None = Field(
        None, description="Jev's probability per route (backend jev only)."
    )
    confidence: Number | None = Field(None, description="Jev's confidence (backend jev only).")
    jev_error: str | None = Field(
        None, description="Why Jev could not triage, when the sub LM decided instead."
    )


class TriageDecisionPayload(EventPayload):
    """The route the Turn takes."""

    mode: str
    route: str = Field(description="direct, flex or rlm.")
    override_reason: str | None = Field(
        None, description="session_mode, selected_context, routing_error, or null."
    )
    summary: str = Field(description="One readable sentence: the route and why.")
    evidence: TriageEvidence | None = None


class ModuleStartPayload(EventPayload):
    """A DSPy module started."""

    call_id: str
    module: str = Field(description="The module's class name.")
    iteration: str | None = Field(None, description="The RLM/Flex iteration, e.g. '2/16'.")


class ModuleEndPayload(EventPayload):
    """A DSPy module ended."""

    call_id: str
    module: str
    duration_ms: Number
    ok: bool
    error_type: str | None = None


class LmStartPayload(EventPayload):
    """A model call started (after its budget unit was charged)."""

    call_id: str
    model: str
    category: str = Field(description="The budget category, e.g. triage, generation, sub_query.")


class TokenUsage(EventPayload):
    input_tokens: int | None = None
    output_tokens: int | None = None


class LmEndPayload(EventPayload):
    """A model call ended."""

    call_id: str
    model: str
    category: str
    duration_ms: Number
    ok: bool
    error_type: str | None = None
    usage: TokenUsage | None = None


class CodeCellPayload(EventPayload):
    """A sandbox cell is about to run."""

    cell: int = Field(description="The cell's number within its agent, from 1.")
    phase: Literal["bootstrap", "task"]
    code: str = Field(description="The code (bounded), or a label for a bootstrap cell.")


class CellOutputPayload(EventPayload):
    """A sandbox cell ended."""

    cell: int
    phase: Literal["bootstrap", "task"]
    ok: bool
    outcome: Literal[
        "completed",
        "submitted",
        "submit_rejected",
        "error",
        "sandbox_error",
        "cancelled",
        "deadline",
        "budget",
    ] = Field(description="submit_rejected: an ungrounded SUBMIT was refused (not an error).")
    duration_ms: Number
    output: str | None = Field(None, description="The cell's output (bounded), when ok.")
    error: str | None = Field(None, description="The error message (bounded), when not ok.")
    error_type: str | None = None


class ToolCallStartPayload(EventPayload):
    """A host tool was called (DSPy tool callbacks)."""

    call_id: str
    tool: str
    source: str = Field(description="Where the call came from: dspy.")
    inputs: dict[str, Any] = Field(default_factory=dict, description="The inputs (bounded).")


class ToolCallEndPayload(EventPayload):
    """A host tool call ended."""

    call_id: str
    tool: str
    source: str
    duration_ms: Number
    ok: bool
    error_type: str | None = None
    output: Any = Field(None, description="The output (bounded), when ok.")


class ChildSpawnedPayload(EventPayload):
    """A child agent started; the event's ``agentId`` is the child, ``parentAgentId`` its parent."""

    depth: int
    subtask: str = Field(description="The child's subtask, at most 500 characters.")
    input_paths: list[str] | None = Field(None, description="Copied inputs; null means files/.")


class ArtifactReceipt(EventPayload):
    path: str
    sha256: str
    agent_id: str
    root_path: str


class ChildFinishedPayload(EventPayload):
    """A child agent ended; the event's ``agentId`` is the child."""

    status: Literal["succeeded", "failed", "cancelled", "deadline", "budget"]
    error: str | None = None
    artifacts: list[ArtifactReceipt] | None = Field(
        None, description="The artifacts promoted to the parent, when succeeded."
    )


class ArtifactPayload(EventPayload):
    """An artifact was written (reserved: the engine does not emit it today)."""

    path: str
    sha256: str | None = None
    size_bytes: int | None = None
    root_path: str | None = None


class BudgetUpdatePayload(EventPayload):
    """Model-call units were charged (coalesced: only the latest pending one is delivered)."""

    used: int = Field(description="Units used by the whole Turn so far.")
    max: int = Field(description="The Turn's model-call budget.")
    category: str


class StatusPayload(EventPayload):
    """The Turn is stopping, or events were dropped (coalesced like budget_update)."""

    status: Literal["stopping", "events_dropped"]
    reason: Terminal | None = Field(None, description="Why it is stopping.")
    message: str | None = None
    dropped: int | None = Field(None, description="How many events a slow consumer missed.")


class SandboxEnvironmentIncompletePayload(EventPayload):
    """Packages of the sandbox environment line are not installed (once per Session and
    process, at the first Turn that finds them missing)."""

    missing: list[str] = Field(description="The missing packages' distribution names.")
    python: str = Field(description="The sandbox's Python version.")


class MemoryProposedPayload(EventPayload):
    """The Turn's code proposed an unreviewed memory (``workspace.remember``); it is committed
    with the Turn's outcome and reaches no model until a person reviews it."""

    memory_id: str = Field(description="The memory's id (fleet/memory/review, reject).")
    name: str = Field(description="The name the code gave it (kept in its sources).")
    kind: str = Field(description='The memory\'s kind: "sandbox".')
    chars: int = Field(description="The content's length in characters (the text is not sent).")


class SkillSavedPayload(EventPayload):
    """The Turn's code saved a Session Skill (``save_skill``); the next Turn's catalog lists it."""

    name: str = Field(description="The Skill's name.")
    path: str = Field(description="The written file: skills/<name>/SKILL.md.")
    size_bytes: int
    sha256: str
    replaced: bool = Field(description="Whether it replaced a Skill of that name.")


class JevDecisionPayload(EventPayload):
    """One batch of typed decisions (triage, Skill selection or ``jev_decide_batched``), by
    Jev or by the sub LM; one budget unit per item, charged to ``category``."""

    category: str = Field(description="routing, skill_selection or other_decisions.")
    backend: Literal["jev", "generative"]
    model: str | None = None
    items: int = Field(description="How many items were decided (= units charged).")
    ok: bool
    duration_ms: Number
    error: str | None = Field(None, description="Why the Jev call failed (never the key).")
    fallback_from: str | None = Field(
        None, description="The Jev failure this sub-LM batch replaced."
    )
    usage: TokenUsage | None = None


class SkillDecision(EventPayload):
    skill: str
    decision: str | None
    raw_choice: str | None = None
    probabilities: dict[str, Number] = Field(default_factory=dict)
    confidence: Number | None = None
    backend: str
    model: str | None = None


class SkillSelectionPayload(EventPayload):
    """Skill preloading (Jev only): the catalog entries classified and those appended."""

    selected: list[str] = Field(description="Skills whose SKILL.md was appended (at most 3).")
    decisions: list[SkillDecision]


class UngroundedSubmitPayload(EventPayload):
    """A SUBMIT carried figures typed in its code that no output showed (engine/grounding.py);
    the agent's first 2 are rejected and returned to the model, later ones accepted and flagged."""

    cell: int = Field(description="The submitting cell's number within its agent.")
    figures: list[str] = Field(description="The ungrounded figures as written (at most 20).")
    rejected: bool = Field(
        description="True: refused (counted in submitRejections); false: flagged."
    )


class TurnEndedPayload(TurnResult):
    """turn_completed, turn_failed, turn_cancelled: the Turn's ``TurnResult`` (camelCase)."""

    model_config = ConfigDict(extra="allow")


AnyPayload: TypeAlias = (
    TurnStartedPayload
    | TriageDecisionPayload
    | ModuleStartPayload
    | ModuleEndPayload
    | LmStartPayload
    | LmEndPayload
    | CodeCellPayload
    | CellOutputPayload
    | ToolCallStartPayload
    | ToolCallEndPayload
    | ChildSpawnedPayload
    | ChildFinishedPayload
    | ArtifactPayload
    | BudgetUpdatePayload
    | StatusPayload
    | SandboxEnvironmentIncompletePayload
    | UngroundedSubmitPayload
    | MemoryProposedPayload
    | SkillSavedPayload
    | JevDecisionPayload
    | SkillSelectionPayload
    | TurnEndedPayload
)
PayloadModel: TypeAlias = type[EventPayload] | type[TurnEndedPayload]
PAYLOADS: dict[str, PayloadModel] = {
    "turn_started": TurnStartedPayload,
    "triage_decision": TriageDecisionPayload,
    "module_start": ModuleStartPayload,
    "module_end": ModuleEndPayload,
    "lm_start": LmStartPayload,
    "lm_end": LmEndPayload,
    "code_cell": CodeCellPayload,
    "cell_output": CellOutputPayload,
    "tool_call_start": ToolCallStartPayload,
    "tool_call_end": ToolCallEndPayload,
    "child_spawned": ChildSpawnedPayload,
    "child_finished": ChildFinishedPayload,
    "artifact": ArtifactPayload,
    "budget_update": BudgetUpdatePayload,
    "status": StatusPayload,
    "sandbox_environment_incomplete": SandboxEnvironmentIncompletePayload,
    "ungrounded_submit": UngroundedSubmitPayload,
    "memory_proposed": MemoryProposedPayload,
    "skill_saved": SkillSavedPayload,
    "jev_decision": JevDecisionPayload,
    "skill_selection": SkillSelectionPayload,
    "turn_completed": TurnEndedPayload,
    "turn_failed": TurnEndedPayload,
    "turn_cancelled": TurnEndedPayload,
}
# What an emitter hands the event channel: its kind's model (a TurnResult for turn_completed,
# turn_failed and turn_cancelled).
Payload: TypeAlias = EventPayload | TurnResult


def wire_payload(kind: str, payload: Payload) -> dict[str, Any]:
    """The wire form of an emitted payload, once it is known to be its kind's model (else
    ``EventPayloadError``): ``EventPayload.wire()``, or a ``TurnResult``'s camelCase ``wire()``."""
    model = PAYLOADS.get(kind)
    if model is None:
        raise EventPayloadError(f"unknown event kind {kind!r}")
    expected: type[BaseModel] = TurnResult if model is TurnEndedPayload else model
    if not isinstance(payload, expected):
        raise EventPayloadError(
            f"a {kind} event takes a {expected.__name__}, not {type(payload).__name__}"
        )
    if isinstance(payload, EventPayload):
        undefined = _undefined(payload)  # a model parsed with extra="allow" may carry some
        if undefined:
            where = ", ".join(".".join(str(p) for p in loc) for loc, _ in undefined)
            raise EventPayloadError(f"{kind}: not fields of {model.__name__}: {where}")
    return payload.wire()


def check_payload(kind: str, payload: Mapping[str, Any]) -> list[str]:
    """What is wrong with a wire ``payload`` for ``kind``: unknown kind, invalid or undefined
    fields (e.g. after redaction and bounding; emitted payloads are models, checked when built)."""
    model = PAYLOADS.get(kind)
    if model is None:
        return [f"unknown event kind {kind!r}"]
    try:
        parsed = model.model_validate(payload, extra="allow")
    except ValidationError as exc:
        return [
            f"{'.'.join(str(p) for p in err['loc']) or '(payload)'}: {err['msg']}"
            for err in exc.errors()
        ]
    return [
        f"{'.'.join(str(p) for p in loc)}: not a field of {model.__name__}"
        for loc, _ in _undefined(parsed)
    ]


def parse_payload(kind: str, payload: Mapping[str, Any]) -> AnyPayload | None:
    """The payload as its kind's model; invalid fields dropped, ``None`` if it cannot parse."""
    model = PAYLOADS.get(kind)
    if model is None:
        return None
    data = dict(payload)
    for _ in range(len(data) + 1):
        try:
            return model.model_validate(data, extra="allow")  # type: ignore[return-value]
        except ValidationError as exc:
            bad = {str(err["loc"][0]) for err in exc.errors() if err["loc"]} & data.keys()
            if not bad:
                return None
            for key in bad:
                del data[key]
    return None


# --- the published schema -------------------------------------------------------------------


def _event_envelope(kinds: dict[str, str]) -> dict[str, Any]:
    one_of = [
        {
            "properties": {
                "kind": {"const": kind},
                "payload": {"$ref": f"#/$defs/{name}"},
            }
        }
        for kind, name in kinds.items()
    ]
    return {
        "type": "object",
        "required": ["turnId", "sessionId", "seq", "agentId", "kind", "payload"],
        "properties": {
            "version": {"type": "integer", "const": EVENT_VERSION},
            "turnId": {"type": "string"},
            "sessionId": {"type": "string"},
            "seq": {"type": "integer", "minimum": 1},
            "agentId": {"type": "string", "description": "root, or a child agent's id"},
            "parentAgentId": {"type": "string"},
            "kind": {"enum": list(kinds)},
            "payload": {"type": "object"},
            "at": {"type": "string", "format": "date-time"},
        },
        "oneOf": one_of,
    }


def json_schema() -> dict[str, Any]:
    """The JSON schema of ``fleet/turn/didEmit`` params, one payload definition per kind."""
    models = list(dict.fromkeys(PAYLOADS.values()))
    names, defs = models_json_schema(
        [(m, "validation") for m in models], ref_template="#/$defs/{model}"
    )
    kinds = {
        kind: names[(m, "validation")]["$ref"].rsplit("/", 1)[1] for kind, m in PAYLOADS.items()
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "fleet/turn/didEmit",
        "description": (
            f"A TurnEvent (version {EVENT_VERSION}) as sent in fleet/turn/didEmit; generated from "
            "fleet_core.event_payloads (python -m fleet_core.event_payloads)."
        ),
        **_event_envelope(kinds),
        "$defs": defs["$defs"],
    }


def schema_text() -> str:
    """The schema as committed: two-space indented JSON with a final newline."""
    return json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Print the schema, or write it to the path given."""
    args = sys.argv[1:] if argv is None else argv
    if args:
        with open(args[0], "w", encoding="utf-8") as out:
            out.write(schema_text())
    else:
        sys.stdout.write(schema_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
