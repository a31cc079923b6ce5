"""Daytona backend support: options, the shared SDK client, retries, the allocation journal.

Only :mod:`fleet_core.sandbox.daytona` and this module import the ``daytona`` SDK.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import socket
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from daytona import AsyncDaytona, DaytonaConfig
from daytona.common.errors import (
    DaytonaConnectionError,
    DaytonaError,
    DaytonaNotFoundError,
    DaytonaRateLimitError,
    DaytonaTimeoutError,
)
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_random_exponential

from fleet_core.config import SandboxSettings
from fleet_core.sandbox.errors import SandboxUnavailableError

T = TypeVar("T")

DEFAULT_API_URL = "https://app.daytona.io/api"
API_KEY_ENV = "FLEET_DAYTONA_API_KEY"
APP_LABEL = "fleet-lsp"
_SAFE_NAME = re.compile(r"[^A-Za-z0-9_.-]")


@dataclass(frozen=True)
class DaytonaOptions:
    """Everything the backend needs, resolved from ``[sandbox]`` settings and the environment.

    ``api_key`` is the secret (``FLEET_DAYTONA_API_KEY``); it is never printed (``repr`` hides
    it) and is scrubbed from every error message the backend raises.
    """

    api_key: str = field(repr=False)
    api_url: str = DEFAULT_API_URL
    organization_id: str | None = None
    target: str | None = None
    snapshot: str = "fleet-lsp-python311-v1"
    state_dir: Path = Path(".fleet")
    workdir: str = "/workspace"
    create_timeout_s: float = 60.0
    lifecycle_timeout_s: float = 60.0
    exec_timeout_s: int = 60
    transfer_timeout_s: int = 1800
    boot_timeout_s: int = 60
    root_auto_stop_minutes: int = 30
    child_ttl_minutes: int = 30
    journal_ttl_s: float = 4 * 3600.0
    retry_attempts: int = 3
    retry_wait_s: float = 0.5
    transfer_batch_files: int = 100
    transfer_batch_bytes: int = 50_000_000

    @classmethod
    def from_settings(
        cls,
        settings: SandboxSettings,
        *,
        api_key: str | None = None,
        state_dir: Path | None = None,
        **overrides: Any,
    ) -> DaytonaOptions:
        # Through the config loader only: it withholds a key of the user's environment from an
        # api_url a workspace file set (fleet_core.config's key-binding rule).
        key = api_key or _key_from_config()
        if not key:
            raise SandboxUnavailableError(
                f"sandbox.backend = 'daytona' needs an API key: set {API_KEY_ENV} "
                "(environment or .env; a key from your environment is not sent to an api_url a "
                "workspace file set, see `fleet-lsp config show`)"
            )
        if state_dir is None:
            state_dir = Path(os.environ.get("FLEET_STATE_DIR") or ".fleet")
        values: dict[str, Any] = {
            "api_key": key,
            "api_url": settings.daytona_api_url or DEFAULT_API_URL,
            "organization_id": settings.daytona_org_id,
            "target": settings.daytona_target,
            "snapshot": settings.daytona_snapshot,
            "state_dir": state_dir.absolute(),
        }
        return cls(**(values | overrides))

    def scrub(self, text: str) -> str:
        """``text`` with the API key (and any bearer token) removed."""
        if self.api_key:
            text = text.replace(self.api_key, "***")
        return re.sub(r"(?i)(bearer\s+)[^\s'\"]+", r"\1***", text)


def _key_from_config() -> str | None:
    """The key from ``.env`` through the project's config loader (which reads it as a secret)."""
    try:
        from fleet_core.config import load_config

        secret = load_config().secrets.daytona_api_key
    except Exception:
        return None
    return secret.get_secret_value() if secret is not None else None


# -- the shared client -------------------------------------------------------------------------
@dataclass
class _Lease:
    client: AsyncDaytona
    users: int = 0


_CLIENTS: dict[tuple[Any, ...], _Lease] = {}
_PREFLIGHT: dict[tuple[Any, ...], dict[str, Any]] = {}


def _client_key(options: DaytonaOptions) -> tuple[Any, ...]:
    loop = asyncio.get_running_loop()
    return (id(loop), options.api_key, options.api_url, options.organization_id, options.target)


def acquire_client(options: DaytonaOptions) -> AsyncDaytona:
    """One ``AsyncDaytona`` per credentials and event loop (each opens its own connections)."""
    key = _client_key(options)
    lease = _CLIENTS.get(key)
    if lease is None:
        config = DaytonaConfig(
            api_key=options.api_key,
            api_url=options.api_url,
            organization_id=options.organization_id,
            target=options.target,
        )
        try:
            lease = _Lease(AsyncDaytona(config))
        except DaytonaError as exc:
            raise SandboxUnavailableError(
                "Could not set up the Daytona client: " + options.scrub(str(exc))
            ) from None
        _CLIENTS[key] = lease
    lease.users += 1
    return lease.client


async def release_client(options: DaytonaOptions, client: AsyncDaytona) -> None:
    with contextlib.suppress(RuntimeError):
        key = _client_key(options)
        lease = _CLIENTS.get(key)
        if lease is None or lease.client is not client:
            return
        lease.users -= 1
        if lease.users > 0:
            return
        del _CLIENTS[key]
    with contextlib.suppress(Exception):
        await client.close()  # type: ignore[no-untyped-call]


async def preflight_snapshot(client: AsyncDaytona, options: DaytonaOptions) -> dict[str, Any]:
    """Check (once per process and credentials) that the snapshot exists and is active."""
    key = (options.api_key, options.api_url, options.organization_id, options.snapshot)
    cached = _PREFLIGHT.get(key)
    if cached is not None:
        return cached
    try:
        snapshot = await with_retries(
            options, lambda: client.snapshot.get(options.snapshot), what="snapshot lookup"
        )
    except DaytonaNotFoundError:
        raise SandboxUnavailableError(
            f"Daytona snapshot {options.snapshot!r} does not exist; build it (see docs/sandbox.md, "
            "'Daytona') or set sandbox.daytona_snapshot"
        ) from None
    except DaytonaError as exc:
        raise SandboxUnavailableError(
            f"Daytona snapshot {options.snapshot!r} lookup failed: " + options.scrub(str(exc))
        ) from None
    state = str(getattr(snapshot.state, "value", snapshot.state))
    if state != "active":
        raise SandboxUnavailableError(
            f"Daytona snapshot {options.snapshot!r} is {state!r}, not active"
        )
    identity = {
        "name": options.snapshot,
        "id": str(snapshot.id),
        "cpu": snapshot.cpu,
        "mem": snapshot.mem,
        "disk": snapshot.disk,
    }
    _PREFLIGHT[key] = identity
    return identity


# -- retries (idempotent calls only) -------------------------------------------------------------
def is_transient(exc: BaseException) -> bool:
    """Worth retrying: connection trouble, timeouts, rate limits, 5xx answers."""
    if isinstance(exc, DaytonaConnectionError | DaytonaTimeoutError | DaytonaRateLimitError):
        return True
    if isinstance(exc, DaytonaError):
        status = exc.status_code
        return status is not None and status >= 500
    return False


async def with_retries(
    options: DaytonaOptions, call: Callable[[], Awaitable[T]], *, what: str
) -> T:
    """Run an *idempotent* SDK call with jittered exponential backoff on transient errors.

    Never use this for ``run_code`` or ``create``: they are not idempotent.
    """
    del what  # for readers and future logging
    retrying = AsyncRetrying(
        stop=stop_after_attempt(options.retry_attempts),
        wait=wait_random_exponential(multiplier=options.retry_wait_s, max=8 * options.retry_wait_s),
        retry=retry_if_exception(is_transient),
        reraise=True,
    )
    async for attempt in retrying:
        with attempt:
            return await call()
    raise AssertionError("unreachable")  # pragma: no cover


# -- the allocation journal ------------------------------------------------------------------
@dataclass
class Allocation:
    """One journal entry: written ``requested`` before create, ``ready`` after it."""

    session_id: str
    agent_id: str
    parent_agent_id: str | None
    alloc_id: str
    labels: dict[str, str]
    status: str = "requested"
    sandbox_id: str | None = None
    requested_at: float = field(default_factory=time.time)
    expires_at: float = 0.0
    owner_pid: int = field(default_factory=os.getpid)
    owner_host: str = field(default_factory=socket.gethostname)

    def owner_alive(self) -> bool:
        if self.owner_host != socket.gethostname():
            return True  # cannot tell: trust the expiry
        try:
            os.kill(self.owner_pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def orphaned(self, now: float) -> bool:
        return now >= self.expires_at or not self.owner_alive()


class AllocationJournal:
    """``<state_dir>/allocations/<session>--<agent>.json``: what this machine asked Daytona for."""

    def __init__(self, state_dir: Path) -> None:
        self.dir = state_dir / "allocations"

    def _path(self, session_id: str, agent_id: str) -> Path:
        name = f"{_SAFE_NAME.sub('_', session_id)}--{_SAFE_NAME.sub('_', agent_id)}.json"
        return self.dir / name

    def get(self, session_id: str, agent_id: str) -> Allocation | None:
        return _load(self._path(session_id, agent_id))

    def put(self, entry: Allocation) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        path = self._path(entry.session_id, entry.agent_id)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(asdict(entry), sort_keys=True))
        os.replace(tmp, path)

    def remove(self, entry: Allocation) -> None:
        path = self._path(entry.session_id, entry.agent_id)
        current = _load(path)
        if current is not None and current.alloc_id == entry.alloc_id:
            path.unlink(missing_ok=True)

    def entries(self, session_id: str | None = None) -> Iterator[Allocation]:
        if not self.dir.is_dir():
            return
        for path in sorted(self.dir.glob("*.json")):
            entry = _load(path)
            if entry is not None and (session_id is None or entry.session_id == session_id):
                yield entry


def _load(path: Path) -> Allocation | None:
    try:
        data = json.loads(path.read_text())
        return Allocation(**data)
    except (OSError, ValueError, TypeError):
        return None
