"""The small-model profile's code routes (engine/profile.py; docs/engine.md).

``flex`` is code-first Flex (engine/codefirst.py); ``rlm`` is ``CompletingRLM``
(engine/completion.py) on compact inputs with its action output capped. ``TurnProgram`` calls
:func:`small_code_route` for both when its profile is ``small``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from fleet_core.engine.codefirst import CodeFirst
from fleet_core.engine.completion import SMALL_ACTION_INSTRUCTIONS, CompletingRLM
from fleet_core.engine.context import TurnInputs
from fleet_core.engine.dataset import DatasetHandle
from fleet_core.engine.metering import MeteredLM
from fleet_core.engine.profile import (
    compact_catalog,
    compact_history,
    compact_manifest,
    named_artifacts,
)
from fleet_core.engine.signatures import FleetTask
from fleet_core.outcomes import RouteAnswer

RLM_OUTPUT_CHARS = 2_000  # one cell's output in the small profile's REPL history


def compact_inputs(inputs: TurnInputs) -> TurnInputs:
    """The inputs as a small model sees them: the workspace as names and sizes (the dataset's
    first lines only), the Skills as names and one-line descriptions, a short history."""
    path = inputs.dataset.path if inputs.dataset is not None else None
    return dataclasses.replace(
        inputs,
        workspace_manifest=compact_manifest(inputs.workspace_manifest, dataset_path=path),
        skills_catalog=compact_catalog(inputs.skills_catalog),
        session_history=compact_history(inputs.session_history),
    )


def small_code_route(program: Any, inputs: TurnInputs, route: str) -> RouteAnswer:
    """Run ``route`` (flex or rlm) the small profile's way for ``program`` (a ``TurnProgram``:
    not imported, the program imports this module)."""
    control = program.control
    space = program.root_space
    profile = program.profile
    if route == "flex":
        root_lm = MeteredLM(program.lms.lm("root"), control, category="generation")
        result = CodeFirst(
            lm=root_lm,
            control=control,
            interpreter=program._factory(space),
            profile=profile,
            system=program.overrides.get("codefirst"),
        ).run(inputs)
        control.check()
        if result.fallback:
            return RouteAnswer(result.answer, reached="fallback", detail=result.fallback)
        return RouteAnswer(result.answer)
    compact = compact_inputs(inputs)
    sub_lm = MeteredLM(program.lms.lm("sub"), control, category="sub_query")
    handle = DatasetHandle(inputs.dataset) if inputs.dataset else None
    payloads = [handle.to_sandbox().decode()] if handle is not None else []
    factory = program._factory(space, payloads)
    rlm = CompletingRLM(
        FleetTask,
        targets=named_artifacts(inputs.task),
        max_tokens=profile.max_tokens,
        max_iters=program.max_iters,
        max_llm_calls=control.max_units,
        max_output_chars=RLM_OUTPUT_CHARS,
        tools=program._tools_for(space),
        sub_lm=sub_lm,
        interpreter_factory=factory,
    )
    for name, default in (("generate_action", SMALL_ACTION_INSTRUCTIONS), ("extract", None)):
        text = program.overrides.get(f"rlm.{name}") or default
        if text:
            predictor = getattr(rlm, name)
            predictor.signature = predictor.signature.with_instructions(text)
    # code only: no reasoning field (a small model's reasoning cost 150-330 tokens a step)
    rlm.generate_action.signature = rlm.generate_action.signature.delete("reasoning")
    prediction = rlm(
        workspace_manifest=compact.workspace_manifest,
        skills_catalog=compact.skills_catalog,
        memory_summary=compact.memory_summary,
        session_history=compact.session_history,
        execution_route=route,
        task=compact.task,
        context=handle if handle is not None else "",
    )
    control.check()
    return RouteAnswer.of(prediction)
