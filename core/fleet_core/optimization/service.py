"""The optimization run: dataset -> splits -> search -> validation -> gate -> candidate.

``OptimizationService`` is built by the facade (``FleetRuntime.optimization.run``) with explicit
collaborators: the store, the Session's effective configuration, the models, a factory for the
disposable rollout runtimes, the state directory and an optional recorder for the MLflow run.
It runs in a worker thread; progress goes to ``on_progress`` (called from that thread) and
``cancel`` stops it between rollouts, leaving no candidate and no change to the active program.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from fleet_core.optimization import candidates as cands
from fleet_core.optimization import dataset as ds
from fleet_core.optimization.gate import evaluate_gate
from fleet_core.optimization.program import DEFAULT_PROGRAM, ProgramState, active_path, read_regular
from fleet_core.optimization.report import markdown, pass_means, svg_plot
from fleet_core.optimization.rollout import OpenRollout, OptimizationCancelled, Rollouts
from fleet_core.optimization.splits import split
from fleet_core.optimization.validation import PASSES, validate

if TYPE_CHECKING:
    from fleet_core.config import EffectiveConfig
    from fleet_core.store import Store

log = logging.getLogger(__name__)
Phase = Literal["dataset", "search", "validation", "saving", "done"]
Budget = Literal["light", "medium", "heavy"]


@dataclass(slots=True)
class Progress:
    phase: Phase
    done: int = 0
    total: int = 0
    best_score: float | None = None
    message: str = ""


@dataclass(slots=True)
class RunOptions:
    budget: Budget | None = "light"
    max_metric_calls: int | None = None
    seed: int = 0
    validation_ratio: float = 0.35


@dataclass(slots=True)
class RunResult:
    version: str
    gate_passed: bool
    manifest: cands.Manifest
    report_path: Path
    mlflow_run_id: str | None = None
    rollouts: int = 0
    host_seconds: float = 0.0
    notes: list[str] = field(default_factory=list)


Recorder = Callable[[cands.Manifest, str, str, dict[str, list[float]]], str | None]


def incumbent_program(state_dir: Path, session_id: str) -> ProgramState:
    data = read_regular(active_path(state_dir, session_id))
    return DEFAULT_PROGRAM if data is None else ProgramState.parse(data)


def identity(state_dir: Path, session_id: str, config: EffectiveConfig) -> cands.Identity:
    return cands.Identity(
        incumbent_digest=cands.active_digest(state_dir, session_id),
        configuration_digest=config.digest(),
        code_digest=cands.code_digest(),
        dependencies=cands.dependency_versions(),
    )


class OptimizationService:
    def __init__(
        self,
        *,
        store: Store,
        config: EffectiveConfig,
        lms: Any,
        validation_lms: Any,
        open_rollout: Callable[[Any], OpenRollout],
        state_dir: Path,
        recorder: Recorder | None = None,
    ) -> None:
        self.store = store
        self.config = config
        self.lms = lms
        self.validation_lms = validation_lms
        self.open_rollout = open_rollout
        self.state_dir = state_dir
        self.recorder = recorder

    def _runs_small_profile(self) -> bool:
        """Whether the rollouts' Turns run the small profile (its flex route is code-first)."""
        from fleet_core.engine.profile import resolve_profile

        embedded = bool(self.lms.uses_embedded("root"))
        return resolve_profile(self.config.settings.engine, embedded_root=embedded).small

    def run(
        self,
        session_id: str,
        options: RunOptions,
        *,
        on_progress: Callable[[Progress], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> RunResult:
        """Blocking: call from a worker thread."""
        from fleet_core.evaluation.judge import DspyJudge
        from fleet_core.optimization.search import budget_for, run_search, student_modules

        cancel = cancel or threading.Event()
        report = on_progress or (lambda p: None)
        report(Progress("dataset", message="collecting approved, replay-captured examples"))
        cands.sweep_staging(self.state_dir, session_id)
        dataset = ds.collect(self.store)
        ds.require_minimum(dataset)
        splits = split(dataset, seed=options.seed, validation_ratio=options.validation_ratio)
        sizes = splits.sizes()
        report(
            Progress(
                "dataset",
                1,
                1,
                message=f"train {sizes['train']}, dev {sizes['dev']}, holdout {sizes['holdout']}",
            )
        )
        before = identity(self.state_dir, session_id, self.config)
        incumbent = incumbent_program(self.state_dir, session_id)
        budget = budget_for(options.budget, options.max_metric_calls, len(splits.dev))
        state = Progress("search", 0, budget)

        def searched() -> None:
            state.done = search_rollouts.count
            report(Progress("search", state.done, budget, state.best_score))

        def best(score: float) -> None:
            state.best_score = score if state.best_score is None else max(state.best_score, score)

        search_rollouts = Rollouts(
            self.open_rollout(self.lms), self.config, cancel=cancel, on_rollout=searched
        )
        report(Progress("search", 0, budget))
        outcome = run_search(
            modules=student_modules(self.config, incumbent),
            rollouts=search_rollouts,
            train=splits.train,
            dev=splits.dev,
            incumbent=incumbent,
            judge_lm=self.lms.lm("judge"),
            reflection_lm=self.lms.lm("reflection"),
            budget=budget,
            cancel=cancel,
            on_best=best,
            seed=options.seed,
            code_first=self._runs_small_profile(),
        )
        if outcome.best_dev is not None:  # the stop hook may not have run after the last one
            best(outcome.best_dev)
        report(Progress("search", search_rollouts.count, budget, state.best_score))
        total = 2 * PASSES * (len(splits.dev) + len(splits.holdout))

        def validated() -> None:
            report(Progress("validation", checks.count, total, state.best_score))

        checks = Rollouts(
            self.open_rollout(self.validation_lms),
            self.config,
            cancel=cancel,
            on_rollout=validated,
        )
        report(Progress("validation", 0, total, state.best_score))
        observations = validate(
            baseline=incumbent,
            candidate=outcome.program,
            dev=splits.dev,
            holdout=splits.holdout,
            rollouts=checks,
            judge=DspyJudge(self.validation_lms.lm("judge")),
        )
        if cancel.is_set():
            raise OptimizationCancelled("The optimization was cancelled")
        changed = sorted(outcome.changed)
        verdict = evaluate_gate(
            observations,
            changed=changed,
            dev_ids=[e.example_id for e in splits.dev],
            holdout_ids=[e.example_id for e in splits.holdout],
        )
        report(Progress("saving", 0, 1, state.best_score, "saving the candidate and report"))
        program_bytes = outcome.program.canonical()
        manifest = cands.Manifest(
            version=cands.new_version(session_id),
            session_id=session_id,
            created_at=cands.now(),
            candidate_digest=hashlib.sha256(program_bytes).hexdigest(),
            identity=before,
            dataset={
                "digest": dataset.lineage_digest(),
                "policy": "source_group",
                "seed": splits.seed,
                "sizes": sizes,
                "groups": splits.groups(),
                "excluded": len(dataset.excluded),
            },
            search={
                "budget": budget,
                "budget_name": options.budget if options.max_metric_calls is None else None,
                "metric_calls": outcome.metric_calls,
                "candidates": outcome.candidates,
                "val_scores": outcome.val_scores,
                "best_dev": outcome.best_dev,
            },
            changed_components=changed,
            evaluation=observations,
            gate=verdict,
        )
        text = markdown(manifest, outcome.program)
        plot = svg_plot(observations)
        if cancel.is_set():
            raise OptimizationCancelled("The optimization was cancelled")
        directory = cands.save_candidate(self.state_dir, manifest, outcome.program, text, plot)
        run_id = None
        notes: list[str] = []
        if self.recorder is not None:
            try:
                run_id = self.recorder(manifest, text, plot, _series(observations))
            except Exception as exc:  # the candidate is saved; the MLflow run is a copy
                notes.append(f"the MLflow run was not recorded: {type(exc).__name__}: {exc}")
        report(Progress("done", 1, 1, state.best_score))
        return RunResult(
            version=manifest.version,
            gate_passed=verdict.passed,
            manifest=manifest,
            report_path=directory / "report.md",
            mlflow_run_id=run_id,
            rollouts=search_rollouts.count + checks.count,
            host_seconds=search_rollouts.host_seconds + checks.host_seconds,
            notes=notes,
        )


def _series(observations: Any) -> dict[str, list[float]]:
    return {
        f"{stage}_{split}": values for (stage, split), values in pass_means(observations).items()
    }
