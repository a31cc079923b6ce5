"""The Turn program: triage -> direct | flex | rlm, with delegation to child agents.

Runs synchronously in the Turn's worker thread under ``dspy.context`` (never ``dspy.configure``).
Sandboxes come from an ``AgentSpace`` (the Session workspace for the root, a fresh child
workspace with copied inputs for each child); models from an ``LmProvider``; limits and events
from the shared ``TurnControl``.
"""

from __future__ import annotations

import contextvars
import dataclasses
import re
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

import dspy

from fleet_core.engine.adapter import FleetChatAdapter
from fleet_core.engine.callbacks import EventCallback
from fleet_core.engine.codefirst import SYSTEM
from fleet_core.engine.context import TurnInputs
from fleet_core.engine.control import ChildCapacityError, Lineage, TurnControl, TurnStopped
from fleet_core.engine.dataset import DatasetHandle
from fleet_core.engine.decisions import Decider, check_request, triage_with_jev
from fleet_core.engine.interpreter import TURN_EXECUTION_INSTRUCTIONS, TurnInterpreter
from fleet_core.engine.jev import JevClient, JevError
from fleet_core.engine.learning import TurnLearning
from fleet_core.engine.lm import LmProvider, StartTimedLms
from fleet_core.engine.metering import MeteredLM
from fleet_core.engine.preload import preload
from fleet_core.engine.profile import DEFAULT, EngineProfile
from fleet_core.engine.signatures import (
    ChildTask,
    CodeFirstProgram,
    DirectAnswer,
    FleetTask,
    TurnTriage,
)
from fleet_core.errors import FleetError, InvalidInput
from fleet_core.event_payloads import (
    ArtifactReceipt,
    ChildFinishedPayload,
    ChildSpawnedPayload,
    TriageDecisionPayload,
    TriageEvidence,
)
from fleet_core.events import ROOT_AGENT
from fleet_core.models import ProvenanceRecord
from fleet_core.modes import ROUTES
from fleet_core.outcomes import Reached, RouteAnswer
from fleet_core.sandbox.interpreter import SandboxInterpreter
from fleet_core.skills import Skill, use_skill_text

MAX_SUBTASK_CHARS = 20_000
MAX_FINDINGS_CHARS = 20_000
MAX_NOTE_CHARS = 10_000
MAX_SUBTASKS = 8
MAX_REFERENCE_CHARS = 200_000


class AgentSpace(Protocol):
    """Where one agent's code runs: its workspace and a way to make interpreters over it."""

    agent_id: str
    parent_agent_id: str | None
    depth: int

    def new_interpreter(self) -> tuple[SandboxInterpreter, Callable[[], None]]:
        """The DSPy adapter over a fresh sandbox on this workspace and a non-blocking interrupt."""

    def open_child(self, agent_id: str, input_paths: Sequence[str] | None) -> AgentSpace:
        """A child workspace with copied inputs (all ``files/`` when ``input_paths`` is None)."""

    def promote(self) -> list[ProvenanceRecord]:
        """Copy this child's new/changed artifacts to its parent with provenance."""

    def close(self) -> None:
        """Destroy this agent's sandboxes (and, for a child, its workspace)."""


@dataclass(slots=True)
class RouteDecision:
    route: str
    override_reason: str | None
    raw_choice: str | None = None
    error: str | None = None
    backend: str = "generative"
    model: str | None = None
    probabilities: dict[str, float] | None = None  # Jev's, per route
    confidence: float | None = None
    jev_error: str | None = None  # Jev failed; the sub LM decided

    def payload(self, mode: str) -> TriageDecisionPayload:
        return TriageDecisionPayload(
            mode=mode,
            route=self.route,
            override_reason=self.override_reason,
            summary=_summary(self, mode),
            evidence=TriageEvidence(
                raw_choice=self.raw_choice,
                backend=self.backend,
                model=self.model,
                effective_route=self.route,
                override_reason=self.override_reason,
                error=self.error,
                probabilities=self.probabilities,
                confidence=self.confidence,
                jev_error=self.jev_error,
            ),
        )


def read_skill_file(skills: Sequence[Skill], name: str, path: str) -> str:
    """Stage 3 of a Skill: one ``references/`` or ``assets/`` file as text (bounded)."""
    skill = next((s for s in skills if s.name == name), None)
    if skill is None:
        known = ", ".join(s.name for s in skills) or "none"
        raise InvalidInput(f"No Skill named {name!r}; available: {known}")
    relative = str(path).removeprefix(f"skills/{name}/").removeprefix("./")
    if not relative.startswith(("references/", "assets/")) or ".." in relative.split("/"):
        raise InvalidInput("path must be a file under the Skill's references/ or assets/")
    data = skill.files.get(relative)
    if data is None:
        listing = sorted(p for p in skill.files if p.startswith(("references/", "assets/")))
        raise InvalidInput(f"Skill {name!r} has no {relative!r}; it has: {listing or 'none'}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return f"[binary file, {len(data)} bytes: open skills/{name}/{relative} in code]"
    return text[:MAX_REFERENCE_CHARS]


def _summary(decision: RouteDecision, mode: str) -> str:
    reason = {
        "session_mode": f"the Session's mode is {mode}",
        "selected_context": "a dataset is selected, so a code route is required",
        "routing_error": "triage failed or gave an unknown label; falling back to rlm",
        None: "triage chose the least expensive sufficient route",
    }.get(decision.override_reason, decision.override_reason or "")
    return f"Route {decision.route}: {reason} (a routing decision, not private reasoning)"


@dataclass(slots=True)
class EngineResult:
    answer: str
    route: str
    learned_note: str
    decision: RouteDecision
    artifacts: list[ProvenanceRecord] = field(default_factory=list)
    reached: Reached = "submitted"
    reached_detail: str = ""
    children_failed: int = 0


class TurnProgram:
    """One Turn's DSPy program; construct per Turn, call ``run`` in the worker thread."""

    def __init__(
        self,
        *,
        lms: LmProvider,
        control: TurnControl,
        root_space: AgentSpace,
        max_iters: int = 16,
        child_max_iters: int = 8,
        child_max_llm_calls: int = 25,
        jev: JevClient | None = None,
        learning: TurnLearning | None = None,
        overrides: Mapping[str, str] | None = None,
        profile: EngineProfile = DEFAULT,
    ) -> None:
        self.profile = profile  # default or small (engine/profile.py, engine/small.py)
        # getting a model may start the embedded server: its own part of the Turn's time
        self.lms: LmProvider = StartTimedLms(lms, control.add_model_start_time)
        self.jev = jev  # the optional Jev decision API (engine/jev.py); None when off
        self.learning = learning  # workspace.remember and save_skill (engine/learning.py)
        # the served program's component texts (fleet_core.optimization.program): instructions
        # keyed "triage", "direct", "rlm.generate_action", "rlm.extract"; Flex source "flex"
        self.overrides: dict[str, str] = dict(overrides or {})
        self.control = control
        self.root_space = root_space
        self.max_iters = max_iters
        self.child_max_iters = child_max_iters
        self.child_max_llm_calls = child_max_llm_calls
        self.adapter = FleetChatAdapter()
        self._promoted: list[ProvenanceRecord] = []
        self._children_failed = 0  # child agents that failed (their parent went on)
        self._lock = threading.Lock()
        self._skills: tuple[Skill, ...] = ()

    # --- entry -------------------------------------------------------------------------------

    def run(self, inputs: TurnInputs) -> EngineResult:
        self._skills = inputs.skills
        control = self.control
        root_lm = MeteredLM(self.lms.lm("root"), control, category="generation")
        callbacks = [EventCallback(control, ROOT_AGENT, None)]
        # disable_history: dspy would keep every call (prompt and response) for the process's life
        with dspy.context(
            lm=root_lm, adapter=self.adapter, callbacks=callbacks, disable_history=True
        ):
            decision = self.route(inputs)
            control.emit("triage_decision", decision.payload(inputs.mode))
            if decision.route == "direct":
                routed = RouteAnswer(self._direct(inputs))
            else:
                inputs = self._preloaded(inputs)
                routed = self._code_route(inputs, decision.route)
        with self._lock:
            promoted, children_failed = list(self._promoted), self._children_failed
        return EngineResult(
            answer=routed.answer,
            route=decision.route,
            learned_note=routed.note[:MAX_NOTE_CHARS],
            decision=decision,
            artifacts=promoted,
            reached=routed.reached,
            reached_detail=routed.detail,
            children_failed=children_failed,
        )

    # --- routing -----------------------------------------------------------------------------

    def route(self, inputs: TurnInputs) -> RouteDecision:
        mode = inputs.mode
        if mode in ("rlm", "flex"):
            decision = RouteDecision(route=mode, override_reason="session_mode")
        elif self.profile.small and inputs.dataset is not None:
            # a dataset leaves only rlm and flex: a small model's triage call is skipped
            decision = RouteDecision(route="flex", override_reason="selected_context")
        else:
            decision = self._triage_jev(inputs) if self.jev is not None else self._triage(inputs)
        if decision.route == "direct" and inputs.dataset is not None:
            decision.route = "rlm"
            decision.override_reason = "selected_context"
        return decision

    # --- Jev (engine/decisions.py, engine/preload.py) -------------------------------------------

    def decider(self, space: AgentSpace | None = None) -> Decider:
        space = space or self.root_space
        return Decider(
            control=self.control,
            jev=self.jev,
            sub_lm=self.lms.lm("sub"),
            agent_id=space.agent_id,
            parent_agent_id=space.parent_agent_id,
        )

    def _triage_jev(self, inputs: TurnInputs) -> RouteDecision:
        """Jev's route (one unit, ``routing``); the sub LM's triage when Jev fails."""
        try:
            d = triage_with_jev(
                self.decider(), inputs.task, inputs.workspace_manifest, inputs.skills_catalog
            )
        except TurnStopped:
            raise
        except JevError as exc:
            self.control.check()
            fallback = self._triage(inputs)
            fallback.jev_error = exc.message[:500]
            return fallback
        route = d.decision or "rlm"
        return RouteDecision(
            route=route,
            override_reason=None,
            raw_choice=d.raw_choice,
            backend="jev",
            model=d.model,
            probabilities=d.probabilities,
            confidence=d.confidence,
        )

    def _preloaded(self, inputs: TurnInputs) -> TurnInputs:
        """The inputs with up to 3 relevant SKILL.md files after the catalog (Jev only)."""
        if self.jev is None or not inputs.skills:
            return inputs
        catalog = preload(self.decider(), inputs.task, inputs.skills, inputs.skills_catalog)
        return dataclasses.replace(inputs, skills_catalog=catalog)

    def _decide_tool(self, space: AgentSpace) -> Callable[..., Any]:
        def jev_decide_batched(
            items: list[str], question: str, choices: list[str]
        ) -> list[dict[str, Any]]:
            """Decide each item with one of `choices` (1-100 items, 1-20 choices; one budget unit
            per item). Uses Jev when configured, else the sub LM. Returns one dict per item, in
            order: {item, decision, raw_choice, probabilities, confidence, backend, model}."""
            checked = check_request(items, question, choices)
            decisions = self.decider(space).decide(*checked, category="other_decisions")
            return [d.as_dict() for d in decisions]

        return jev_decide_batched

    def _triage(self, inputs: TurnInputs) -> RouteDecision:
        sub = self.lms.lm("sub")
        model = str(getattr(sub, "model", "") or "") or None
        triage_lm = MeteredLM(sub, self.control, category="routing")
        try:
            with dspy.context(lm=triage_lm):
                prediction = dspy.Predict(self._signature(TurnTriage, "triage"))(
                    task=inputs.task,
                    workspace_manifest=self._for_profile(inputs).workspace_manifest,
                    skills_catalog=self._for_profile(inputs).skills_catalog,
                )
        except TurnStopped:
            raise
        except Exception as exc:
            self.control.check()
            return RouteDecision(
                route="rlm",
                override_reason="routing_error",
                error=f"{type(exc).__name__}: {exc}"[:500],
                model=model,
            )
        raw = str(getattr(prediction, "route", "") or "")
        words = re.findall(r"[a-z]+", raw.lower())
        label = words[0] if words else ""
        if label in ROUTES:
            return RouteDecision(
                route=label, override_reason=None, raw_choice=raw[:200], model=model
            )
        return RouteDecision(
            route="rlm",
            override_reason="routing_error",
            raw_choice=raw[:200],
            error=f"unknown route label {raw[:100]!r}",
            model=model,
        )

    def _for_profile(self, inputs: TurnInputs) -> TurnInputs:
        """The inputs as the profile shows them (the small profile's are compact)."""
        if not self.profile.small:
            return inputs
        from fleet_core.engine.small import compact_inputs

        return compact_inputs(inputs)

    # --- routes ------------------------------------------------------------------------------

    def _direct(self, inputs: TurnInputs) -> str:
        prediction = dspy.ChainOfThought(self._signature(DirectAnswer, "direct"))(
            memory_summary=inputs.memory_summary,
            session_history=inputs.session_history,
            task=inputs.task,
        )
        return str(prediction.answer)

    def _tools_for(self, space: AgentSpace) -> list[Callable[..., Any]]:
        tools: list[Callable[..., Any]] = [
            self._list_skills_tool(),
            self._use_skill_tool(),
            self._read_skill_reference_tool(),
            self._decide_tool(space),
        ]
        if space.depth < self.control.limits.max_depth:
            tools[:0] = [self._spawn_agent_tool(space), self._spawn_agents_tool(space)]
        if self.learning is not None:
            tools += self.learning.tools(space.agent_id, space.parent_agent_id)
        return tools

    def _factory(self, space: AgentSpace, host_inputs: Sequence[str] = ()) -> Callable[[], Any]:
        """DSPy's interpreter factory for ``space``: every interpreter is one ``TurnInterpreter``.
        ``host_inputs``: the serialized inputs whose setup cells DSPy runs for the host."""
        control = self.control

        def make() -> TurnInterpreter:
            inner, interrupt = space.new_interpreter()
            return TurnInterpreter(
                inner,
                control,
                agent_id=space.agent_id,
                parent_agent_id=space.parent_agent_id,
                interrupt=interrupt,
                host_inputs=host_inputs,
            )

        make.execution_instructions = TURN_EXECUTION_INSTRUCTIONS  # type: ignore[attr-defined]
        return make

    def _code_route(self, inputs: TurnInputs, route: str) -> RouteAnswer:
        if self.profile.small:
            from fleet_core.engine.small import small_code_route

            return small_code_route(self, inputs, route)
        space = self.root_space
        sub_lm = MeteredLM(self.lms.lm("sub"), self.control, category="sub_query")
        kwargs = {
            "workspace_manifest": inputs.workspace_manifest,
            "skills_catalog": inputs.skills_catalog,
            "memory_summary": inputs.memory_summary,
            "session_history": inputs.session_history,
            "execution_route": route,
            "task": inputs.task,
        }
        tools = self._tools_for(space)
        if route == "flex":
            factory = self._factory(space)
            context: Any = DatasetHandle(inputs.dataset).rlm_preview() if inputs.dataset else ""
            flex = self.build_flex(tools, factory)
            with dspy.context(interpreter_factory=factory):
                prediction = flex(**kwargs, context=context)
        else:
            handle = DatasetHandle(inputs.dataset) if inputs.dataset else None
            payloads = [handle.to_sandbox().decode()] if handle is not None else []
            factory = self._factory(space, payloads)
            context = handle if handle is not None else ""
            rlm = self.build_rlm(tools, factory, sub_lm)
            prediction = rlm(**kwargs, context=context)
        self.control.check()
        return RouteAnswer.of(prediction)

    # --- the served program's components (GEPA's parameter paths) ------------------------------

    def _signature(self, signature: Any, component: str) -> Any:
        text = self.overrides.get(component)
        return signature.with_instructions(text) if text else signature

    def build_rlm(self, tools: list[Callable[..., Any]], factory: Any, sub_lm: Any) -> Any:
        """The primary RLM with the served action/extract instructions applied."""
        rlm = dspy.RLM(
            FleetTask,
            max_iters=self.max_iters,
            max_llm_calls=self.control.max_units,
            tools=tools,
            sub_lm=sub_lm,
            interpreter_factory=factory,
        )
        for name in ("generate_action", "extract"):
            text = self.overrides.get(f"rlm.{name}")
            if text:
                predictor = getattr(rlm, name)
                predictor.signature = predictor.signature.with_instructions(text)
        return rlm

    def build_flex(self, tools: list[Callable[..., Any]], factory: Any) -> Any:
        """The Flex module with the served source bound."""
        flex = dspy.Flex(FleetTask, tools=tools, interpreter_factory=factory)
        if self.overrides.get("flex"):
            flex._bind_code(self.overrides["flex"])
        return flex

    def component_modules(self) -> dict[str, Any]:
        """The root's optimizable modules as a Turn builds them (for GEPA's student)."""
        space = self.root_space
        tools = self._tools_for(space)
        factory = self._factory(space)
        return {
            "triage": dspy.Predict(self._signature(TurnTriage, "triage")),
            "direct": dspy.Predict(self._signature(DirectAnswer, "direct")),
            "rlm": self.build_rlm(tools, factory, None),
            "flex": self.build_flex(tools, factory),
            "codefirst": dspy.Predict(
                CodeFirstProgram.with_instructions(self.overrides.get("codefirst") or SYSTEM)
            ),
        }

    # --- skills tools ------------------------------------------------------------------------

    def _list_skills_tool(self) -> Callable[..., Any]:
        def list_skills() -> list[dict[str, str]]:
            """List the available Skills (name and description)."""
            return [{"name": s.name, "description": s.description} for s in self._skills]

        return list_skills

    def _use_skill_tool(self) -> Callable[..., Any]:
        def use_skill(name: str) -> str:
            """Read a Skill's instructions and resource list; resources are under skills/<name>/."""
            return use_skill_text(list(self._skills), name)

        return use_skill

    def _read_skill_reference_tool(self) -> Callable[..., Any]:
        def read_skill_reference(name: str, path: str) -> str:
            """Read a Skill resource under references/ or assets/ (path relative to the Skill)."""
            return read_skill_file(self._skills, name, path)

        return read_skill_reference

    # --- delegation --------------------------------------------------------------------------

    def _spawn_agent_tool(self, parent: AgentSpace) -> Callable[..., Any]:
        def spawn_agent(
            subtask: str,
            input_paths: list[str] | None = None,
            max_iters: int = 8,
            max_llm_calls: int = 25,
        ) -> dict[str, Any]:
            """Run a subtask in a child agent with its own sandbox and copied inputs.

            input_paths are files/... or artifacts/... paths; returns {findings, artifacts}.
            """
            self.control.reserve_children(parent.depth, 1)
            return self._run_child(parent, subtask, input_paths, max_iters, max_llm_calls)

        return spawn_agent

    def _spawn_agents_tool(self, parent: AgentSpace) -> Callable[..., Any]:
        def spawn_agents(
            subtasks: list[str],
            input_paths: list[list[str]] | None = None,
            max_iters: int = 8,
            max_llm_calls: int = 25,
        ) -> list[dict[str, Any]]:
            """Run 1-8 independent subtasks concurrently in child agents.

            input_paths is one list per subtask; returns one {findings, artifacts} per subtask,
            in order.
            """
            if not isinstance(subtasks, list) or not 1 <= len(subtasks) <= MAX_SUBTASKS:
                raise InvalidInput(f"subtasks must be a list of 1-{MAX_SUBTASKS} strings")
            if input_paths is not None and (
                not isinstance(input_paths, list) or len(input_paths) != len(subtasks)
            ):
                raise InvalidInput("input_paths must have exactly one list per subtask")
            self.control.reserve_children(parent.depth, len(subtasks))
            limits = self.control.limits
            workers = min(len(subtasks), limits.max_live_children)
            paths: list[list[str] | None] = (
                list(input_paths) if input_paths is not None else [None] * len(subtasks)
            )
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="fleet-child") as pool:
                futures = [
                    pool.submit(
                        contextvars.copy_context().run,
                        self._run_child,
                        parent,
                        task,
                        inputs,
                        max_iters,
                        max_llm_calls,
                    )
                    for task, inputs in zip(subtasks, paths, strict=True)
                ]
                results = []
                for future in futures:
                    try:
                        results.append(future.result())
                    except BaseException:
                        for other in futures:
                            other.cancel()
                        raise
            return results

        return spawn_agents

    def _run_child(
        self,
        parent: AgentSpace,
        subtask: str,
        input_paths: list[str] | None,
        max_iters: int,
        max_llm_calls: int,
    ) -> dict[str, Any]:
        control = self.control
        if not isinstance(subtask, str) or not subtask.strip():
            raise InvalidInput("subtask must be a non-empty string")
        if len(subtask) > MAX_SUBTASK_CHARS:
            raise InvalidInput(f"subtask is longer than {MAX_SUBTASK_CHARS} characters")
        if not (isinstance(max_iters, int) and 1 <= max_iters <= self.child_max_iters):
            raise InvalidInput(f"max_iters must be an integer 1-{self.child_max_iters}")
        if not (isinstance(max_llm_calls, int) and 1 <= max_llm_calls <= self.child_max_llm_calls):
            raise InvalidInput(f"max_llm_calls must be an integer 1-{self.child_max_llm_calls}")
        if input_paths is not None and (
            not isinstance(input_paths, list)
            or len(input_paths) > 100
            or not all(isinstance(path, str) for path in input_paths)
        ):
            raise InvalidInput("input_paths must be a list of at most 100 workspace paths")
        agent_id = f"agent-{uuid.uuid4().hex[:8]}"
        lineage = Lineage(agent_id=agent_id, parent_agent_id=parent.agent_id)
        with control.child_slot(parent.depth) as depth:
            control.emit(
                "child_spawned",
                ChildSpawnedPayload(depth=depth, subtask=subtask[:500], input_paths=input_paths),
                **lineage,
            )
            try:
                space = parent.open_child(agent_id, input_paths)
            except ChildCapacityError:
                raise
            except FleetError as exc:
                control.emit(
                    "child_finished",
                    ChildFinishedPayload(status="failed", error=exc.message),
                    **lineage,
                )
                raise
            try:
                result = self._child_program(space, subtask, max_iters, max_llm_calls)
            except BaseException as exc:
                space.close()
                terminal = control.terminal
                if terminal is not None:
                    control.emit("child_finished", ChildFinishedPayload(status=terminal), **lineage)
                    raise control.error() from exc
                if isinstance(exc, TurnStopped | KeyboardInterrupt | SystemExit):
                    raise
                error = f"child agent failed ({type(exc).__name__}): {str(exc)[:500]}"
                with self._lock:
                    self._children_failed += 1
                failed = ChildFinishedPayload(status="failed", error=error)
                control.emit("child_finished", failed, **lineage)
                return {"findings": "", "error": error, "artifacts": []}
            try:
                records = space.promote()
            finally:
                space.close()
        if parent.depth == 0:
            with self._lock:
                self._promoted.extend(records)
        receipts = [
            {"path": r.path, "sha256": r.sha256, "agent_id": r.agent_id, "root_path": r.root_path}
            for r in records
        ]
        finished = ChildFinishedPayload(
            status="succeeded",
            artifacts=[
                ArtifactReceipt(
                    path=r.path, sha256=r.sha256, agent_id=r.agent_id, root_path=r.root_path
                )
                for r in records
            ],
        )
        control.emit("child_finished", finished, **lineage)
        return {"findings": result[:MAX_FINDINGS_CHARS], "artifacts": receipts}

    def _child_program(
        self, space: AgentSpace, subtask: str, max_iters: int, max_llm_calls: int
    ) -> str:
        control = self.control
        sub = self.lms.lm("sub")
        child_lm = MeteredLM(
            sub,
            control,
            category="child",
            agent_id=space.agent_id,
            parent_agent_id=space.parent_agent_id,
        )
        query_lm = MeteredLM(
            sub,
            control,
            category="sub_query",
            agent_id=space.agent_id,
            parent_agent_id=space.parent_agent_id,
        )
        callbacks = [EventCallback(control, space.agent_id, space.parent_agent_id)]
        with dspy.context(
            lm=child_lm, adapter=self.adapter, callbacks=callbacks, disable_history=True
        ):
            rlm = dspy.RLM(
                ChildTask,
                max_iters=max_iters,
                max_llm_calls=max_llm_calls,
                tools=self._tools_for(space),
                sub_lm=query_lm,
                interpreter_factory=self._factory(space),
            )
            prediction = rlm(subtask=subtask)
        control.check()
        return str(prediction.findings)
