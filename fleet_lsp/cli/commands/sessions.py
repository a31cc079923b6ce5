"""``fleet-lsp sessions``, ``turn``, ``artifacts get`` and ``trace show``."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from fleet_core.modes import EXECUTION_MODES
from fleet_lsp.cli.support import (
    EXIT_COMPLETED_WITH_ERRORS,
    headline,
    outcome_line,
    print_result,
    turn_exit_code,
    turn_failure_line,
    with_runtime,
)

if TYPE_CHECKING:
    from fleet_core.api import FleetRuntime


artifacts_app = typer.Typer(help="Session artifacts.", no_args_is_help=True)
trace_app = typer.Typer(help="Turn traces.", no_args_is_help=True)


def sessions(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    host: Annotated[
        str | None, typer.Option("--host", help="Only Sessions last taken on this host.")
    ] = None,
    user: Annotated[
        str | None, typer.Option("--user", help="Only Sessions last taken by this OS user.")
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(
            "--since", help="Only Sessions updated since: 30m, 12h, 7d, 2w or an ISO-8601 instant."
        ),
    ] = None,
    mine: Annotated[
        bool, typer.Option("--mine", help="Only Sessions of this host and OS user.")
    ] = False,
) -> None:
    """List Sessions, newest first (filters combine with AND)."""
    from fleet_lsp.cli.support import since_instant

    updated_since = since_instant(since) if since is not None else None

    async def go(runtime: FleetRuntime) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        cursor: str | None = None
        owner_host, owner_user = runtime.owner if mine else (None, None)
        while True:  # every page (fleet/session/list pages the same way)
            page = await runtime.sessions_page(
                cursor,
                500,
                owner_host=host or owner_host,
                owner_user=user or owner_user,
                updated_since=updated_since,
            )
            found += [s.wire() for s in page.sessions]
            if page.next_cursor is None or page.next_cursor == cursor:
                return found
            cursor = page.next_cursor

    found = with_runtime(go)
    if as_json:
        import json

        typer.echo(json.dumps(found, indent=2))
        return
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from fleet_lsp.cli.terminal import visible

    table = Table("session", "mode", "turns", "updated", "owner", "dataset")
    for s in found:
        owner = f"{s.get('ownerUser', '')}@{s['ownerHost']}" if s.get("ownerHost") else ""
        cells = (
            s["sessionId"],
            s["mode"],
            str(s["turnCount"]),
            s["updatedAt"],
            owner,
            (s.get("dataset") or {}).get("path", ""),
        )
        table.add_row(*(escape(visible(cell)) for cell in cells))
    Console().print(table if found else "No sessions yet. Start one with: fleet-lsp demo")


def turn(
    task: Annotated[str, typer.Argument(help="What the agent should do.")],
    session: Annotated[str, typer.Option("--session", "-s", help="Session id (created if new).")],
    attach: Annotated[
        list[str] | None, typer.Option("--attach", help="Local file to attach (repeatable).")
    ] = None,
    dataset: Annotated[
        str | None,
        typer.Option("--dataset", help="Workspace path to select, e.g. files/sales.csv."),
    ] = None,
    mode: Annotated[str | None, typer.Option("--mode", help=" | ".join(EXECUTION_MODES))] = None,
    record_replay: Annotated[
        bool,
        typer.Option(
            "--record-replay", help="Store a replay snapshot (makes the trace optimization data)."
        ),
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print only the TurnResult JSON.")
    ] = False,
) -> None:
    """Run one Turn with a live view of progress and child agents."""
    import os
    from pathlib import Path

    from fleet_core.errors import SessionNotFound

    sources = [Path(os.path.abspath(os.path.expanduser(item))) for item in attach or []]
    kept: list[str] = []  # memories proposed and Skills saved by the Turn's code

    async def go(runtime: FleetRuntime) -> dict[str, Any]:
        from fleet_core.models import TurnRequest

        try:
            await runtime.load_session(session)
        except SessionNotFound:
            await runtime.new_session(session, mode)
        for source in sources:
            info = await runtime.attach(session, source)
            if not as_json:
                typer.echo(f"attached {info.path} ({info.size_bytes:,} bytes)", err=True)
        if dataset:
            await runtime.set_dataset(session, dataset)
        request = TurnRequest(session_id=session, task=task, mode=mode, record_replay=record_replay)
        if as_json:
            return (await runtime.run_turn(request)).wire()
        from fleet_lsp.cli.live import LiveTurnView

        with LiveTurnView(task) as view:
            result = await runtime.run_turn(request, on_event=view.on_event)
            view.done(headline(result.wire()))
        kept.extend(view.kept)
        return result.wire()

    result = with_runtime(go)
    import json

    if as_json:
        typer.echo(json.dumps(result, indent=2))
    else:
        print_result(result)
        if kept:
            from rich.console import Console

            from fleet_lsp.cli.terminal import visible

            for line in kept:
                Console().print(visible(line), markup=False, highlight=False)
    code = turn_exit_code(result)
    if code == EXIT_COMPLETED_WITH_ERRORS:
        typer.echo(outcome_line(result), err=True)
        raise typer.Exit(code)
    if code:
        typer.echo(turn_failure_line(result), err=True)
        raise typer.Exit(code)


@artifacts_app.command("get")
def artifacts_get(
    session: Annotated[str, typer.Argument(help="Session id.")],
    path: Annotated[str, typer.Argument(help="Artifact path, e.g. artifacts/report.csv.")],
    local: Annotated[str | None, typer.Argument(help="Where to save it (default: stdout).")] = None,
) -> None:
    """Print an artifact, or save it to LOCAL."""
    workspace_path = path if path.startswith("artifacts/") else f"artifacts/{path}"

    async def go(runtime: FleetRuntime) -> bytes:
        return await runtime.read_file(session, workspace_path)

    data: bytes = with_runtime(go)
    if local is None:
        if sys.stdout.isatty():  # shown, not acted on; piped, the bytes as they are
            from fleet_lsp.cli.terminal import visible

            typer.echo(visible(data.decode("utf-8", errors="replace")), nl=False)
        else:
            sys.stdout.buffer.write(data)
        return
    from pathlib import Path

    target = Path(local)
    if target.is_dir():
        target = target / Path(workspace_path).name
    target.write_bytes(data)
    typer.echo(f"saved {workspace_path} to {target} ({len(data):,} bytes)", err=True)


@trace_app.command("show")
def trace_show(
    trace_id: Annotated[str, typer.Argument(help="Trace id or Turn id.")],
    raw: Annotated[bool, typer.Option("--raw", help="Print markdown source.")] = False,
) -> None:
    """Render a Turn's trace (from the stored MLflow trace) as markdown."""

    async def go(runtime: FleetRuntime) -> str:
        from fleet_lsp.traces import TraceService

        await runtime.traces.flush()  # what earlier CLI Turns queued
        return (await TraceService().get(runtime, trace_id=trace_id)).markdown

    from fleet_lsp.cli.terminal import visible

    markdown = visible(with_runtime(go))
    if raw:
        typer.echo(markdown)
        return
    from rich.console import Console
    from rich.markdown import Markdown

    Console().print(Markdown(markdown))
