"""``fleet-lsp mlflow ui``; :mod:`fleet_lsp.cli.mlflow_ui` starts it."""

from __future__ import annotations

from typing import Annotated

import typer

mlflow_app = typer.Typer(help="The local MLflow store.", no_args_is_help=True)


@mlflow_app.command("ui")
def mlflow_ui(
    host: Annotated[str, typer.Option("--host", help="Address to bind (loopback).")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="Port.")] = 5000,
) -> None:
    """Start the MLflow UI on loopback against the local store (Ctrl-C stops it)."""
    from fleet_lsp.cli.mlflow_ui import ui_command

    raise typer.Exit(ui_command(host, port))
