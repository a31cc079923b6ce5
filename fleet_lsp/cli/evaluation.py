"""``fleet-lsp eval label | dataset | run``: the command-line side of ``fleet_core.evaluation``.

- ``label``: ``FleetRuntime.traces.label`` through :class:`fleet_lsp.traces.TraceService`
  (MLflow expectations on the trace and the store's row; partial updates keep earlier fields).
- ``dataset``: ``build_dataset(seed)`` written with ``write_dataset``.
- ``run``: ``FleetRuntime.evaluation.run``: every case as a fresh Session and Turn with the
  configured models (the judge role scores answers), ``fleet_metric`` plus the trace-based
  suite, one MLflow run in the evaluation experiment; a rich progress bar while it runs and a
  summary table at the end.

Errors are one line on stderr; exit codes as in :mod:`fleet_lsp.cli.support` (2: something to fix
first, e.g. no model configured; 1: a failure).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape

if TYPE_CHECKING:
    from fleet_core.api import FleetRuntime, TracingStatus
    from fleet_core.api.evaluation import LabelResult
    from fleet_core.config import EffectiveConfig
    from fleet_core.evaluation.datasets import EvalCase
    from fleet_core.evaluation.runner import CaseOutcome, EvalReport


# label -----------------------------------------------------------------------------------------


def label_command(
    trace_id: str,
    *,
    answer: str | None,
    values: Sequence[str] | None,
    route: str | None,
    critical: bool | None,
    group: str | None,
    status: str | None,
    expectations_file: str | None,
    reviewer: str | None,
    as_json: bool,
) -> None:
    from fleet_core.errors import FleetError
    from fleet_lsp.cli.support import fail, with_runtime
    from fleet_lsp.traces import TraceService, label_result_wire, label_update

    try:
        expectations = None
        if expectations_file is not None:
            from fleet_core.api.evaluation import load_expectations_file

            expectations = load_expectations_file(Path(expectations_file).expanduser())
        update = label_update(
            status=status,
            answer=answer,
            values=values,
            route=route,
            critical=critical,
            group=group,
            expectations=expectations,
            reviewer=reviewer,
        )
    except FleetError as exc:
        raise fail(exc) from None

    async def go(runtime: FleetRuntime) -> LabelResult:
        return await TraceService().label(runtime, trace_id, update)

    result: LabelResult = with_runtime(go)
    if as_json:
        typer.echo(json.dumps(label_result_wire(result), indent=2))
        return
    _print_label(result)


def _print_label(result: LabelResult) -> None:
    labels = result.labels
    where = ", ".join(
        part
        for part in (
            f"Turn {result.turn_id}" if result.turn_id else "",
            f"Session {result.session_id}" if result.session_id else "",
        )
        if part
    )
    typer.echo(f"labelled {result.trace_id}" + (f" ({where})" if where else ""))
    typer.echo(
        f"  status {labels.review_status} · group {labels.source_group} · route "
        f"{labels.route or 'any'} · critical {'yes' if labels.critical else 'no'} · "
        f"reviewer {labels.reviewer}"
    )
    if labels.expected_answer:
        typer.echo(f"  answer: {' '.join(labels.expected_answer.split())[:200]}")
    if labels.expected_values:
        typer.echo(f"  values: {', '.join(labels.expected_values)}")
    if labels.structured_expectations is not None:
        exp = labels.structured_expectations
        typer.echo(
            f"  expectations: {len(exp.artifacts)} artifact(s), {len(exp.children)} child(ren)"
        )
    if result.eligible:
        typer.echo("  optimization: eligible")
    else:
        typer.echo(f"  optimization: not eligible: {result.ineligible_reason}")
    typer.echo("  written to MLflow (expectations on the trace) and the store")


# dataset ---------------------------------------------------------------------------------------


def dataset_command(*, seed: int, out: str | None, per_kind: int, long_context: bool) -> None:
    from fleet_core.api.evaluation import build_dataset, write_dataset
    from fleet_core.errors import FleetError
    from fleet_lsp.cli.support import fail

    if out is None:
        from fleet_core.config import load_config

        try:
            target = load_config().state_dir / "eval" / f"dataset-{seed}.json"
        except FleetError as exc:
            raise fail(exc) from None
    else:
        target = Path(out).expanduser()
    cases = build_dataset(seed=seed, per_kind=per_kind, long_context=long_context)
    try:
        write_dataset(cases, target)
    except OSError as exc:
        typer.echo(f"error (InvalidInput): cannot write {target}: {exc.strerror}", err=True)
        raise typer.Exit(2) from None
    from rich.console import Console
    from rich.table import Table

    table = Table("case", "category", "files", "gold values", "route", title=f"seed {seed}")
    for case in cases:
        cells = (
            case.case_id,
            case.category,
            str(len(case.files)),
            ", ".join(case.labels.expected_values),
            case.labels.route or "any",
        )
        table.add_row(*(escape(cell) for cell in cells))
    console = Console()
    console.print(table)
    console.print(f"wrote {len(cases)} cases to {target}", markup=False)
    console.print(f"run them: fleet-lsp eval run --dataset {target}", markup=False)


# run -------------------------------------------------------------------------------------------


def _load_cases(
    dataset: str | None, seed: int, wanted: Sequence[str] | None, limit: int | None
) -> list[EvalCase]:
    from fleet_core.api.evaluation import build_dataset, read_dataset
    from fleet_core.errors import InvalidInput

    if dataset is None:
        cases = build_dataset(seed=seed)
    else:
        path = Path(dataset).expanduser()
        try:
            cases = read_dataset(path)
        except FileNotFoundError:
            raise InvalidInput(
                f"No dataset file {path}; build one with: fleet-lsp eval dataset --out {path}"
            ) from None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise InvalidInput(f"{path} is not a fleet-lsp eval dataset: {exc}") from None
    if wanted:
        known = {c.case_id for c in cases}
        unknown = [w for w in wanted if w not in known]
        if unknown:
            raise InvalidInput(
                f"No case {', '.join(unknown)} in the dataset; it has: {', '.join(sorted(known))}"
            )
        cases = [c for c in cases if c.case_id in set(wanted)]
    cases = cases[:limit] if limit else cases
    if not cases:
        raise InvalidInput("The dataset has no cases to run")
    return cases


def run_command(
    *,
    dataset: str | None,
    seed: int,
    limit: int | None,
    cases: Sequence[str] | None,
    as_json: bool,
    labelled: bool = False,
) -> int:
    import asyncio

    from rich.console import Console

    from fleet_core.config import load_config
    from fleet_core.errors import FleetError, InvalidInput
    from fleet_lsp.cli.support import fail, provider_from_test_hook

    err = Console(stderr=True)
    try:
        config = load_config()
        if labelled and dataset is not None:
            raise InvalidInput("Give either --dataset or --labelled, not both")
        selected = None if labelled else _load_cases(dataset, seed, cases, limit)
        # scripted models (test hook), else the configured ones
        provider = provider_from_test_hook()
    except FleetError as exc:
        raise fail(exc) from None
    if provider is None and (problem := _model_problem(config)):
        err.print("[bold red]No model is configured for evaluation.[/bold red]")
        err.print(escape(problem))
        err.print(
            "eval run uses the root and sub roles for Turns and the judge role "
            "(FLEET_LM_JUDGE_MODEL, default: the same model) to score answers; "
            "fleet-lsp doctor checks the endpoints."
        )
        return 2
    try:
        report, tracing = asyncio.run(_run_cases(config, provider, selected, err, (cases, limit)))
    except FleetError as exc:
        raise fail(exc) from None
    if as_json:
        typer.echo(json.dumps(report_wire(report), indent=2, default=str))
    else:
        _print_report(report, config, tracing)
    return 0


def _model_problem(config: EffectiveConfig) -> str | None:
    """What to set when the root, sub or judge role has no model (no network: not probed)."""
    from fleet_core.api import diagnostics

    for check in diagnostics.check_models(config, ("root", "sub", "judge"), probe=False):
        if not check.configured:
            return check.problem
    return None


async def _run_cases(
    config: EffectiveConfig,
    provider: Any,
    cases: list[EvalCase] | None,
    err: Any,
    selection: tuple[Sequence[str] | None, int | None] = (None, None),
) -> tuple[EvalReport, TracingStatus]:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    from fleet_core.api import FleetRuntime

    runtime = await FleetRuntime.open_evaluation(config, lm_provider=provider)
    try:
        tracing = runtime.traces.status()
        if not tracing.enabled:
            err.print(
                "[yellow]The cases run and are scored, but no MLflow evaluation run is "
                f"recorded: {escape(tracing.reason or 'tracing is off')}[/yellow]"
            )
        if cases is None:  # --labelled: the store's reviewed traces
            cases = await _select_labelled(runtime, err, *selection)
        progress = Progress(
            SpinnerColumn(),
            TextColumn("[bold]eval[/bold] {task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err,
            transient=False,
        )
        with progress:
            bar = progress.add_task(escape(cases[0].case_id), total=len(cases))
            ids = [c.case_id for c in cases]

            def on_case(outcome: CaseOutcome) -> None:
                done = ids.index(outcome.case_id) + 1
                upcoming = ids[done] if done < len(ids) else "done"
                progress.update(bar, advance=1, description=escape(upcoming))
                mark = "[green]✓[/green]" if outcome.metric.score > 0 else "[red]✗[/red]"
                progress.console.print(
                    f"{mark} {escape(outcome.case_id)}: {escape(outcome.result.status)}, "
                    f"fleet_metric {outcome.metric.score:.3f}"
                )

            report = await runtime.evaluation.run(cases, on_case=on_case)
        return report, tracing
    finally:
        await runtime.close()


async def _select_labelled(
    runtime: FleetRuntime, err: Any, wanted: Sequence[str] | None, limit: int | None
) -> list[EvalCase]:
    from fleet_core.errors import InvalidInput

    found, skipped = await runtime.evaluation.labelled_cases()
    for reason in skipped:
        err.print(f"[yellow]skipped[/yellow] {escape(reason)}")
    if wanted:
        found = [c for c in found if c.case_id in set(wanted)]
    found = found[:limit] if limit else found
    if not found:
        raise InvalidInput(
            "No labelled trace can be run: label replay-captured Turns first "
            "(fleet-lsp turn --record-replay ..., then fleet-lsp eval label TRACE_ID ...)"
        )
    return found


def report_wire(report: EvalReport) -> dict[str, Any]:
    return {
        "runId": report.run_id,
        "metrics": report.metrics(),
        "cases": [o.row() for o in report.outcomes],
    }


SUITE_COLUMNS = (
    ("relevance", "relevance"),
    ("sandbox_verification", "sandbox"),
    ("skill_use", "skills"),
    ("retrieval_groundedness", "grounded"),
    ("trace_efficiency", "efficiency"),
)


def _suite_cell(outcome: CaseOutcome, key: str) -> str:
    value = outcome.suite.get(key)
    if value is not None:
        return f"{value:.3f}"
    return "error" if key in outcome.suite_errors else "n/a"


def _print_report(report: EvalReport, config: EffectiveConfig, tracing: TracingStatus) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table("case", "status", "route", "fleet_metric", "failed checks", title="fleet_metric")
    suite = Table(
        "case",
        *(title for _, title in SUITE_COLUMNS),
        title="suite (n/a: not applicable)",
    )
    for outcome in report.outcomes:
        failed = [
            line.split(":")[0].removeprefix("FAIL ")
            for line in outcome.metric.feedback.splitlines()
            if line.startswith("FAIL")
        ]
        cells = (
            outcome.case_id,
            outcome.result.status,
            outcome.result.route or "—",
            f"{outcome.metric.score:.3f}",
            ", ".join(failed) or "—",
        )
        table.add_row(*(escape(cell) for cell in cells))
        suite.add_row(
            escape(outcome.case_id), *(_suite_cell(outcome, key) for key, _ in SUITE_COLUMNS)
        )
    console.print(table)
    console.print(suite)
    metrics = Table("metric", "mean", title="summary")
    means = report.metrics()
    for key, value in sorted(means.items()):
        metrics.add_row(key, f"{value:.4f}")
    for key, _ in SUITE_COLUMNS:
        if key not in means:
            metrics.add_row(key, "n/a")
    console.print(metrics)
    for outcome in report.outcomes:
        for key, note in outcome.suite_errors.items():
            console.print(
                f"[yellow]suite error[/yellow] {escape(outcome.case_id)} {escape(key)}: "
                f"{escape(note)}"
            )
    if report.run_id:
        experiment = escape(tracing.experiment or "")
        console.print(f"MLflow run {escape(str(report.run_id))} in experiment '{experiment}'")
        if config.settings.mlflow.destination == "local":
            console.print("see it: fleet-lsp mlflow ui")
