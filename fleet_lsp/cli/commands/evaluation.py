"""``fleet-lsp eval label|dataset|run``; :mod:`fleet_lsp.cli.evaluation` does the work."""

from __future__ import annotations

from typing import Annotated

import typer

from fleet_core.modes import ROUTES

eval_app = typer.Typer(
    help="Evaluation: label traces, build a synthetic dataset, run fleet_metric.",
    no_args_is_help=True,
)


@eval_app.command("label")
def eval_label(
    trace_id: Annotated[str, typer.Argument(help="Trace id (or the Turn id of a traced Turn).")],
    answer: Annotated[
        str | None, typer.Option("--answer", help="The expected (gold) answer.")
    ] = None,
    value: Annotated[
        list[str] | None,
        typer.Option("--value", help="A value the answer must contain (repeatable)."),
    ] = None,
    route: Annotated[
        str | None, typer.Option("--route", help=f"Required route: {' | '.join(ROUTES)}.")
    ] = None,
    critical: Annotated[
        bool | None,
        typer.Option("--critical/--not-critical", help="Values are hard requirements."),
    ] = None,
    group: Annotated[
        str | None, typer.Option("--group", help="Source group (default: the Session id).")
    ] = None,
    status: Annotated[
        str | None,
        typer.Option("--status", help="approved | benchmark | synthetic | rejected."),
    ] = None,
    expectations_file: Annotated[
        str | None,
        typer.Option(
            "--expectations-file", metavar="FILE", help="Structured expectations (JSON, schema 1)."
        ),
    ] = None,
    reviewer: Annotated[str | None, typer.Option("--reviewer", help="Who reviewed it.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Label a trace (MLflow expectations + the store). Fields not given keep earlier values."""
    from fleet_lsp.cli.evaluation import label_command

    label_command(
        trace_id,
        answer=answer,
        values=value,
        route=route,
        critical=critical,
        group=group,
        status=status,
        expectations_file=expectations_file,
        reviewer=reviewer,
        as_json=as_json,
    )


@eval_app.command("dataset")
def eval_dataset(
    seed: Annotated[int, typer.Option("--seed", help="Random seed (same seed, same data).")] = 7,
    out: Annotated[
        str | None,
        typer.Option("--out", help="Where to write it (default <state>/eval/dataset-<seed>.json)."),
    ] = None,
    per_kind: Annotated[
        int, typer.Option("--per-kind", min=1, max=50, help="Cases per CSV kind.")
    ] = 2,
    long_context: Annotated[
        bool, typer.Option("--long-context/--no-long-context", help="Include a long log case.")
    ] = True,
) -> None:
    """Build a seeded synthetic dataset whose gold values are computed from its files."""
    from fleet_lsp.cli.evaluation import dataset_command

    dataset_command(seed=seed, out=out, per_kind=per_kind, long_context=long_context)


@eval_app.command("run")
def eval_run(
    dataset: Annotated[
        str | None,
        typer.Option("--dataset", help="A dataset file (default: the seeded synthetic one)."),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the default dataset.")] = 7,
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="Run the first N.")] = None,
    case: Annotated[
        list[str] | None, typer.Option("--case", help="Run only this case id (repeatable).")
    ] = None,
    labelled: Annotated[
        bool,
        typer.Option(
            "--labelled",
            help="Run the store's labelled, replay-captured traces instead of a dataset.",
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Run labelled cases as fresh Turns, score fleet_metric, record an MLflow evaluation run."""
    from fleet_lsp.cli.evaluation import run_command

    raise typer.Exit(
        run_command(
            dataset=dataset,
            seed=seed,
            limit=limit,
            cases=case,
            labelled=labelled,
            as_json=as_json,
        )
    )
