"""``fleet-lsp model status|serve|stop``: the embedded offline model
(:mod:`fleet_lsp.cli.local_model` does the work)."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from fleet_lsp.cli.support import fail

model_app = typer.Typer(
    help="The embedded offline model: the default when no endpoint is configured.",
    no_args_is_help=True,
)


def _config_or_exit() -> Any:
    from fleet_core.config import load_config
    from fleet_core.errors import ConfigError

    try:
        return load_config()
    except ConfigError as exc:
        typer.echo(f"configuration error: {exc.message}", err=True)
        raise typer.Exit(1) from None


@model_app.command("status")
def model_status(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Installed? Running (where, RSS, users)? Which model each role uses. Starts nothing."""
    from fleet_lsp.cli import local_model

    record = local_model.status(_config_or_exit())
    if as_json:
        local_model.print_json(record)
    else:
        local_model.print_status(record)


@model_app.command("serve")
def model_serve(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Start the embedded model server (or find it running) and keep it running after this
    command, until `fleet-lsp model stop`: Turns of every fleet-lsp process then reuse it."""
    from fleet_core.errors import FleetError
    from fleet_lsp.cli import local_model

    try:
        record = local_model.serve(_config_or_exit(), as_json=as_json)
    except FleetError as exc:
        raise fail(exc) from None
    if as_json:
        local_model.print_json(record)
        return
    how = "already running" if record["reused"] else f"ready in {record['seconds']:.1f} s"
    typer.echo(
        f"embedded model {record['modelId']} {how} at {record['apiBase']} "
        "(runs until `fleet-lsp model stop`)"
    )


@model_app.command("stop")
def model_stop(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Stop the embedded model server, whichever process started it."""
    from fleet_core.api import local_model as embedded_model

    stopped = embedded_model.stop(_config_or_exit())
    if as_json:
        typer.echo(json.dumps({"stopped": stopped}))
    else:
        typer.echo(
            "stopped the embedded model server"
            if stopped
            else "no embedded model server was running"
        )
