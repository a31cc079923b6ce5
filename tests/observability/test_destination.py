"""MLflow destinations from configuration: local (default), a tracking server, Databricks, off.

Databricks is not reachable from this machine, so it is covered by configuration tests only."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fleet_core.config import load_config
from fleet_core.errors import ConfigError
from fleet_core.observability.destination import resolve_destination


def destination(tmp_path: Path, environ: dict[str, str], toml: str = ""):
    if toml:
        path = tmp_path / "config" / "fleet.toml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("[config]\nschema_version = 1\n" + toml)
    environ = {"FLEET_STATE_DIR": str(tmp_path / "state"), **environ}
    return resolve_destination(load_config(environ=environ, cwd=tmp_path), environ=environ)


def test_local_is_the_default_embedded_store_under_the_state_dir(tmp_path: Path) -> None:
    found = destination(tmp_path, {})
    assert found.kind == "local"
    assert found.tracking_uri == f"sqlite:///{(tmp_path / 'state' / 'mlflow' / 'mlflow.db')}"
    assert found.experiment("runtime") == "fleet-lsp"
    assert found.experiment("evaluation") == "fleet-lsp-eval"


def test_off_disables_tracing(tmp_path: Path) -> None:
    assert destination(tmp_path, {"FLEET_MLFLOW_DESTINATION": "off"}).kind == "off"


def test_server_needs_a_tracking_uri(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"mlflow\.tracking_uri' is required"):
        destination(tmp_path, {"FLEET_MLFLOW_DESTINATION": "server"})


@pytest.mark.parametrize(
    "uri",
    ["https://mlflow.example.com", "http://127.0.0.1:5000", "postgresql://mlflow@db/mlflow"],
)
def test_server_accepts_https_loopback_http_and_database_uris(tmp_path: Path, uri: str) -> None:
    environ = {"FLEET_MLFLOW_DESTINATION": "server", "FLEET_MLFLOW_TRACKING_URI": uri}
    found = destination(tmp_path, environ)
    # postgresql:// is used with the installed psycopg 3 driver (MLflow's default is psycopg2)
    expected = uri.replace("postgresql://", "postgresql+psycopg://")
    assert (found.kind, found.tracking_uri, found.shared) == ("server", expected, True)


def test_with_a_postgresql_database_the_default_destination_is_shared(tmp_path: Path) -> None:
    url = "postgresql+psycopg://fleet:s3cret@db.example:5432/fleet"
    found = destination(tmp_path, {"FLEET_DATABASE_URL": url})
    assert found.kind == "local" and found.shared
    assert found.tracking_uri == url + "?options=-csearch_path%3Dfleet_mlflow"
    assert "s3cret" not in str(found.describe())
    alone = destination(tmp_path, {})  # SQLite: the per-host store under the state directory
    assert not alone.shared and alone.tracking_uri.endswith("/state/mlflow/mlflow.db")


def test_server_refuses_plain_http_off_loopback(tmp_path: Path) -> None:
    environ = {
        "FLEET_MLFLOW_DESTINATION": "server",
        "FLEET_MLFLOW_TRACKING_URI": "http://mlflow.example.com",
    }
    with pytest.raises(ConfigError, match=r"mlflow\.tracking_uri"):
        destination(tmp_path, environ)


def test_a_server_uri_password_never_shows_in_the_descriptor(tmp_path: Path) -> None:
    uri = "postgresql://mlflow:hunter2@db/mlflow"
    environ = {"FLEET_MLFLOW_DESTINATION": "server", "FLEET_MLFLOW_TRACKING_URI": uri}
    described = destination(tmp_path, environ).describe()
    assert "hunter2" not in repr(described)


def test_databricks_needs_host_and_token_from_the_environment(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="DATABRICKS_HOST and DATABRICKS_TOKEN is not set"):
        destination(tmp_path, {"FLEET_MLFLOW_DESTINATION": "databricks"})
    with pytest.raises(ConfigError, match="DATABRICKS_TOKEN is not set"):
        destination(
            tmp_path,
            {"FLEET_MLFLOW_DESTINATION": "databricks", "DATABRICKS_HOST": "https://x.cloud"},
        )


def test_databricks_with_credentials_uses_the_databricks_experiments(tmp_path: Path) -> None:
    environ = {
        "FLEET_MLFLOW_DESTINATION": "databricks",
        "DATABRICKS_HOST": "https://example.cloud.databricks.com",
        "DATABRICKS_TOKEN": "dapi-canary-123",
    }
    found = destination(tmp_path, environ)
    assert (found.kind, found.tracking_uri) == ("databricks", "databricks")
    assert found.experiment("runtime") == "/Shared/fleet-lsp-runtime"
    assert found.experiment("optimization") == "/Shared/fleet-lsp-gepa"
    assert "dapi-canary-123" not in repr(found.describe())


def test_databricks_profile_needs_no_token(tmp_path: Path) -> None:
    toml = '[mlflow]\ndestination = "databricks"\n[mlflow.databricks]\ntracking_uri = "databricks://team"\n'
    found = destination(tmp_path, {}, toml)
    assert found.tracking_uri == "databricks://team"


@pytest.mark.parametrize(
    ("toml", "environ", "message"),
    [
        (
            '[mlflow.databricks]\nexperiment_name = "relative"\n',
            {"DATABRICKS_HOST": "https://x.cloud", "DATABRICKS_TOKEN": "t"},
            "must be an absolute workspace path",
        ),
        (
            '[mlflow.databricks]\ntracking_uri = "https://x"\n',
            {},
            'must be "databricks" or "databricks://<profile>"',
        ),
        ("", {"DATABRICKS_HOST": "http://x.cloud", "DATABRICKS_TOKEN": "t"}, "https:// URL"),
    ],
)
def test_bad_databricks_configuration_names_the_key(
    tmp_path: Path, toml: str, environ: dict[str, str], message: str
) -> None:
    body = '[mlflow]\ndestination = "databricks"\n' + toml
    with pytest.raises(ConfigError, match=re.escape(message)):
        destination(tmp_path, environ, body)
