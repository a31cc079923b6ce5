"""``fleet-lsp config show``: the effective configuration and where each value came from."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from fleet_lsp.cli.support import with_runtime

if TYPE_CHECKING:
    from fleet_core.api import FleetRuntime


config_app = typer.Typer(help="Effective configuration.", no_args_is_help=True)


@config_app.command("show")
def config_show(
    session: Annotated[
        str | None,
        typer.Option(
            "--session", "-s", help="With this Session's selections (source 'session') applied."
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Every effective non-secret value with its source, secret names as set/unset, the digest."""
    from fleet_core.config import load_config
    from fleet_core.errors import ConfigError

    try:
        config = load_config(log_warnings=False)  # printed below, with the rest
    except ConfigError as exc:
        typer.echo(f"configuration error: {exc.message}", err=True)
        raise typer.Exit(1) from None
    if session is not None:
        session_id = session

        async def go(runtime: FleetRuntime) -> Any:
            return await runtime.effective_config(session_id)

        config = with_runtime(go)
    items = list(config.items())
    secrets = config.secret_status()
    from fleet_core.api.diagnostics import models_in_use

    models = models_in_use(config)  # a configured endpoint, the embedded model, or none
    if as_json:
        import json

        typer.echo(
            json.dumps(
                {
                    "configFile": str(config.config_file) if config.config_file else None,
                    "stateDir": str(config.state_dir),
                    "session": session,
                    "digest": config.digest(),
                    "settings": {k: {"value": v, "source": s} for k, v, s in items},
                    "secrets": {k: ("set" if v else "unset") for k, v in secrets.items()},
                    "models": {use.role: use.describe() for use in models},
                    # where each endpoint and its key came from; names only, never a value
                    "endpoints": {b.label: b.wire() for b in config.bindings.values()},
                    "workspace": {
                        "configFileScope": config.config_file_scope,
                        "trusted": config.workspace_trusted,
                        "ignored": [str(path) for path in config.workspace_ignored],
                    },
                    "warnings": list(config.warnings),
                },
                indent=2,
            )
        )
        return
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console()
    console.print(f"config file: {config.config_file or '(none; defaults)'}", markup=False)
    console.print(f"state dir:   {config.state_dir}", markup=False)
    if session is not None:
        console.print(f"session:     {session}", markup=False)
    table = Table("setting", "value", "source")
    for key, value, source in items:
        table.add_row(escape(key), escape("" if value is None else str(value)), source)
    console.print(table)
    secret_table = Table("secret", "status")
    for name, is_set in secrets.items():
        secret_table.add_row(name, "set" if is_set else "unset")
    console.print(secret_table)
    for use in models:
        console.print(f"{use.role} role uses: {use.describe()}", markup=False)
    console.print("endpoints and keys (never their values):")
    for binding in config.bindings.values():
        console.print(f"  {binding.describe()}", markup=False)
    if config.workspace_ignored:
        names = ", ".join(str(path) for path in config.workspace_ignored)
        console.print(
            f"workspace config ignored (FLEET_IGNORE_WORKSPACE_CONFIG): {names}", markup=False
        )
    elif config.workspace_trusted:
        console.print("workspace config trusted (FLEET_TRUST_WORKSPACE_CONFIG)")
    for warning in config.warnings:
        console.print(f"warning: {warning}", markup=False, style="yellow")
    console.print(f"digest: {config.digest()}")
