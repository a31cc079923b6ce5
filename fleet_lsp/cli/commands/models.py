"""``fleet-lsp models`` and ``fleet-lsp session set-models``: the endpoint's models and a
Session's selection."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer

from fleet_lsp.cli.support import with_runtime

if TYPE_CHECKING:
    from fleet_core.api import FleetRuntime


session_app = typer.Typer(
    help="One Session's settings: its model selection (list Sessions with `fleet-lsp sessions`).",
    no_args_is_help=True,
)


def models(
    refresh: Annotated[
        bool, typer.Option("--refresh", help="Ask the endpoint again (not the cache).")
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print {models: [{id, ownedBy}], cached, fetchedAt}.")
    ] = False,
) -> None:
    """List the models the configured endpoint offers (GET <api_base>/models).

    Exit code 2 when no endpoint is configured or it does not answer (one line says which)."""

    async def go(runtime: FleetRuntime) -> dict[str, Any]:
        return (await runtime.list_models(refresh=refresh)).wire()

    found: dict[str, Any] = with_runtime(go)
    if as_json:
        typer.echo(json.dumps(found, indent=2))
        return
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    table = Table("model", "owned by")
    for model in found["models"]:
        table.add_row(escape(model["id"]), escape(model["ownedBy"] or ""))
    console = Console()
    console.print(table if found["models"] else "The endpoint lists no models.")
    console.print(
        "select one for a Session: fleet-lsp session set-models SESSION --root MODEL", markup=False
    )


@session_app.command("set-models")
def session_set_models(
    session: Annotated[str, typer.Argument(help="Session id.")],
    root: Annotated[
        str | None, typer.Option("--root", help="Model id for Turn programs (root role).")
    ] = None,
    sub: Annotated[
        str | None,
        typer.Option("--sub", help="Model id for llm_query, child agents and triage (sub role)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print {sessionId, root, sub}.")] = False,
) -> None:
    """Set the Session's model ids; a role not given is cleared (the configuration's model
    applies). Model ids only (see `fleet-lsp models`): never an endpoint or a key."""

    async def go(runtime: FleetRuntime) -> dict[str, Any]:
        return (await runtime.set_models(session, root=root, sub=sub)).wire()

    chosen: dict[str, Any] = with_runtime(go)
    if as_json:
        typer.echo(json.dumps(chosen, indent=2))
        return
    from rich.console import Console
    from rich.markup import escape

    console = Console()
    for role in ("root", "sub"):
        value = chosen[role]
        shown = escape(value) if value else "(the configuration's)"
        console.print(f"{role}: {shown}")
