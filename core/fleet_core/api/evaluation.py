"""``FleetRuntime.evaluation``: labelled Turns as cases and ``eval run`` (docs/evaluation.md)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from fleet_core.api.host import RuntimeHost
from fleet_core.api.threads import in_thread
from fleet_core.evaluation.datasets import build_dataset, read_dataset, write_dataset
from fleet_core.evaluation.labels import (
    LabelResult,
    LabelUpdate,
    load_expectations_file,
    parse_expectations,
)

__all__ = [
    "Evaluation",
    "LabelResult",
    "LabelUpdate",
    "build_dataset",
    "load_expectations_file",
    "parse_expectations",
    "read_dataset",
    "write_dataset",
]

if TYPE_CHECKING:
    from fleet_core.evaluation.datasets import EvalCase
    from fleet_core.evaluation.runner import CaseOutcome, EvalReport


class Evaluation:
    """Evaluation over one runtime (its store, models and tracer)."""

    def __init__(self, runtime: RuntimeHost) -> None:
        self._runtime = runtime

    async def labelled_cases(self) -> tuple[list[EvalCase], list[str]]:
        """Evaluation cases from labelled (not rejected), replay-captured Turns, and a reason for
        every labelled trace that cannot be one."""
        from fleet_core.evaluation.datasets import labelled_cases

        return await in_thread(labelled_cases, self._runtime.store)

    async def run(
        self,
        cases: Sequence[EvalCase],
        *,
        run_name: str | None = None,
        on_case: Callable[[CaseOutcome], None] | None = None,
    ) -> EvalReport:
        """Run every case as a fresh Session and Turn, score it (``fleet_metric``, the suite,
        the judge role) and, when tracing is on, record one MLflow run; ``ModelUnavailable``
        first when the root, sub or judge role has no model."""
        from fleet_core.evaluation.judge import DspyJudge
        from fleet_core.evaluation.runner import run_eval

        lms = self._runtime.models()
        lms.check("root", "sub", "judge")
        tracer: Any = self._runtime.tracer
        backend = tracer.backend if getattr(tracer, "enabled", False) else None
        return await run_eval(
            self._runtime,
            cases,
            judge=DspyJudge(lms.lm("judge")),
            backend=backend,
            run_name=run_name,
            on_case=on_case,
            store=self._runtime.store,
        )
