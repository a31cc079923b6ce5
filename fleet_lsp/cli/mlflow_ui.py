"""``fleet-lsp mlflow ui``: the MLflow UI on loopback over the local store.

Traces are recorded in-process (no server needed); this only starts MLflow's own server
(``python -m mlflow ui``) against ``<state_dir>/mlflow/mlflow.db`` for people who want to browse
traces, labels and evaluation runs. It binds loopback only (it has no authentication) unless
``FLEET_ALLOW_NON_LOOPBACK_BIND=true``. For a ``server`` or ``databricks`` destination it says
where the UI already is.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from fleet_core.config import EffectiveConfig


def ui_command_line(config: EffectiveConfig, host: str, port: int) -> list[str]:
    """The MLflow server command for the local store (``ConfigError`` for other destinations)."""
    from fleet_core.api import diagnostics
    from fleet_core.errors import ConfigError

    if config.settings.mlflow.destination != "local":
        raise ConfigError("the local MLflow store is not in use (mlflow.destination is not local)")
    uri, artifacts = diagnostics.local_tracing_store(config)
    return [
        sys.executable,
        "-m",
        "mlflow",
        "ui",
        "--backend-store-uri",
        uri,
        "--default-artifact-root",
        artifacts,
        "--host",
        host,
        "--port",
        str(port),
        "--workers",
        "1",
    ]


def ui_command(host: str, port: int) -> int:
    from fleet_core.config import load_config
    from fleet_core.errors import FleetError
    from fleet_core.net import is_loopback_host
    from fleet_core.offline import offline_environ
    from fleet_lsp.cli.support import NON_LOOPBACK_ENV, fail, truthy

    try:
        config = load_config()
    except FleetError as exc:
        raise fail(exc) from None
    destination = config.settings.mlflow.destination
    if destination == "off":
        typer.echo(
            'error (TracingUnavailable): tracing is off ([mlflow] destination = "off"); set '
            "FLEET_MLFLOW_DESTINATION=local to record traces",
            err=True,
        )
        return 2
    if destination == "server":
        typer.echo(
            f"Traces go to the tracking server {config.settings.mlflow.tracking_uri}; open it."
        )
        return 0
    if destination == "databricks":
        host_url = os.environ.get("DATABRICKS_HOST") or "your Databricks workspace"
        typer.echo(f"Traces go to Databricks; open the experiment in {host_url}.")
        return 0
    allowed = truthy(os.environ.get(NON_LOOPBACK_ENV)) or (
        config.settings.server.allow_non_loopback_bind
    )
    if not is_loopback_host(host) and not allowed:
        typer.echo(
            f"error (InvalidInput): refusing to serve the MLflow UI on {host}: it has no "
            f"authentication, so it binds to loopback only; set {NON_LOOPBACK_ENV}=true to "
            "allow it",
            err=True,
        )
        return 2
    command = ui_command_line(config, host, port)
    (config.state_dir / "mlflow").mkdir(parents=True, exist_ok=True)
    shown = f"[{host}]" if ":" in host else host
    typer.echo(
        f"MLflow UI for {Path(config.state_dir) / 'mlflow'} at http://{shown}:{port}", err=True
    )
    typer.echo("(Ctrl-C stops it)", err=True)
    # The MLflow server imports LiteLLM: its cost map is the bundled one, not a download.
    process = subprocess.Popen(command, env=offline_environ())
    try:
        return process.wait()
    except KeyboardInterrupt:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
        return 130
