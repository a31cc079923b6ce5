"""Checks of the configuration and of the services it names, for ``doctor`` and
``fleet/debug/info``: synchronous and blocking (HTTP probes, ``bwrap --version``, MLflow store
creation), so call them from a thread. None needs a runtime or the store."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from fleet_core.config import EffectiveConfig
from fleet_core.errors import FleetError, InvalidInput, ModelUnavailable
from fleet_core.localmodel.selection import ModelInUse, models_in_use
from fleet_core.net import http_probe

__all__ = [
    "check_blob_store",
    "check_daytona",
    "check_jev",
    "check_models",
    "check_tracing_store",
    "check_tracking_server",
    "describe_sandbox",
    "local_tracing_store",
    "models_in_use",
    "probe_blob_store",
    "probe_sandbox",
    "redacted_uri",
    "shared_tracking_database",
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


# -- services a deployment shares (docs/deployment.md) -----------------------------------------

_BODY_LIMIT = 1_000_000


class _Answer:
    """One HTTP answer: status (0: none), the JSON body if it was JSON, and a short reason."""

    def __init__(self, status: int, body: Any = None, reason: str = "") -> None:
        self.status, self.body, self.reason = status, body, reason


def _http(
    url: str,
    headers: Mapping[str, str] | None = None,
    *,
    method: str = "GET",
    payload: Any = None,
    timeout: float = 5.0,
) -> _Answer:
    """One bounded request, never following redirects (credentials go to the configured address
    only); the reason never holds a header value."""
    import urllib.error
    import urllib.request

    class NoRedirects(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None

    data = json.dumps(payload).encode() if payload is not None else None
    request = urllib.request.Request(url, data=data, method=method)  # noqa: S310
    for name, value in (headers or {}).items():
        request.add_header(name, value)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    opener = urllib.request.build_opener(NoRedirects())
    try:
        with opener.open(request, timeout=timeout) as response:
            raw = response.read(_BODY_LIMIT)
            status = int(response.status)
    except urllib.error.HTTPError as exc:
        return _Answer(exc.code, None, f"HTTP {exc.code}")
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        return _Answer(0, None, f"unreachable ({getattr(exc, 'reason', exc)})")
    try:
        body = json.loads(raw) if raw.strip() else None
    except ValueError:
        body = raw.decode("utf-8", "replace").strip()[:200]
    return _Answer(status, body, "" if 200 <= status < 300 else f"HTTP {status}")


def mlflow_auth_headers(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The credentials MLflow's client sends to a tracking server, from the same variables:
    ``MLFLOW_TRACKING_TOKEN`` (bearer) or ``MLFLOW_TRACKING_USERNAME`` and ``..._PASSWORD``."""
    environ = os.environ if environ is None else environ
    token = environ.get("MLFLOW_TRACKING_TOKEN")
    if token:
        return {"Authorization": f"Bearer {token}"}
    user, password = (
        environ.get("MLFLOW_TRACKING_USERNAME"),
        environ.get("MLFLOW_TRACKING_PASSWORD"),
    )
    if user and password:
        pair = base64.b64encode(f"{user}:{password}".encode()).decode()
        return {"Authorization": f"Basic {pair}"}
    return {}


def redacted_uri(uri: str) -> str:
    """A URI safe to show (a password in it is replaced)."""
    from fleet_core.observability.redaction import NO_SECRETS

    return NO_SECRETS.text(uri)


def shared_tracking_database(config: EffectiveConfig) -> bool:
    """Whether the default (local) trace destination is MLflow's store in the shared
    PostgreSQL database (the database is PostgreSQL)."""
    from fleet_core.observability.destination import shared_database_uri

    return shared_database_uri(config) is not None


def check_tracking_server(
    uri: str, *, environ: Mapping[str, str] | None = None, timeout: float = 5.0
) -> str:
    """'' when the MLflow tracking server at ``uri`` is healthy (``GET /health``: any 2xx, its
    plain ``OK`` included) and answers an authenticated API call (an experiment search with the
    client's credentials) with JSON; else why, naming the step."""
    base = uri.rstrip("/")
    health = _http(f"{base}/health", timeout=timeout)
    if health.reason:
        return f"/health: {health.reason}"
    search = _http(
        f"{base}/api/2.0/mlflow/experiments/search",
        mlflow_auth_headers(environ),
        method="POST",
        payload={"max_results": 1},
        timeout=timeout,
    )
    if search.status in (401, 403):
        return (
            f"the API refused the credentials (HTTP {search.status}); set "
            "MLFLOW_TRACKING_TOKEN, or MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD"
        )
    if search.reason:
        return f"API call (experiments search): {search.reason}"
    if not isinstance(search.body, dict):
        return "API call (experiments search) answered, but not with MLflow's JSON"
    return ""


def check_daytona(config: EffectiveConfig, *, timeout: float = 5.0) -> str:
    """'' when the Daytona API at ``sandbox.daytona_api_url`` accepts the API key (an
    authenticated sandbox list) and the snapshot ``sandbox.daytona_snapshot`` exists and is
    active; else why. The key is sent to the configured address only and never shown."""
    settings = config.settings.sandbox
    secret = config.secrets.daytona_api_key
    if secret is None:
        return "FLEET_DAYTONA_API_KEY is not set"
    api = (settings.daytona_api_url or "https://app.daytona.io/api").rstrip("/")
    headers = {"Authorization": f"Bearer {secret.get_secret_value()}"}
    if settings.daytona_org_id:
        headers["X-Daytona-Organization-ID"] = settings.daytona_org_id
    listed = _http(f"{api}/sandbox?labels={quote('{}')}", headers, timeout=timeout)
    if listed.status in (401, 403):
        return f"the API refused the key (HTTP {listed.status}): check FLEET_DAYTONA_API_KEY"
    if listed.reason:
        return f"{api}: {listed.reason}"
    snapshot = settings.daytona_snapshot
    found = _http(f"{api}/snapshots/{quote(snapshot, safe='')}", headers, timeout=timeout)
    if found.status == 404:
        return (
            f"snapshot {snapshot!r} does not exist; build it (docs/sandbox.md, 'Daytona') or "
            "set sandbox.daytona_snapshot"
        )
    if found.reason:
        return f"snapshot {snapshot!r}: {found.reason}"
    state = found.body.get("state") if isinstance(found.body, dict) else None
    if state != "active":
        return f"snapshot {snapshot!r} is {state!r}, not active"
    return ""


async def check_blob_store(config: EffectiveConfig) -> tuple[str, str]:
    """The configured workspace content store (docs/storage.md): its kind, and '' when a probe
    blob is stored and read back (``probe_blob_store``), else why. Opens the store."""
    from fleet_core.api.runtime import FleetRuntime
    from fleet_core.api.threads import in_thread

    runtime = await FleetRuntime.open(config)
    try:
        return await in_thread(probe_blob_store, runtime.store)
    finally:
        await runtime.close()


def probe_blob_store(store: Any) -> tuple[str, str]:
    """The store's blob backend (``local``: none, nothing shared) and '' when it stores and
    returns a probe blob, else why. The probe's bytes are unique (nothing else refers to them);
    the transaction is rolled back and a backend outside the database deletes the probe, so
    nothing is left behind. Blocking: call it from a thread."""
    import hashlib
    import tempfile
    import uuid
    from datetime import UTC, datetime

    from fleet_core.blobs.base import ContentEntry, PendingFile
    from fleet_core.store.content import ensure_blob

    blobs = getattr(store, "blobs", None)
    if blobs is None:
        return "local", ""
    data = f"fleet-lsp doctor probe {uuid.uuid4().hex}\n".encode()
    digest = hashlib.sha256(data).hexdigest()
    try:
        with tempfile.TemporaryDirectory(prefix="fleet-doctor-") as tmp:
            source = Path(tmp) / "probe"
            source.write_bytes(data)
            with store.engine.connect() as conn:
                transaction = conn.begin()
                try:
                    entry = ContentEntry(".doctor-probe", digest, len(data))
                    ensure_blob(conn, blobs, PendingFile(entry, source), datetime.now(UTC))
                    back = b"".join(blobs.chunks(conn, digest))
                    if blobs.kind != "postgresql":
                        blobs.delete(conn, [digest])
                finally:
                    transaction.rollback()
    except FleetError as exc:
        return str(blobs.kind), exc.message
    except Exception as exc:  # the first line only: a database error's SQL stays out
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        return str(blobs.kind), f"{type(exc).__name__}: {first}"
    if back != data:
        return str(blobs.kind), "the probe blob came back different"
    return str(blobs.kind), ""
