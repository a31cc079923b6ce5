"""Checks of the configuration and of the services it names, for ``doctor`` and
``fleet/debug/info``: synchronous and blocking (HTTP probes, ``bwrap --version``, MLflow store
creation), so call them from a thread. None needs a runtime or the store."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fleet_core.config import EffectiveConfig
from fleet_core.errors import FleetError, InvalidInput, ModelUnavailable
from fleet_core.localmodel.selection import ModelInUse, models_in_use
from fleet_core.net import http_probe

__all__ = [
    "check_jev",
    "check_models",
    "check_tracing_store",
    "describe_sandbox",
    "local_tracing_store",
    "models_in_use",
    "probe_sandbox",
]

if TYPE_CHECKING:
    # the records load with the check that builds them: config show needs none of them
    from fleet_core.api.records import JevCheck, SandboxIsolation
    from fleet_core.endpoints import Role


def check_models(
    config: EffectiveConfig, roles: Sequence[Role] | None = None, *, probe: bool = True
) -> list[ModelInUse]:
    """Per role (default: all): is a model configured, and (``probe``) does its endpoint
    answer ``GET /models`` within 5 s? One probe per endpoint; keys are never shown. A role
    without an endpoint reports the embedded model when it is installed (``embedded``; it
    is never started here: its ``api_base`` is the running server's, if any)."""
    from fleet_core.endpoints import ROLES, resolve_spec

    checks: list[ModelInUse] = []
    probed: dict[tuple[str, str], str] = {}
    for role in roles or ROLES:
        if role not in ROLES:
            raise InvalidInput(f"Unknown model role '{role}'; use one of: {', '.join(ROLES)}")
        try:
            spec, key = resolve_spec(config.settings.llm, config.secrets, role)
        except ModelUnavailable:
            checks += models_in_use(config, (role,))  # the embedded model, or what to set
            continue
        problem = ""
        if probe:
            endpoint = (spec.api_base, key)
            if endpoint not in probed:
                probed[endpoint] = http_probe(spec.api_base.rstrip("/") + "/models", key)
            problem = probed[endpoint]
        fix = (
            "check FLEET_LM_API_BASE, FLEET_LM_API_KEY and that the endpoint is up"
            if problem
            else ""
        )
        checks.append(ModelInUse(role, spec.model, spec.api_base, problem=problem, fix=fix))
    return checks


def check_jev(config: EffectiveConfig, *, probe: bool = True) -> JevCheck:
    """Is Jev on (a key is set), and (``probe``) does ``GET /v1/models`` answer with it?"""
    from fleet_core.api.records import JevCheck
    from fleet_core.engine.jev import JevError, jev_client

    settings = config.settings.jev
    try:
        client = jev_client(config)
    except JevError as exc:
        return JevCheck(True, settings.base_url, settings.model, exc.message)
    if client is None:
        return JevCheck(False)
    if not probe:
        return JevCheck(True, client.base_url, client.model)
    try:
        models = client.models(remaining_seconds=5.0)
    except JevError as exc:
        return JevCheck(True, client.base_url, client.model, exc.message)
    return JevCheck(True, client.base_url, client.model, "", tuple(models))


def check_tracing_store(config: EffectiveConfig) -> str:
    """Open the configured MLflow store and its experiments: '' when that works, else why
    (doctor; for a local store this creates it)."""
    from fleet_core.observability.tracing import create_tracer

    try:
        tracer: Any = create_tracer(config)
        backend = getattr(tracer, "backend", None) if tracer.enabled else None
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


def local_tracing_store(config: EffectiveConfig) -> tuple[str, str]:
    """The local MLflow store's tracking URI and artifact root (``mlflow ui``)."""
    from fleet_core.observability.destination import local_paths

    return local_paths(config.state_dir)


def describe_sandbox(config: EffectiveConfig) -> SandboxIsolation:
    """The local sandbox's isolation layers (bwrap, cgroups, rlimits, or ``refused``)."""
    from fleet_core.api.records import SandboxIsolation
    from fleet_core.sandbox.isolation import describe_local_isolation

    allowed = config.settings.sandbox.allow_unisolated
    return SandboxIsolation.of(describe_local_isolation(allow_unisolated=allowed))


async def probe_sandbox(config: EffectiveConfig) -> str:
    """Run ``print(6*7)`` in a throwaway sandbox: '' when it printed 42, else why."""
    import tempfile

    from fleet_core.sandbox import create_sandbox
    from fleet_core.sandbox.base import SandboxSpec

    try:
        with tempfile.TemporaryDirectory(prefix="fleet-doctor-") as tmp:
            root = Path(tmp)
            for name in ("files", "artifacts", "memory", "skills"):
                (root / name).mkdir()
            spec = SandboxSpec(session_id="doctor", agent_id="root", workspace=root)
            sandbox = create_sandbox(spec, config.settings.sandbox)
            try:
                await sandbox.start()
                result = await sandbox.execute("print(6*7)", timeout=30)
            finally:
                await sandbox.destroy()
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return "" if "42" in result.stdout else f"unexpected output {result.stdout[:200]!r}"
