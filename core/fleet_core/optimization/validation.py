"""Validation passes: baseline and candidate, three passes each on dev + holdout.

Order alternates per pass (B,C / C,B / B,C); serving response caches are off (the facade gives
the rollouts cache-free models); a rollout that fails scores 0 and counts as an error. In all
``6 * (dev + holdout)`` Turn replays. Every rollout becomes one stored ``Observation``; the gate
is computed from these alone.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from fleet_core.evaluation.metric import Judge, TurnObservation, fleet_metric
from fleet_core.optimization.dataset import OptExample
from fleet_core.optimization.program import ProgramState
from fleet_core.optimization.rollout import Rollouts

PASSES = 3
Stage = Literal["baseline", "candidate"]
Split = Literal["dev", "holdout"]


class Observation(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    stage: Stage
    pass_index: int
    split: Split
    example_id: str
    critical: bool
    score: float
    quality: float
    usage_available: float
    error: bool
    feedback: str = ""


def observe(
    stage: Stage,
    pass_index: int,
    split: Split,
    example: OptExample,
    program: ProgramState,
    rollouts: Rollouts,
    judge: Judge,
) -> Observation:
    result = rollouts.run(example, program)
    if result.failed:
        score = quality = 0.0
        usage = result.model_calls is not None
        feedback = result.error or result.status
    else:
        observation = TurnObservation(
            task=example.task,
            answer=result.answer,
            route=result.route,
            model_calls=result.model_calls,
            sandbox_errors=result.sandbox_errors,
            outcome=result.outcome,
        )
        metric = fleet_metric(example.labels, observation, judge)
        score = metric.score if math.isfinite(metric.score) else float("nan")
        quality, usage, feedback = float(metric.quality), metric.usage_available, metric.feedback
    return Observation(
        stage=stage,
        pass_index=pass_index,
        split=split,
        example_id=example.example_id,
        critical=example.critical,
        score=score,
        quality=quality,
        usage_available=1.0 if usage else 0.0,
        error=result.failed,
        feedback=feedback[:1_000],
    )


def validate(
    *,
    baseline: ProgramState,
    candidate: ProgramState,
    dev: Sequence[OptExample],
    holdout: Sequence[OptExample],
    rollouts: Rollouts,
    judge: Judge,
    on_pass: Callable[[int], Any] | None = None,
    passes: int = PASSES,
) -> list[Observation]:
    """Blocking (a worker thread)."""
    observations: list[Observation] = []
    programs: dict[Stage, ProgramState] = {"baseline": baseline, "candidate": candidate}
    for index in range(passes):
        order: list[Stage] = ["baseline", "candidate"]
        if index % 2 == 1:
            order.reverse()
        for stage in order:
            for split, examples in (("dev", dev), ("holdout", holdout)):
                for example in examples:
                    observations.append(
                        observe(
                            stage,
                            index,
                            split,  # type: ignore[arg-type]
                            example,
                            programs[stage],
                            rollouts,
                            judge,
                        )
                    )
        if on_pass is not None:
            on_pass(index + 1)
    return observations
