"""``fleet-lsp`` entry point.

Tiny on purpose: ``fleet-lsp serve`` (stdio) starts the server without importing typer or rich,
so ``initialize`` is answered as fast as a bare pygls server; every other command loads the typer
app in :mod:`fleet_lsp.commands`, whose commands import their own dependencies lazily.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args in (["serve"], ["serve", "--stdio"]) or (not args and not sys.stdin.isatty()):
        serve_stdio()
        return
    from fleet_lsp import terminal
    from fleet_lsp.commands import app

    terminal.install()  # outside text never acts on the terminal (fleet_lsp.terminal)
    terminal.configure_cli_logging()

    app(args=args or ["--help"], prog_name="fleet-lsp")


def serve_stdio() -> None:
    """Serve over stdio; the process exits with the server's exit code (``exit`` after
    ``shutdown``: 0; ``exit`` without it or a framing error: 1)."""
    from fleet_lsp.server import configure_logging, create_server

    configure_logging()
    server = create_server()
    server.start_io()
    sys.exit(server.exit_code)


if __name__ == "__main__":  # pragma: no cover
    main()
