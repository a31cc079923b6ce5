"""``fleet-lsp serve [--stdio | --tcp HOST:PORT]``: the language server.

``fleet-lsp serve`` and ``fleet-lsp serve --stdio`` never get here: :func:`fleet_lsp.cli.main`
serves them without loading typer.
"""

from __future__ import annotations

from typing import Annotated

import typer

from fleet_lsp.cli.support import NON_LOOPBACK_ENV, truthy


def serve(
    stdio: Annotated[
        bool, typer.Option("--stdio", help="Serve over stdin/stdout (default).")
    ] = False,
    tcp: Annotated[
        str | None,
        typer.Option(
            "--tcp",
            metavar="HOST:PORT",
            help="Serve one client over TCP (others are refused; the server ends with it).",
        ),
    ] = None,
) -> None:
    """Run the language server (stdio by default; --tcp HOST:PORT for debugging)."""
    if tcp is None:
        from fleet_lsp.cli.serve import serve_stdio

        serve_stdio()
    import logging
    import os

    host, sep, port_text = tcp.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise typer.BadParameter(
            "use --tcp HOST:PORT, e.g. --tcp 127.0.0.1:2087", param_hint="--tcp"
        )
    from fleet_core.net import is_loopback_host
    from fleet_lsp.server import configure_logging, create_server

    configure_logging(logging.INFO)
    log = logging.getLogger("fleet_lsp")
    if not is_loopback_host(host):
        allowed = truthy(os.environ.get(NON_LOOPBACK_ENV))
        if not allowed:
            from fleet_core.config import load_config

            allowed = load_config().settings.server.allow_non_loopback_bind
        if not allowed:
            typer.echo(
                f"Refusing to listen on {host}: fleet-lsp has no caller authentication, so it "
                f"binds to loopback only. Set {NON_LOOPBACK_ENV}=true to allow it.",
                err=True,
            )
            raise typer.Exit(2)
        log.warning(
            "listening on non-loopback address %s:%s (%s=true); anyone who can reach it can "
            "drive this server, which has no caller authentication",
            host,
            port_text,
            NON_LOOPBACK_ENV,
        )
    from fleet_lsp.transport import finish_process

    server = create_server()
    server.start_tcp(host, int(port_text))  # logs "listening on" once bound
    finish_process(server.exit_code)
