"""The GEPA search: native ``dspy.GEPA`` over the Turn program's components.

The student is a ``dspy.Module`` carrying the root's optimizable modules exactly as a Turn builds
them (``TurnProgram.component_modules``, with the incumbent's overrides applied): the primary
RLM (``rlm.generate_action``, ``rlm.extract``), ``triage``, ``direct``, the Flex module
(``flex``, a code component) and the small profile's code-first prompt (``codefirst``). Its
``forward`` turns the candidate's texts into a
``ProgramState`` and runs the example as a rollout (``rollout.py``: a fresh disposable runtime
restored from the replay snapshot); what the rollout did is recorded in DSPy's trace for the
components that served it, so GEPA's reflection sees each component's inputs, outputs and
``fleet_metric``'s feedback; each iteration reflects on one of the components that served
(``ServedFirst``). The judge scores (``evaluation.judge.gepa_metric``), the reflection
model proposes (DSPy's ``InstructionProposer`` on the chat adapter, and its Flex code proposer).

Budget: ``light|medium|heavy`` (GEPA's auto budget for 6 components and the dev set) or
``max_metric_calls``; it bounds the search's rollouts only (reflection, judging and validation
are extra). Cancellation stops GEPA between iterations and fails every further rollout at once.

Quiet: DSPy 3.4.1 hard-codes both tqdm bars a search draws (``GEPA.compile`` passes
``display_progress_bar=True`` to GEPA's engine, ``bootstrap_trace_data`` builds its ``Evaluate``
with ``display_progress=True``: "Average Metric" on stdout); neither is an option.
``quiet_progress`` gives those two modules a tqdm that is disabled in the search's context (a
``ContextVar``: other threads and callers see plain tqdm); the faces show ``on_progress``.
"""

from __future__ import annotations

import contextvars
import logging
import threading
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import dspy
from dspy.teleprompt.gepa import InstructionProposer
from dspy.teleprompt.gepa.gepa import AUTO_RUN_SETTINGS

from fleet_core.evaluation.judge import gepa_metric, labels_example
from fleet_core.events import ROOT_AGENT
from fleet_core.optimization.dataset import OptExample
from fleet_core.optimization.program import COMPONENTS, ProgramState, changed_components
from fleet_core.optimization.rollout import OptimizationCancelled, Rollouts

log = logging.getLogger(__name__)
MAX_TRACE_TEXT = 8_000
SEARCH_THREADS = 1
_QUIET: contextvars.ContextVar[bool] = contextvars.ContextVar("fleet_quiet_search", default=False)
_INSTALL = threading.Lock()


@contextmanager
def quiet_progress() -> Iterator[None]:
    """No tqdm bar from DSPy's evaluator or GEPA's engine while the body runs (in this context)."""
    _install_scoped_tqdm()
    token = _QUIET.set(True)
    try:
        yield
    finally:
        _QUIET.reset(token)


def _install_scoped_tqdm() -> None:
    from dspy.utils import parallelizer
    from gepa.core import engine

    with _INSTALL:
        if getattr(parallelizer.tqdm, "fleet_scoped", False):
            return
        base: Any = parallelizer.tqdm.tqdm

        class ScopedTqdm(base):  # type: ignore[misc]
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                if _QUIET.get():
                    kwargs["disable"] = True
                super().__init__(*args, **kwargs)

        parallelizer.tqdm = types.SimpleNamespace(tqdm=ScopedTqdm, fleet_scoped=True)
        setattr(engine, "tqdm", ScopedTqdm)  # noqa: B010 (not re-exported by gepa)


def component_texts(student: Any) -> dict[str, str]:
    texts = {
        "rlm.generate_action": student.rlm.generate_action.signature.instructions,
        "rlm.extract": student.rlm.extract.signature.instructions,
        "triage": student.triage.signature.instructions,
        "direct": student.direct.signature.instructions,
        "flex": student.flex.module_src or "",
        "codefirst": student.codefirst.signature.instructions,
    }
    return {k: str(v) for k, v in texts.items() if k in COMPONENTS}


class ServedFirst:
    """GEPA's round robin over the components that served a rollout (``served``, filled by the
    student as it records them), else over all. GEPA's own round robin also picks components
    no rollout used (the RLM's, when every rollout ran code-first Flex): that iteration then
    has no reflective examples and proposes nothing, spending its budget."""

    def __init__(self, served: set[str]) -> None:
        self.served = served
        self._next: dict[int, int] = {}

    def __call__(
        self,
        state: Any,
        trajectories: Any,
        subsample_scores: Any,
        candidate_idx: int,
        candidate: dict[str, str],
    ) -> list[str]:
        names = list(state.list_of_named_predictors)
        served = [n for n in names if n in self.served] or names
        turn = self._next.get(candidate_idx, 0)
        self._next[candidate_idx] = turn + 1
        return [served[turn % len(served)]]


class _Proposer(InstructionProposer):  # type: ignore[misc]
    """DSPy's proposer, asked only about components that have reflective examples."""

    def __call__(
        self,
        candidate: dict[str, str],
        reflective_dataset: Mapping[str, Any],
        components_to_update: list[str],
    ) -> dict[str, str]:
        present = [c for c in components_to_update if reflective_dataset.get(c)]
        if not present:
            return {}
        result: dict[str, str] = super().__call__(
            candidate=candidate,
            reflective_dataset=reflective_dataset,
            components_to_update=present,
        )
        return result


def make_student(
    modules: Mapping[str, Any],
    rollouts: Rollouts,
    examples: Mapping[str, OptExample],
    incumbent: ProgramState,
    *,
    code_first: bool = False,
    served: set[str] | None = None,
) -> Any:
    """The GEPA student (its runner is a closure, so GEPA's deep copies share it).
    ``code_first``: the rollouts run the small profile, whose flex route is code-first Flex."""
    seed: dict[str, str] = {}
    used = served if served is not None else set()

    class FleetTurnProgram(dspy.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.rlm = modules["rlm"]  # first: GEPA's round robin starts with its action
            self.triage = modules["triage"]
            self.direct = modules["direct"]
            self.flex = modules["flex"]
            self.codefirst = modules["codefirst"]

        def forward(self, task: str, example_id: str) -> Any:
            example = examples[example_id]
            texts = component_texts(self)
            program = ProgramState(
                components={**incumbent.components, **changed_components(seed, texts)}
            )
            result = rollouts.run(example, program)
            self._record(example, result)
            return dspy.Prediction(
                answer=result.answer,
                route=result.route,
                model_calls=result.model_calls if not result.failed else None,
                sandbox_errors=result.sandbox_errors if not result.failed else None,
                error=result.error,
                outcome=result.outcome,
            )

        def _record(self, example: OptExample, result: Any) -> None:
            trace = dspy.settings.trace
            if trace is None:
                return
            snap = example.snapshot
            task = snap.task[:MAX_TRACE_TEXT]
            answer = result.answer or (result.error or "")
            if code_first and result.route in (None, "flex"):  # no triage ran with a dataset
                program = result.cells[-1].split("\n-> ")[0] if result.cells else ""
                outcome = "\n\n".join(result.cells)[-MAX_TRACE_TEXT:] or "(no program ran)"
                written = dspy.Prediction(program=f"{program}\n\n# what ran:\n{outcome}")
                trace.append((self.codefirst, {"request": task}, written))
                used.add("codefirst")
                return
            if snap.mode == "hybrid":
                inputs = {
                    "task": task,
                    "workspace_manifest": snap.workspace_manifest[:MAX_TRACE_TEXT],
                    "skills_catalog": "",
                }
                trace.append((self.triage, inputs, dspy.Prediction(route=result.route or "")))
                used.add("triage")
            if result.route == "direct":
                inputs = {
                    "memory_summary": snap.memory_summary[:MAX_TRACE_TEXT],
                    "session_history": "",
                    "task": task,
                }
                trace.append((self.direct, inputs, dspy.Prediction(answer=answer)))
                used.add("direct")
            elif result.route in (None, "rlm"):
                history = "\n\n".join(result.cells)[-MAX_TRACE_TEXT:] or "(no cells ran)"
                inputs = {
                    "variables_info": f"task: {task}",
                    "repl_history": history,
                    "iteration": str(len(result.cells)),
                }
                last = result.cells[-1].split("\n-> ")[0] if result.cells else ""
                trace.append(
                    (
                        self.rlm.generate_action,
                        inputs,
                        dspy.Prediction(reasoning="", code=last),
                    )
                )
                trace.append(
                    (
                        self.rlm.extract,
                        {"variables_info": inputs["variables_info"], "repl_history": history},
                        dspy.Prediction(answer=answer, learned_skill_note=""),
                    )
                )
                used.update(("rlm.generate_action", "rlm.extract"))

    student = FleetTurnProgram()
    seed.update(component_texts(student))
    return student


@dataclass(slots=True)
class SearchOutcome:
    program: ProgramState
    changed: dict[str, str]
    metric_calls: int
    budget: int
    val_scores: list[float]
    best_dev: float | None
    candidates: int


def budget_for(auto: str | None, max_metric_calls: int | None, dev_size: int) -> int:
    if max_metric_calls is not None:
        return max_metric_calls
    gepa = dspy.GEPA(metric=lambda *a: 0.0, auto=auto, reflection_lm=object())
    calls: int = gepa.auto_budget(
        num_preds=len(COMPONENTS),
        num_candidates=AUTO_RUN_SETTINGS[auto or "light"]["n"],
        valset_size=max(1, dev_size),
    )
    return calls


def run_search(
    *,
    modules: Mapping[str, Any],
    rollouts: Rollouts,
    train: Sequence[OptExample],
    dev: Sequence[OptExample],
    incumbent: ProgramState,
    judge_lm: Any,
    reflection_lm: Any,
    budget: int,
    cancel: threading.Event,
    on_best: Callable[[float], None] | None = None,
    seed: int = 0,
    code_first: bool = False,
) -> SearchOutcome:
    """Blocking (a worker thread). Raises ``OptimizationCancelled`` when cancelled."""
    by_id = {e.example_id: e for e in (*train, *dev)}
    served: set[str] = set()
    student = make_student(
        modules, rollouts, by_id, incumbent, code_first=code_first, served=served
    )
    baseline = component_texts(student)

    def example(e: OptExample) -> Any:
        return (
            labels_example(e.task, e.labels)
            .copy(example_id=e.example_id)
            .with_inputs("task", "example_id")
        )

    def stopper(state: Any) -> bool:
        scores = list(getattr(state, "program_full_scores_val_set", []) or [])
        if scores and on_best is not None:
            on_best(max(scores))
        return cancel.is_set()

    optimizer = dspy.GEPA(
        metric=gepa_metric(judge_lm),
        max_metric_calls=budget,
        reflection_lm=reflection_lm,
        instruction_proposer=_Proposer(adapter=dspy.ChatAdapter(use_json_adapter_fallback=False)),
        reflection_minibatch_size=max(1, min(3, len(train))),
        candidate_selection_strategy="pareto",
        component_selector=ServedFirst(served),
        use_merge=False,
        num_threads=SEARCH_THREADS,
        track_stats=True,
        seed=seed,
        warn_on_score_mismatch=False,
        gepa_kwargs={"stop_callbacks": [stopper]},
    )
    with dspy.context(disable_history=True), quiet_progress():
        best = optimizer.compile(
            student, trainset=[example(e) for e in train], valset=[example(e) for e in dev]
        )
    if cancel.is_set():
        raise OptimizationCancelled("The optimization was cancelled")
    texts = component_texts(best)
    changed = changed_components(baseline, texts)
    details = getattr(best, "detailed_results", None)
    val_scores = [float(s) for s in (getattr(details, "val_aggregate_scores", None) or [])]
    return SearchOutcome(
        program=ProgramState(components={**incumbent.components, **changed}),
        changed=changed,
        metric_calls=rollouts.count,
        budget=budget,
        val_scores=val_scores,
        best_dev=max(val_scores) if val_scores else None,
        candidates=len(getattr(details, "candidates", None) or []),
    )


class _RootSpace:
    """The root's place in the agent tree, for building the student's modules (never run)."""

    agent_id = ROOT_AGENT
    parent_agent_id = None
    depth = 0

    def new_interpreter(self) -> Any:
        raise RuntimeError("the GEPA student's modules never run code themselves")


def student_modules(config: Any, incumbent: ProgramState) -> dict[str, Any]:
    """The root's optimizable modules as a Turn with ``config`` builds them."""
    from fleet_core.engine.control import AgentLimits, TurnControl
    from fleet_core.engine.program import TurnProgram

    runtime = config.settings.runtime
    control = TurnControl(
        max_units=runtime.max_llm_calls_per_turn,
        timeout_seconds=None,
        limits=AgentLimits(
            max_depth=runtime.max_agent_depth,
            max_children=runtime.max_child_sandboxes,
            max_live_children=runtime.max_active_children,
        ),
    )
    program = TurnProgram(
        lms=None,  # type: ignore[arg-type]
        control=control,
        root_space=_RootSpace(),  # type: ignore[arg-type]
        max_iters=runtime.max_rlm_iterations,
        overrides=incumbent.components,
    )
    modules: dict[str, Any] = program.component_modules()
    return modules
