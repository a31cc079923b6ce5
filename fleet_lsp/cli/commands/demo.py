"""``fleet-lsp demo``; :mod:`fleet_lsp.cli.demo` drives a real server."""

from __future__ import annotations

import typer


def demo() -> None:
    """The quickstart through the real protocol: a Session, sales.csv, a Turn, the artifact."""
    from fleet_lsp.cli.demo import run_demo

    raise typer.Exit(run_demo())
