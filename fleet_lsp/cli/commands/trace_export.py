"""``fleet-lsp trace export``: export the queued traces now, show the queue, or drop a row.

A CLI command never waits for MLflow: a Turn run from the command line queues its trace in its
own commit and exits. A running server's background exporter exports it; without a server, run
this command (or ``fleet-lsp trace show``, which exports first), e.g. after a batch of Turns or
from a timer (docs/observability.md).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer

from fleet_lsp.cli.support import EXIT_FAILURE, with_runtime

if TYPE_CHECKING:
    from fleet_core.api import FleetRuntime


def trace_export(
    status: Annotated[
        bool, typer.Option("--status", help="Show the export queue instead of exporting.")
    ] = False,
    drop: Annotated[
        str | None,
        typer.Option("--drop", help="Remove one queued trace without exporting it (trace id)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Export every queued trace now (exit 1 if some failed; they stay queued)."""
    if drop is not None:
        _drop(drop, as_json)
    elif status:
        _status(as_json)
    else:
        _export(as_json)


def _export(as_json: bool) -> None:
    async def go(runtime: FleetRuntime) -> dict[str, int]:
        stats = await runtime.traces.flush()
        left = await runtime.traces.queue_size()
        return {
            "exported": stats.exported,
            "failed": stats.failed,
            "dropped": stats.dropped,
            "queued": left,
        }

    counts = with_runtime(go)
    if as_json:
        typer.echo(json.dumps(counts))
    else:
        typer.echo(
            f"exported {counts['exported']}, failed {counts['failed']} (they stay queued), "
            f"{counts['queued']} queued"
            + (f", {counts['dropped']} dropped (queue full)" if counts["dropped"] else "")
        )
    if counts["failed"]:
        raise typer.Exit(EXIT_FAILURE)


def _status(as_json: bool) -> None:
    async def go(runtime: FleetRuntime) -> tuple[int, list[dict[str, Any]], dict[str, Any]]:
        rows = await runtime.traces.queue(limit=100)
        status = runtime.traces.status()
        destination = {"enabled": status.enabled, "destination": status.destination}
        return await runtime.traces.queue_size(), [r.wire() for r in rows], destination

    total, rows, destination = with_runtime(go)
    if as_json:
        typer.echo(json.dumps({"queued": total, "rows": rows, **destination}, indent=2))
        return
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from fleet_lsp.cli.terminal import visible

    console = Console()
    console.print(
        escape(visible(f"{total} traces queued for export to {destination['destination']}"))
        + ("" if destination["enabled"] else " (tracing is off: they wait)")
    )
    if not rows:
        return
    table = Table("trace", "session", "host", "attempts", "next attempt", "last error")
    for row in rows:
        cells = (
            row["traceId"],
            row["sessionId"],
            row["originHost"] or "",
            str(row["attempts"]),
            row["nextAttemptAt"] or "now",
            (row["lastError"] or "")[:80],
        )
        table.add_row(*(escape(visible(cell)) for cell in cells))
    console.print(table)
    if total > len(rows):
        console.print(f"(the oldest {len(rows)} of {total} shown)")


def _drop(trace_id: str, as_json: bool) -> None:
    async def go(runtime: FleetRuntime) -> bool:
        return await runtime.traces.drop(trace_id)

    dropped = with_runtime(go)
    if as_json:
        typer.echo(json.dumps({"traceId": trace_id, "dropped": dropped}))
    elif dropped:
        typer.echo(f"dropped {trace_id} from the export queue (it was not exported)")
    else:
        typer.echo(f"error: trace '{trace_id}' is not queued", err=True)
    if not dropped:
        raise typer.Exit(EXIT_FAILURE)
