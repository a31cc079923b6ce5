"""A Session's execution mode and a Turn's route, each defined once: a ``Literal`` and its values
in order. A leaf of the standard library alone, so a face can name them (``--mode`` help, the
protocol's types) without loading pydantic."""

from __future__ import annotations

from typing import Literal, get_args

# how a Session runs its Turns: triage picks the route (hybrid), or always rlm, or always flex
ExecutionMode = Literal["hybrid", "rlm", "flex"]
EXECUTION_MODES: tuple[ExecutionMode, ...] = get_args(ExecutionMode)

# the program that served a Turn (triage's choice, or the mode's)
Route = Literal["direct", "flex", "rlm"]
ROUTES: tuple[Route, ...] = get_args(Route)

# how a reviewer labelled a trace for evaluation (docs/evaluation.md): only approved and
# benchmark labels become examples; rejected ones never do
ReviewStatus = Literal["approved", "benchmark", "synthetic", "rejected"]
REVIEW_STATUSES: tuple[ReviewStatus, ...] = get_args(ReviewStatus)
