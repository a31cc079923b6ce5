"""``fleet-lsp optimize``: the command-line side of ``FleetRuntime.optimization.run``,
``optimization_status`` and ``approve_candidate`` (docs/optimization.md).

- a run: a rich progress bar per phase (dataset, search, validation passes) with rollouts done
  and the best score so far on stderr, then the candidate's gate verdict and what to do next;
  Ctrl-C stops the run between rollouts (no candidate, the active program unchanged).
- ``--approve VERSION``: the same checks as ``fleet/optimize/approve``.
- ``--status``: the Session's candidates, their gate verdicts and the active version.

``--json`` prints one JSON object on stdout (the protocol's result shapes). Errors are one line
on stderr; exit codes as in :mod:`fleet_lsp.cli.support` (2: something to fix first, e.g. too few
examples or stale evidence; 1: a failure; 130: interrupted).
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape

from fleet_lsp.protocol import CandidateWire, candidate_wire, gate_wire

if TYPE_CHECKING:
    from fleet_core.api import CandidateInfo, FleetRuntime, OptimizationProgress

PHASES = {"dataset": "dataset", "search": "search", "validation": "validation passes"}
COST_NOTE = (
    "The budget bounds the search only: final validation alone runs 6 × (dev + holdout) Turn "
    "replays. Passing the gate is not proof of general improvement."
)


def _candidate(session_id: str, c: CandidateInfo) -> CandidateWire:
    from fleet_lsp.documents import optimization_report_uri

    return candidate_wire(c, optimization_report_uri(session_id, c.version))


class PhaseBars:
    """One bar per phase, fed by the facade's ``OptimizationProgress`` records (event loop)."""

    def __init__(self, console: Any) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self.progress = Progress(
            TextColumn("{task.description:<17}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[unit]}"),
            TextColumn("{task.fields[best]}"),
            TimeElapsedColumn(),
            console=console,
            transient=False,
        )
        self.tasks: dict[str, Any] = {}
        self.current: str | None = None

    def __enter__(self) -> PhaseBars:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(None, None, None)

    def on_progress(self, record: OptimizationProgress) -> None:
        phase = record.phase
        if phase not in PHASES:
            if phase == "saving" and self.current is not None:
                self.progress.console.print("saving the candidate and its report")
            return
        best = f"best {record.best_score:.3f}" if record.best_score is not None else ""
        unit = {"search": "rollouts", "validation": "replays"}.get(phase, "")
        if phase not in self.tasks:
            self.tasks[phase] = self.progress.add_task(
                PHASES[phase], total=max(record.total, 1), unit=unit, best=best
            )
        self.current = phase
        self.progress.update(
            self.tasks[phase],
            completed=record.done,
            total=max(record.total, 1),
            best=best,
        )
        if phase == "dataset" and record.message and record.done:
            self.progress.console.print(f"dataset: {escape(record.message)}")


def run_command(
    session: str,
    *,
    budget: str | None,
    max_metric_calls: int | None,
    seed: int,
    as_json: bool,
) -> int:
    from rich.console import Console

    from fleet_lsp.cli.support import with_runtime

    err = Console(stderr=True)
    if not as_json:
        err.print(escape(COST_NOTE))
    # the bars below are the display: DSPy's INFO log would interleave (the search draws no
    # tqdm bars: fleet_core.optimization.search.quiet_progress)
    logging.getLogger("dspy").setLevel(logging.WARNING)

    async def go(runtime: FleetRuntime) -> dict[str, Any]:
        with PhaseBars(err) as bars:
            run = await runtime.optimization.run(
                session,
                budget=budget if max_metric_calls is None else None,
                max_metric_calls=max_metric_calls,
                seed=seed,
                on_progress=bars.on_progress,
            )
        return {
            "sessionId": session,
            "version": run.version,
            "gatePassed": run.gate_passed,
            "gate": gate_wire(run.gate),
            "changedComponents": list(run.changed_components),
            "candidateDigest": run.candidate_digest,
            "reportPath": str(run.report_path),
            "rollouts": run.rollouts,
            "hostSeconds": round(run.host_seconds, 3),
            "datasetSizes": dict(run.dataset_sizes),
            "mlflowRunId": run.mlflow_run_id,
            "notes": list(run.notes),
        }

    try:
        result = with_runtime(go)
    except KeyboardInterrupt:
        err.print("cancelled: no candidate was saved and the active program is unchanged")
        return 130
    if as_json:
        typer.echo(json.dumps(result, indent=2))
        return 0
    _print_run(result)
    return 0


def _gate_table(gate: list[dict[str, Any]]) -> Any:
    from rich.table import Table

    table = Table("check", "passed", "detail")
    for check in gate:
        mark = "[green]yes[/green]" if check["passed"] else "[red]no[/red]"
        table.add_row(escape(check["name"]), mark, escape(check["detail"]))
    return table


def _print_run(result: dict[str, Any]) -> None:
    from rich.console import Console

    console = Console()
    sizes = ", ".join(f"{k} {v}" for k, v in result["datasetSizes"].items())
    per = result["hostSeconds"] / result["rollouts"] if result["rollouts"] else 0.0
    console.print(f"candidate {escape(result['version'])} (saved inactive)")
    console.print(f"digest {escape(result['candidateDigest'])}", markup=False)
    changed = ", ".join(result["changedComponents"]) or "none"
    console.print(f"changed components: {changed}", markup=False)
    console.print(f"dataset: {sizes}", markup=False)
    console.print(
        f"rollouts: {result['rollouts']} ({result['hostSeconds']:.1f} s, {per:.2f} s each)",
        markup=False,
    )
    console.print(_gate_table(result["gate"]))
    for note in result["notes"]:
        console.print(f"note: {note}", markup=False)
    console.print(f"report: {result['reportPath']}", markup=False)
    if result["gatePassed"]:
        console.print(
            "The gate passed. Review the report, then approve: fleet-lsp optimize "
            f"--session {result['sessionId']} --approve {result['version']}",
            markup=False,
        )
    else:
        console.print("The gate did not pass: this candidate cannot be approved.", style="yellow")


def approve_command(session: str, version: str, *, as_json: bool) -> int:
    from rich.console import Console

    from fleet_lsp.cli.support import with_runtime

    async def go(runtime: FleetRuntime) -> CandidateWire:
        return _candidate(session, await runtime.optimization.approve(session, version))

    result = with_runtime(go)
    if as_json:
        typer.echo(json.dumps(result, indent=2))
        return 0
    Console().print(
        f"approved {result['version']} (digest {result['candidateDigest']}); the next Turn "
        f"of {session} serves it",
        markup=False,
    )
    return 0


def status_command(session: str, *, as_json: bool) -> int:
    from rich.console import Console
    from rich.table import Table

    from fleet_lsp.cli.support import with_runtime

    async def go(runtime: FleetRuntime) -> dict[str, Any]:
        found = await runtime.optimization.status(session)
        return {
            "sessionId": found.session_id,
            "activeDigest": found.active_digest,
            "activeVersion": found.active_version,
            "candidates": [_candidate(session, c) for c in found.candidates],
        }

    result = with_runtime(go)
    if as_json:
        typer.echo(json.dumps(result, indent=2))
        return 0
    console = Console()
    active = result["activeVersion"] or "the built-in default program"
    console.print(f"active: {active} (digest {result['activeDigest']})", markup=False)
    if not result["candidates"]:
        console.print(
            f"No candidates yet. Run: fleet-lsp optimize --session {session}", markup=False
        )
        return 0
    table = Table("version", "created", "gate", "changed", "active")
    for c in result["candidates"]:
        failed = [g["name"] for g in c["gate"] if not g["passed"]]
        gate = "[green]passed[/green]"
        if not c["gatePassed"]:
            gate = f"[red]failed[/red] {escape(', '.join(failed))}"
        table.add_row(
            escape(c["version"]),
            escape(c["createdAt"]),
            gate,
            escape(", ".join(c["changedComponents"]) or "none"),
            "yes" if c["active"] else "",
        )
    console.print(table)
    return 0
