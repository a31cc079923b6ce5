"""``fleet-lsp optimize``: run, ``--status``, ``--approve``; :mod:`fleet_lsp.cli.optimize`
does the work."""

from __future__ import annotations

from typing import Annotated

import typer


def optimize(
    session: Annotated[str, typer.Option("--session", "-s", help="The Session to optimize.")],
    gepa_budget: Annotated[
        str | None,
        typer.Option(
            "--gepa-budget",
            metavar="light|medium|heavy",
            help="GEPA's search budget (default light). It bounds the search's rollouts only: "
            "reflection, judging and the final validation (6 x (dev + holdout) replays) come "
            "on top.",
        ),
    ] = None,
    max_metric_calls: Annotated[
        int | None,
        typer.Option(
            "--max-metric-calls",
            min=1,
            max=100_000,
            help="Instead of --gepa-budget: at most N search rollouts (the search only).",
        ),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", min=0, help="Seed of splits and search.")] = 0,
    approve: Annotated[
        str | None,
        typer.Option(
            "--approve",
            metavar="VERSION",
            help="Approve a candidate (re-checks the gate and its evidence); the next Turn "
            "serves it.",
        ),
    ] = None,
    status: Annotated[
        bool,
        typer.Option("--status", help="List candidates, gate verdicts and the active version."),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Optimize a Session's Turn program with GEPA on approved, replay-captured labels; review
    the candidate's report, then approve it (docs/optimization.md)."""
    from fleet_lsp.cli import optimize as opt

    chosen = [name for name, on in (("--approve", approve), ("--status", status)) if on]
    run_flags = [
        name
        for name, value in (
            ("--gepa-budget", gepa_budget),
            ("--max-metric-calls", max_metric_calls),
        )
        if value is not None
    ]
    if len(chosen) > 1 or (chosen and run_flags):
        raise typer.BadParameter(f"{' and '.join(chosen + run_flags)} do not go together")
    if len(run_flags) > 1:
        raise typer.BadParameter("give either --gepa-budget or --max-metric-calls, not both")
    if gepa_budget is not None and gepa_budget not in ("light", "medium", "heavy"):
        raise typer.BadParameter("use light, medium or heavy", param_hint="--gepa-budget")
    if approve is not None:
        raise typer.Exit(opt.approve_command(session, approve, as_json=as_json))
    if status:
        raise typer.Exit(opt.status_command(session, as_json=as_json))
    raise typer.Exit(
        opt.run_command(
            session,
            budget=gepa_budget or "light",
            max_metric_calls=max_metric_calls,
            seed=seed,
            as_json=as_json,
        )
    )
