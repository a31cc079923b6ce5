"""``fleet-lsp serve`` over stdio, the fast path: standard library only until the server loads,
so neither typer nor rich is imported before ``initialize`` is answered."""

from __future__ import annotations

from typing import NoReturn


def serve_stdio() -> NoReturn:
    """Serve over stdio; the process exits with the server's exit code (``exit`` after
    ``shutdown``: 0; ``exit`` without it or a framing error: 1), within its exit grace."""
    from fleet_lsp.server import configure_logging, create_server
    from fleet_lsp.transport import finish_process

    configure_logging()
    server = create_server()
    server.start_io()
    finish_process(server.exit_code)
