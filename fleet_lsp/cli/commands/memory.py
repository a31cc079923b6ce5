"""``fleet-lsp memory add|list|review|reject``: a Session's memories."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer

from fleet_lsp.cli.support import with_runtime

if TYPE_CHECKING:
    from fleet_core.api import FleetRuntime


memory_app = typer.Typer(
    help="A Session's memories: add, list, review, reject. Only reviewed ones reach the model.",
    no_args_is_help=True,
)


_SessionOption = Annotated[str, typer.Option("--session", "-s", help="Session id.")]


def _print_memories(memories: list[dict[str, Any]]) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    table = Table("memory", "kind", "reviewed", "created", "content")
    for m in memories:
        cells = (
            m["memoryId"],
            m["kind"],
            "yes" if m["reviewed"] else "no",
            m["createdAt"],
            m["content"],
        )
        table.add_row(*(escape(str(cell)) for cell in cells))
    Console().print(table if memories else "No memories in this Session.")


@memory_app.command("add")
def memory_add(
    content: Annotated[str, typer.Argument(help="What to remember (at most 4,000 characters).")],
    session: _SessionOption,
    kind: Annotated[str, typer.Option("--kind", help="A short label, e.g. preference.")] = "user",
    as_json: Annotated[bool, typer.Option("--json", help="Print the memory as JSON.")] = False,
) -> None:
    """Add a memory. It stays unreviewed (never shown to the model) until reviewed."""

    async def go(runtime: FleetRuntime) -> dict[str, Any]:
        return (await runtime.add_memory(session, content, kind=kind)).wire()

    memory: dict[str, Any] = with_runtime(go)
    if as_json:
        typer.echo(json.dumps(memory, indent=2))
        return
    from rich.console import Console
    from rich.markup import escape

    Console().print(
        f"added memory {escape(memory['memoryId'])} (unreviewed): "
        f"fleet-lsp memory review {escape(memory['memoryId'])} -s {escape(session)}"
    )


@memory_app.command("list")
def memory_list(
    session: _SessionOption,
    reviewed: Annotated[
        bool | None,
        typer.Option("--reviewed/--unreviewed", help="Only reviewed (or only unreviewed) ones."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List a Session's memories, oldest first."""

    async def go(runtime: FleetRuntime) -> list[dict[str, Any]]:
        return [m.wire() for m in await runtime.memories(session, reviewed=reviewed)]

    memories: list[dict[str, Any]] = with_runtime(go)
    if as_json:
        typer.echo(json.dumps(memories, indent=2))
        return
    _print_memories(memories)


@memory_app.command("review")
def memory_review(
    memory_id: Annotated[str, typer.Argument(help="The memory's id (memory list).")],
    session: _SessionOption,
    undo: Annotated[
        bool, typer.Option("--undo", help="Mark it unreviewed again (hidden from the model).")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Mark a memory reviewed: from the next Turn on, a task that mentions it shows it."""

    async def go(runtime: FleetRuntime) -> None:
        await runtime.review_memory(session, memory_id, not undo)

    with_runtime(go)
    if as_json:
        typer.echo(json.dumps({"memoryId": memory_id, "reviewed": not undo}))
        return
    from rich.console import Console
    from rich.markup import escape

    state = "unreviewed" if undo else "reviewed"
    Console().print(f"memory {escape(memory_id)} {state}")


@memory_app.command("reject")
def memory_reject(
    memory_id: Annotated[str, typer.Argument(help="The memory's id (memory list).")],
    session: _SessionOption,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Reject a memory: it is deleted and never reaches the model."""

    async def go(runtime: FleetRuntime) -> None:
        await runtime.reject_memory(session, memory_id)

    with_runtime(go)
    if as_json:
        typer.echo(json.dumps({"memoryId": memory_id, "rejected": True}))
        return
    from rich.console import Console
    from rich.markup import escape

    Console().print(f"memory {escape(memory_id)} rejected (deleted)")
