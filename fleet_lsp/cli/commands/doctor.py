"""``fleet-lsp doctor``; the checks are :mod:`fleet_lsp.cli.doctor`'s."""

from __future__ import annotations

import json
from typing import Annotated

import typer


def doctor(
    as_json: Annotated[
        bool, typer.Option("--json", help="Print {ok, checks: [{name, status, detail, fix}]}.")
    ] = False,
) -> None:
    """Check the database, sandbox isolation, MLflow store and model endpoints; say what to fix.

    Exit code 0 when every required check passed, 1 otherwise."""
    from dataclasses import asdict

    from fleet_lsp.cli.doctor import run_checks

    checks = run_checks()
    if as_json:
        ok = all(check.status != "fail" for check in checks)
        report = {"ok": ok, "checks": [asdict(check) for check in checks]}
        typer.echo(json.dumps(report, indent=2))
        raise typer.Exit(0 if ok else 1)
    from rich.console import Console
    from rich.markup import escape

    console = Console()
    failed = 0
    styles = {"ok": ("ok", "green"), "warn": ("warn", "yellow"), "fail": ("FAIL", "red")}
    for check in checks:
        word, color = styles[check.status]
        console.print(
            f"[{color}]{word:>4}[/{color}]  [bold]{escape(check.name)}[/bold]: "
            f"{escape(check.detail)}"
        )
        if check.fix:
            console.print(f"      fix: {escape(check.fix)}")
        failed += check.status == "fail"
    if failed:
        console.print(f"{failed} required check(s) failed; fix them and rerun fleet-lsp doctor")
    else:
        console.print("everything a Turn needs is in place")
    raise typer.Exit(1 if failed else 0)
