"""``fleet-lsp`` entry point.

Tiny on purpose: ``fleet-lsp serve`` (stdio) starts the server without importing typer or rich,
so ``initialize`` is answered as fast as a bare pygls server; every other command loads the typer
app in :mod:`fleet_lsp.cli.app`, whose commands import their own dependencies lazily.

The package, in layers (tests/unit/test_invariants.py checks them): this entry point ->
``app`` (the typer app; it registers every command) -> ``commands/`` (one module per command
group) -> ``support`` (opening a runtime, ``fail``, the exit codes, a Turn's outcome) and the
commands' implementations (``doctor``, ``evaluation``, ``optimize``, ``local_model``,
``mlflow_ui``, ``demo``, ``live``, ``terminal``, ``serve``).
"""

from __future__ import annotations

import sys

from fleet_lsp.cli.serve import serve_stdio

__all__ = ["main", "serve_stdio"]


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args in (["serve"], ["serve", "--stdio"]) or (not args and not sys.stdin.isatty()):
        serve_stdio()
    from fleet_lsp.cli import terminal
    from fleet_lsp.cli.app import app

    terminal.install()  # outside text never acts on the terminal (fleet_lsp.cli.terminal)
    terminal.configure_cli_logging()

    app(args=args or ["--help"], prog_name="fleet-lsp")
