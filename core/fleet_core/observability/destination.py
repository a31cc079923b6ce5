"""Where traces, evaluation runs and optimization runs go: resolved from ``[mlflow]``.

``local`` (default): MLflow's SQLite store at ``<state_dir>/mlflow/mlflow.db`` with artifacts in
``<state_dir>/mlflow/artifacts``; recorded in-process, no server needed (``fleet-lsp mlflow ui``
serves the same files on loopback). When the database is PostgreSQL (shared by several hosts),
``local`` means MLflow's store in that same database instead (its own schema,
``fleet_mlflow``), so every host's traces land in one place and a Session continued on another
host never has two trace stores (docs/deployment.md). ``server``: ``[mlflow] tracking_uri`` (an ``http(s)://``
tracking server, HTTPS unless on loopback, or a database URI shared by a team). ``databricks``:
``[mlflow.databricks]`` with credentials from the environment (``DATABRICKS_HOST`` and
``DATABRICKS_TOKEN``, or a ``databricks://<profile>`` URI). ``off``: no tracing.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal
from urllib.parse import urlsplit

from fleet_core.errors import ConfigError
from fleet_core.observability.redaction import NO_SECRETS

if TYPE_CHECKING:
    from fleet_core.config import EffectiveConfig

Scope = Literal["runtime", "evaluation", "optimization"]
DestinationKind = Literal["local", "server", "databricks", "off"]
_LOOPBACK = {"localhost", "127.0.0.1", "::1"}
MLFLOW_SCHEMA = "fleet_mlflow"  # MLflow's tables in a shared PostgreSQL database
_DB_SCHEMES = ("sqlite", "postgresql", "mysql", "mssql")
_EXPERIMENT_KEYS: dict[str, str] = {
    "runtime": "experiment_name",
    "evaluation": "eval_experiment_name",
    "optimization": "optimization_experiment_name",
}


@dataclass(frozen=True, slots=True)
class MlflowDestination:
    """A resolved MLflow destination. Holds no credential of its own; a database tracking URI
    carries the database's (``describe`` redacts it: show that, never ``tracking_uri``)."""

    kind: DestinationKind
    tracking_uri: str | None
    experiments: Mapping[Scope, str]
    artifact_location: str | None = None
    databricks_host: str | None = None
    request_timeout: float = 15.0  # seconds per MLflow HTTP request (our bound, no retries)
    shared: bool = False  # the store is shared by every host on the database

    def experiment(self, scope: Scope) -> str:
        return self.experiments[scope]

    def describe(self) -> dict[str, object]:
        """A descriptor safe to show or compare (passwords in URIs are redacted)."""
        return {
            "kind": self.kind,
            "trackingUri": NO_SECRETS.text(self.tracking_uri) if self.tracking_uri else None,
            "experiments": dict(self.experiments),
            "artifactLocation": self.artifact_location,
            "databricksHost": self.databricks_host,
            "shared": self.shared,
        }


def local_paths(state_dir: Path) -> tuple[str, str]:
    """The local store's tracking URI and artifact root under ``state_dir``."""
    root = (state_dir / "mlflow").resolve()
    return f"sqlite:///{root / 'mlflow.db'}", (root / "artifacts").as_uri()


def resolve_destination(
    config: EffectiveConfig, *, environ: Mapping[str, str] | None = None
) -> MlflowDestination:
    """Validate ``[mlflow]`` into a destination; raises ``ConfigError`` naming the key."""
    environ = os.environ if environ is None else environ
    settings = config.settings.mlflow
    experiments: dict[Scope, str] = {
        "runtime": settings.experiment_name,
        "evaluation": settings.eval_experiment_name,
        "optimization": settings.optimization_experiment_name,
    }
    timeout = settings.request_timeout_seconds
    if settings.destination == "off":
        return MlflowDestination("off", None, experiments)
    if settings.destination == "local":
        uri, artifacts = local_paths(config.state_dir)
        database = shared_database_uri(config)
        if database is not None:
            return MlflowDestination(
                "local",
                database,
                experiments,
                artifact_location=artifacts,
                request_timeout=timeout,
                shared=True,
            )
        return MlflowDestination(
            "local", uri, experiments, artifact_location=artifacts, request_timeout=timeout
        )
    if settings.destination == "server":
        server_uri = settings.tracking_uri
        if not server_uri:
            raise ConfigError(
                "'mlflow.tracking_uri' is required when mlflow.destination is \"server\" "
                "(FLEET_MLFLOW_TRACKING_URI)"
            )
        _check_server_uri(server_uri)
        return MlflowDestination(
            "server", _driver(server_uri), experiments, request_timeout=timeout, shared=True
        )
    databricks = settings.databricks
    uri = databricks.tracking_uri
    if uri != "databricks" and not uri.startswith("databricks://"):
        raise ConfigError(
            f'\'mlflow.databricks.tracking_uri\' must be "databricks" or "databricks://<profile>", '
            f"got {uri!r}"
        )
    experiments = {
        "runtime": databricks.experiment_name,
        "evaluation": databricks.eval_experiment_name,
        "optimization": databricks.optimization_experiment_name,
    }
    for scope, name in experiments.items():
        if not name.startswith("/"):
            key = _EXPERIMENT_KEYS[scope]
            raise ConfigError(
                f"'mlflow.databricks.{key}' must be an absolute workspace path such as "
                f"'/Shared/fleet-lsp', got {name!r}"
            )
    host = environ.get("DATABRICKS_HOST")
    has_token = bool(environ.get("DATABRICKS_TOKEN")) or config.secrets.databricks_token is not None
    uses_profile = uri.startswith("databricks://")
    if not uses_profile and not (host and has_token):
        missing = [
            n for n, ok in (("DATABRICKS_HOST", host), ("DATABRICKS_TOKEN", has_token)) if not ok
        ]
        raise ConfigError(
            'mlflow.destination is "databricks" but '
            + " and ".join(missing)
            + " is not set; set them in the environment or .env, or use "
            'tracking_uri = "databricks://<profile>"'
        )
    if host and not host.startswith("https://"):
        raise ConfigError(f"DATABRICKS_HOST must be an https:// URL, got {host!r}")
    return MlflowDestination(
        "databricks", uri, experiments, databricks_host=host, request_timeout=timeout, shared=True
    )


def shared_database_uri(config: EffectiveConfig) -> str | None:
    """MLflow's tracking URI in the configured PostgreSQL database (schema ``fleet_mlflow``,
    created by the store's migration 0004), or None when the database is not PostgreSQL."""
    secret = config.secrets.database_url
    if secret is None:
        return None
    raw = secret.get_secret_value()
    parts = urlsplit(raw)
    if parts.scheme.split("+")[0] not in ("postgresql", "postgres"):
        return None
    query = f"{parts.query}&" if parts.query else ""
    rebuilt = parts._replace(
        scheme="postgresql+psycopg", query=f"{query}options=-csearch_path%3D{MLFLOW_SCHEMA}"
    )
    return rebuilt.geturl()


def _driver(uri: str) -> str:
    """A PostgreSQL tracking URI with the installed driver (psycopg 3): MLflow's default for
    ``postgresql://`` is psycopg2, which fleet-lsp does not install."""
    for prefix in ("postgresql://", "postgres://"):
        if uri.startswith(prefix):
            return "postgresql+psycopg://" + uri.removeprefix(prefix)
    return uri


def _check_server_uri(uri: str) -> None:
    parts = urlsplit(uri)
    scheme = parts.scheme.split("+")[0]
    if scheme in _DB_SCHEMES:
        return
    if scheme not in ("http", "https"):
        raise ConfigError(
            f"'mlflow.tracking_uri' must be an http(s):// tracking server or a database URI, "
            f"got {NO_SECRETS.text(uri)!r}"
        )
    if scheme == "http" and (parts.hostname or "") not in _LOOPBACK:
        raise ConfigError(
            "'mlflow.tracking_uri' must use https:// unless the server is on loopback "
            f"(got {NO_SECRETS.text(uri)!r})"
        )
