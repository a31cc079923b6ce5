"""The code-first prompt as a GEPA component (``codefirst``): an approved program's text is the
next Turn's system prompt, and the search reflects on and updates only the components that served
a rollout (optimization/program.py, search.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dspy

from fleet_core.engine.codefirst import SYSTEM
from fleet_core.engine.scripted_lm import scripted_lm
from fleet_core.models import TurnRequest
from tests.engine.support import PROGRAM, TASK, fenced, quick_session


async def test_an_approved_codefirst_component_replaces_the_system_prompt(
    open_runtime, lms, tmp_path
) -> None:
    """``codefirst`` is a program component (GEPA may rewrite it): the Session's approved
    program's text is the code-first system prompt of its next Turn."""
    from fleet_core.optimization.program import ProgramState, active_path, atomic_write

    runtime = await open_runtime(FLEET_ENGINE_PROFILE="small")
    await quick_session(runtime, tmp_path)
    tuned = "Write one Python program. TUNED-PROMPT-7."
    program = ProgramState(components={"codefirst": tuned})
    atomic_write(active_path(tmp_path / "state", "s"), program.canonical())
    lms.root = scripted_lm([fenced(PROGRAM)])
    result = await runtime.run_turn(TurnRequest(session_id="s", task=TASK))
    assert result.status == "completed", result.error
    assert result.compiled_program_digest == program.digest()
    (request,) = lms.root.engine_script.requests
    assert request.startswith(tuned) and SYSTEM not in request


def test_gepa_reflects_on_the_codefirst_component_when_rollouts_run_the_small_profile(
    tmp_path: Path,
) -> None:
    """The GEPA student carries ``codefirst``; a flex rollout of the small profile is recorded
    for it (the program that ran and its output), and nothing is when the default profile ran."""
    from fleet_core.config import load_config
    from fleet_core.optimization.program import ProgramState
    from fleet_core.optimization.rollout import RolloutResult
    from fleet_core.optimization.search import component_texts, make_student, student_modules

    class Example:
        example_id = "e1"
        snapshot = type("Snap", (), {"task": TASK, "mode": "hybrid", "workspace_manifest": ""})

    class Rollouts:
        count = 0

        def run(self, example: Any, program: ProgramState) -> RolloutResult:
            cells = [f"{PROGRAM}\n-> region revenue"]
            return RolloutResult("answer", "flex", "completed", None, 1, 0, 1.0, cells)

    config = load_config(environ={"FLEET_STATE_DIR": str(tmp_path / "st")}, cwd=tmp_path)
    modules = student_modules(config, ProgramState())
    recorded: dict[bool, list[Any]] = {}
    served: dict[bool, set[str]] = {True: set(), False: set()}
    for code_first in (True, False):
        student = make_student(
            modules,
            Rollouts(),
            {"e1": Example()},
            ProgramState(),
            code_first=code_first,
            served=served[code_first],
        )
        assert component_texts(student)["codefirst"] == SYSTEM
        with dspy.context(trace=[]):
            student(task=TASK, example_id="e1")
            trace = list(dspy.settings.trace)
        recorded[code_first] = [e for e in trace if e[0] is student.codefirst]
    assert recorded[False] == []
    assert served == {True: {"codefirst"}, False: {"triage"}}  # no triage ran before code-first
    ((_, inputs, outputs),) = recorded[True]
    assert inputs == {"request": TASK}
    assert outputs.program.startswith(PROGRAM) and "region revenue" in outputs.program


def test_gepa_updates_only_components_that_served_a_rollout() -> None:
    """GEPA's round robin spent a real run's iteration on the RLM's action, which no code-first
    rollout used ("No valid predictions found for any module"): the search's selector takes
    turns over the components that served, and over all of them before any did."""
    from types import SimpleNamespace

    from fleet_core.optimization.program import COMPONENTS
    from fleet_core.optimization.search import ServedFirst

    state = SimpleNamespace(list_of_named_predictors=list(COMPONENTS))
    served: set[str] = set()
    select = ServedFirst(served)
    assert select(state, [], [], 0, {}) == [COMPONENTS[0]]
    served.update({"codefirst", "triage"})
    picks = [select(state, [], [], 0, {})[0] for _ in range(3)]
    assert picks == ["codefirst", "triage", "codefirst"]  # in COMPONENTS' order, taking turns
    assert select(state, [], [], 1, {}) == ["triage"]  # each candidate has its own turn
