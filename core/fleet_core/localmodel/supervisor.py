"""The supervised local model server: one per home directory, shared by every process.

:class:`LocalModel` starts a llama.cpp server (the first runtime this CPU can run:
:mod:`fleet_core.localmodel.runtime`) on 127.0.0.1 and an ephemeral port, with one slot, a bounded
prompt cache and slot save/restore beside the weights, through the guard
(:mod:`fleet_core.localmodel.guard`), waits until ``GET /v1/models`` answers, and records it in
``<home>/server.json``. A runtime that dies of SIGILL (or another crash signal) while it loads is
recorded as unable to run on this CPU, and the next one is started. Everything that
decides to start, reuse or stop runs under ``<home>/server.lock``, so two processes never start
two servers: the second finds the first's state, checks its health and reuses it.

A process that uses the server registers as a user (``<home>/users/<pid>``) and removes itself
in :meth:`LocalModel.release`; the guard stops the server once no user is alive, so neither an
exit nor ``kill -9`` leaves a model process behind. ``fleet-lsp model serve`` pins the server
(it then runs until ``fleet-lsp model stop``).

Identity (docs/security.md, "Another local user and the embedded model"): another local user can
bind the port first or after the server died, and would then receive the Turn's prompts. So
nothing is sent to the port until :func:`verify_server` has proven that the socket listening on
it belongs to the server process the guard started (its inode in ``/proc/net/tcp`` is one of that
process's descriptors), on start, on reuse and before every model call (``EmbeddedLM``). Each
start also makes a random API key, given to the server in its environment (``LLAMA_API_KEY`` for
llama.cpp's server, ``API_KEY`` for llama_cpp.server; never in an argv) and kept in
``server.json`` (``0600`` in a ``0700`` home): the server answers no one without it, and a start
checks that it does refuse a request without the key.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import stat
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from filelock import FileLock, Timeout

from fleet_core.config import EffectiveConfig, LocalModelSettings
from fleet_core.errors import ModelUnavailable
from fleet_core.localmodel import procs
from fleet_core.localmodel.guard import SERVER_PID_FILE, STATE_FILE
from fleet_core.localmodel.runtime import (
    CPUINFO,
    RUNTIMES,
    VERDICTS_FILE,
    Choice,
    Runtime,
    ServerOptions,
    Verdicts,
    by_name,
    choose,
    cpu_flags,
    crash_reason,
    module_runtime,
)
from fleet_core.localmodel.weights import (
    INSTALL_HINT,
    QWEN_CODER_1_5B,
    Progress,
    WeightsSpec,
    assemble,
    assembled,
    parts_installed,
)
from fleet_core.observability.redaction import register_secret

HOST = "127.0.0.1"
_SECRET_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "DATABASE_URL", "CREDENTIAL")
#: The server's per-start key reaches it in an environment variable (``Runtime.key_env``:
#: llama.cpp's server reads ``LLAMA_API_KEY``; llama_cpp.server's pydantic settings ``API_KEY``),
#: so the key never appears in an argv (``ps`` shows argv to everyone).
API_KEY_ENV = "API_KEY"
#: Variables llama_cpp.server (uvicorn's host and port, a settings file that replaces every
#: setting, the key among them) would take over its argv with: never passed on to it; nor any
#: ``LLAMA_ARG_*`` (llama.cpp's server reads every flag from one).
_SERVER_OVERRIDES = ("HOST", "PORT", "CONFIG_FILE")
_SERVER_OVERRIDE_PREFIX = "LLAMA_ARG_"
SLOTS_DIR = "slots"
Holder = Literal["ours", "none", "foreign", "unknown"]


@dataclass(frozen=True, slots=True)
class LocalEndpoint:
    """A running, healthy embedded server."""

    api_base: str  # http://127.0.0.1:<port>/v1
    model_id: str
    port: int
    guard_pid: int
    server_pid: int | None
    pinned: bool
    started_at: float
    reused: bool  # found running (by this or another process) rather than started now
    server_start: int | None = None  # the server's start time (its identity with server_pid)
    api_key: str = field(default="", repr=False)  # this start's key: a secret, never shown
    runtime: str = ""  # which runtime serves it (fleet_core.localmodel.runtime), and its version
    runtime_version: str = ""
    slot_dir: str = ""  # where it saves and restores KV states ('' when it cannot)


@dataclass(frozen=True, slots=True)
class LocalModelStatus:
    """What ``fleet-lsp model status`` and ``doctor`` report (nothing is started for it)."""

    model_id: str
    home: Path
    runtime_installed: bool
    weights_installed: bool  # the part packages
    weights_path: Path | None  # the assembled, verified GGUF
    running: bool
    api_base: str | None = None
    pinned: bool = False
    guard_pid: int | None = None
    server_pid: int | None = None
    rss_bytes: int | None = None
    started_at: float | None = None
    users: tuple[int, ...] = ()
    runtime: str = ""  # the runtime a start would use (or the running server's), with why
    runtime_version: str = ""

    @property
    def available(self) -> bool:
        """Whether a Turn could use it: the runtime and the weights are installed."""
        return self.runtime_installed and (self.weights_installed or self.weights_path is not None)

    def wire(self) -> dict[str, Any]:
        return {
            "modelId": self.model_id,
            "home": str(self.home),
            "available": self.available,
            "runtimeInstalled": self.runtime_installed,
            "weightsInstalled": self.weights_installed,
            "weightsPath": str(self.weights_path) if self.weights_path else None,
            "running": self.running,
            "apiBase": self.api_base,
            "pinned": self.pinned,
            "guardPid": self.guard_pid,
            "serverPid": self.server_pid,
            "rssBytes": self.rss_bytes,
            "startedAt": self.started_at,
            "users": list(self.users),
            "runtime": self.runtime or None,
            "runtimeVersion": self.runtime_version or None,
        }


class LocalModel:
    """The embedded model of one home directory: status, ensure (start or reuse), release, stop.

    Thread-safe; the blocking calls (:meth:`ensure`, :meth:`stop`) belong in a worker thread."""

    def __init__(
        self,
        settings: LocalModelSettings,
        home: Path,
        *,
        weights: WeightsSpec = QWEN_CODER_1_5B,
        python: str = sys.executable,
        poll_seconds: float = 1.0,
        runtimes: tuple[Runtime, ...] = RUNTIMES,
        cpuinfo: Path = CPUINFO,
    ) -> None:
        self.settings = settings
        self.home = home
        self.weights = weights
        self._python = python
        self._runtimes = runtimes
        self._cpuinfo = cpuinfo
        self._poll = poll_seconds
        self._lock = threading.Lock()
        self._endpoint: LocalEndpoint | None = None
        self._guards: list[subprocess.Popen[bytes]] = []  # started here: reaped, never zombies
        self._registered = False

    @classmethod
    def from_config(cls, config: EffectiveConfig) -> LocalModel:
        settings = config.settings.local_model
        home = Path(settings.directory) if settings.directory else config.state_dir / "localmodel"
        if not home.is_absolute():
            home = config.state_dir.parent / home
        return cls(settings, home)

    @property
    def model_id(self) -> str:
        return self.weights.model_id

    # --- fast, no process is started -----------------------------------------------------------

    def runtime_choice(self) -> Choice:
        """The runtimes a start would try, in order (``[local_model] runtime`` and
        ``server_module`` narrow them), and why the others are passed over."""
        if self.settings.server_module:
            runtimes: tuple[Runtime, ...] = (module_runtime(self.settings.server_module),)
        elif self.settings.runtime != "auto":
            runtimes = (by_name(self.settings.runtime, self._runtimes),)
        else:
            runtimes = self._runtimes
        return choose(runtimes, cpu_flags(self._cpuinfo), Verdicts(self.home / VERDICTS_FILE))

    def runtime_installed(self) -> bool:
        return bool(self.runtime_choice().candidates)

    def unavailable_reason(self) -> str:
        """'' when a Turn can use the embedded model, else why not and how to install it."""
        if not self.settings.enabled:
            return "the embedded model is disabled ([local_model] enabled = false)"
        missing = []
        choice = self.runtime_choice()
        if not choice.candidates:
            why = "; ".join(f"{name}: {reason}" for name, reason in choice.skipped)
            missing.append(f"a runtime this CPU can run ({why})")
        if assembled(self.weights, self.home) is None and not parts_installed(self.weights):
            missing.append("its weights")
        if missing:
            return f"the embedded model is not installed ({' and '.join(missing)} missing): " + (
                INSTALL_HINT
            )
        return ""

    def status(self) -> LocalModelStatus:
        self._reap()
        state = self._read_state()
        running = state is not None and procs.alive(state["guard_pid"], state.get("guard_start"))
        server_pid = state.get("server_pid") if state and running else None
        choice = self.runtime_choice()
        runtime = choice.describe()
        version = choice.candidates[0].version() if choice.candidates else ""
        if state and running and state.get("runtime"):
            runtime, version = str(state["runtime"]), str(state.get("runtime_version") or "")
        return LocalModelStatus(
            model_id=self.model_id,
            home=self.home,
            runtime_installed=self.runtime_installed(),
            weights_installed=parts_installed(self.weights),
            weights_path=assembled(self.weights, self.home),
            running=running,
            api_base=state["api_base"] if state and running else None,
            pinned=bool(state and running and state.get("pinned")),
            guard_pid=state["guard_pid"] if state and running else None,
            server_pid=server_pid,
            rss_bytes=procs.rss_bytes(server_pid) if server_pid else None,
            started_at=state.get("started_at") if state and running else None,
            users=tuple(procs.live_users(self.home)) if running else (),
            runtime=runtime,
            runtime_version=version,
        )

    # --- blocking ----------------------------------------------------------------------------

    def ensure(
        self,
        *,
        pin: bool = False,
        progress: Progress | None = None,
        on_start: Callable[[str], None] | None = None,
    ) -> LocalEndpoint:
        """A healthy server: this process's, another's (reused), or one started now (weights
        assembled first, with ``progress``). Registers this process as a user. ``on_start`` is
        told before a server is started (a face's "starting the embedded model…")."""
        with self._lock:
            known = self._endpoint
            if known is not None and not pin and self._guard_alive(known):
                holder, _uid = _holder(known.port, known.server_pid, known.server_start)
                if holder == "ours":
                    return known
            if not self._registered:
                procs.register_user(self.home)  # before the lock: a guard never stops it now
                self._registered = True
            endpoint = self._ensure_locked(pin, progress, on_start)
            self._endpoint = endpoint
            return endpoint

    def release(self) -> None:
        """This process no longer uses the server: unregister, and stop the server right away
        when no other user remains and it is not pinned (else the guard stops it later)."""
        with self._lock:
            if not self._registered:
                return
            procs.unregister_user(self.home)
            self._registered = False
            self._endpoint = None
            try:
                with FileLock(str(self.home / "server.lock"), timeout=5):
                    state = self._read_state()
                    if state and not state.get("pinned") and not procs.live_users(self.home):
                        self._terminate(state)
            except Timeout:
                pass  # someone is starting or stopping it; the guard decides
            self._reap()

    def stop(self) -> bool:
        """Stop the server whoever started it; ``False`` when none was running."""
        with self._lock:
            self._endpoint = None
            self._home_ready()
            with self._file_lock():
                state = self._read_state()
                if state is None:
                    return False
                was_running = procs.alive(state["guard_pid"], state.get("guard_start"))
                self._terminate(state)
            self._reap()
            return was_running

    # --- internals ----------------------------------------------------------------------------

    def _ensure_locked(
        self, pin: bool, progress: Progress | None, on_start: Callable[[str], None] | None
    ) -> LocalEndpoint:
        reason = self.unavailable_reason()
        if reason:
            raise ModelUnavailable(f"No model endpoint is configured and {reason}")
        self._home_ready()
        with self._file_lock():
            self._reap()
            state = self._read_state()
            if state is not None:
                live = procs.alive(state["guard_pid"], state.get("guard_start"))
                keyed = isinstance(state.get("api_key"), str) and bool(state["api_key"])
                if live and keyed and isinstance(state.get("port"), int):
                    # Reuse when the socket on the port is the recorded server's, never on an
                    # HTTP answer (nothing is sent before that proof; and the server serves one
                    # request at a time and holds /v1/models while another process's completion
                    # runs, so a busy server would look dead and be killed mid-Turn).
                    port = state["port"]
                    holder, uid = _holder(port, state.get("server_pid"), state.get("server_start"))
                    if holder == "ours":
                        if pin and not state.get("pinned"):
                            state["pinned"] = True
                            self._write_state(state)
                        return _endpoint(state, reused=True)
                    if holder in ("foreign", "unknown"):
                        self._terminate(state)  # ours is gone; the next start takes a new port
                        raise _refusal(port, holder, uid)
                # dead, not listening, or an older version's server without a key (it answers
                # every local user): stop it and start afresh
                self._terminate(state)
            model_path = assemble(self.weights, self.home, progress=progress)
            if on_start is not None:
                on_start(self.model_id)
            return self._start(model_path, pin)

    def _start(self, model_path: Path, pin: bool) -> LocalEndpoint:
        """Start the first runtime this CPU can run; one that dies of a crash signal while it
        loads is recorded (never tried again on this CPU) and the next one is started."""
        choice = self.runtime_choice()
        flags = cpu_flags(self._cpuinfo)
        verdicts = Verdicts(self.home / VERDICTS_FILE)
        crashes: list[str] = []
        for runtime in choice.candidates:
            try:
                return self._start_runtime(runtime, model_path, pin)
            except _RuntimeCrashed as crash:
                verdicts.record(runtime, flags, crash.reason)
                crashes.append(f"{runtime.name} {crash.reason}")
        tried = "; ".join(crashes) or choice.describe()
        raise ModelUnavailable(
            f"No runtime of the embedded model runs on this CPU ({tried}). Build one for it: "
            "scripts/local-model build (docs/local-model.md, 'The runtime')."
        )

    def _start_runtime(self, runtime: Runtime, model_path: Path, pin: bool) -> LocalEndpoint:
        port = _free_port()
        api_base = f"http://{HOST}:{port}/v1"
        api_key = secrets.token_urlsafe(32)
        register_secret(api_key)  # redacted from logs, traces, events and errors from now on
        slots = self.home / SLOTS_DIR
        slots.mkdir(mode=0o700, exist_ok=True)
        options = ServerOptions(
            model=model_path,
            alias=self.model_id,
            host=HOST,
            port=port,
            n_ctx=self.settings.n_ctx,
            n_threads=self.settings.n_threads,
            cache_ram_mib=self.settings.cache_ram_mib,
            slot_save_path=slots,
        )
        server, server_env = runtime.command(self._python, options)
        guard_argv = [
            self._python, "-P", "-m", "fleet_core.localmodel.guard",
            "--home", str(self.home), "--poll", str(self._poll), "--", *server,
        ]  # fmt: skip
        guard = subprocess.Popen(
            guard_argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=self.home,
            # the guard's child inherits it: the key only in the variable its runtime reads
            env={**_child_environ(), **server_env, runtime.key_env(): api_key},
            start_new_session=True,  # a terminal's Ctrl-C goes to the users, not to the guard
        )
        self._guards.append(guard)
        guard_start = procs.start_time(guard.pid)
        started = time.time()
        deadline = time.monotonic() + self.settings.start_timeout_seconds
        server_pid: int | None = None
        server_start: int | None = None
        while True:
            exited = guard.poll() is not None
            if server_pid is None and not exited:
                server_pid = self._server_pid(guard.pid)
                server_start = procs.start_time(server_pid) if server_pid else None
            # Nothing is sent before the socket on the port is proven to be the server's. Until
            # the server is known, a listener is not judged (it may be the server's, just now);
            # once the guard has exited, its server is gone and any listener is another's.
            holder: Holder = "none"
            uid: int | None = None
            if server_pid is not None or exited:
                holder, uid = _holder(port, None if exited else server_pid, server_start)
            if holder in ("foreign", "unknown"):
                procs.terminate(guard.pid, guard_start)
                raise _refusal(port, holder, uid)
            if exited:
                crashed = crash_reason(guard.returncode)
                if crashed:
                    raise _RuntimeCrashed(crashed)
                raise ModelUnavailable(
                    f"The embedded model server ({runtime.name}) exited during start (code "
                    f"{guard.returncode}): {self._log_tail()}"
                )
            if holder == "ours" and _healthy(api_base, api_key):
                if _answers_without_key(api_base):
                    procs.terminate(guard.pid, guard_start)
                    raise ModelUnavailable(
                        f"The embedded model server on {HOST}:{port} answers requests without "
                        f"its API key (it did not take {runtime.key_env()} from its "
                        "environment), so every local user could use it; it was stopped. Check "
                        f"the runtime's version ({runtime.package} {runtime.version()})."
                    )
                break
            if time.monotonic() > deadline:
                procs.terminate(guard.pid, guard_start)
                raise ModelUnavailable(
                    f"The embedded model server did not answer within "
                    f"{self.settings.start_timeout_seconds:.0f} s ([local_model] "
                    f"start_timeout_seconds): {self._log_tail()}"
                )
            time.sleep(0.25)
        state = {
            "guard_pid": guard.pid,
            "guard_start": guard_start,
            "server_pid": server_pid,
            "port": port,
            "api_base": api_base,
            "api_key": api_key,
            "model_id": self.model_id,
            "model_path": str(model_path),
            "runtime": runtime.name,
            "runtime_version": runtime.version(),
            "slot_dir": str(slots) if runtime.dialect == "llama-server" else "",
            "pinned": pin,
            "started_at": started,
            "ready_seconds": round(time.time() - started, 2),
        }
        self._write_state(state)
        return _endpoint(state, reused=False)

    def _guard_alive(self, endpoint: LocalEndpoint) -> bool:
        state = self._read_state()
        return (
            state is not None
            and state.get("guard_pid") == endpoint.guard_pid
            and procs.alive(endpoint.guard_pid, state.get("guard_start"))
        )

    def _terminate(self, state: dict[str, Any]) -> None:
        procs.terminate(state["guard_pid"], state.get("guard_start"), grace=15.0)
        server_pid = state.get("server_pid")
        if isinstance(server_pid, int) and procs.alive(server_pid, state.get("server_start")):
            procs.terminate(server_pid, state.get("server_start"))
        (self.home / STATE_FILE).unlink(missing_ok=True)

    def _server_pid(self, guard_pid: int) -> int | None:
        try:
            owner, pid = (self.home / SERVER_PID_FILE).read_text(encoding="ascii").split()
        except (OSError, ValueError):
            return None
        return int(pid) if owner == str(guard_pid) else None

    def _read_state(self) -> dict[str, Any] | None:
        path = self.home / STATE_FILE
        try:
            with path.open(encoding="utf-8") as file:
                info = os.fstat(file.fileno())
                if info.st_uid != os.geteuid() or info.st_mode & 0o022:
                    return None  # another user could have written it: never trusted
                state = json.loads(file.read())
        except (OSError, ValueError):
            return None
        if not isinstance(state, dict) or not isinstance(state.get("guard_pid"), int):
            return None
        if info.st_mode & 0o044:  # others could read it (an older version's file): its key is
            state.pop("api_key", None)  # no secret, so its server is restarted with a new one
        return state

    def _write_state(self, state: dict[str, Any]) -> None:
        if isinstance(state.get("server_pid"), int):
            state["server_start"] = procs.start_time(state["server_pid"])
        tmp = self.home / f".{STATE_FILE}.{os.getpid()}"
        tmp.unlink(missing_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:  # it holds the key: owner only
            out.write(json.dumps(state, indent=1))
        os.replace(tmp, self.home / STATE_FILE)

    def _home_ready(self) -> None:
        """The home exists, belongs to this user and is ``0700``: ``server.json`` (the key,
        which server is ours) must be neither readable nor replaceable by another user."""
        self.home.mkdir(parents=True, exist_ok=True, mode=0o700)
        info = self.home.stat()
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
            raise ModelUnavailable(
                f"The embedded model's directory {self.home} is not a directory of this user "
                f"(uid {os.geteuid()}); refusing to keep its server's key there. Set "
                "[local_model] directory to a folder of your own."
            )
        if stat.S_IMODE(info.st_mode) != 0o700:
            os.chmod(self.home, 0o700)

    def _file_lock(self) -> FileLock:
        return FileLock(
            str(self.home / "server.lock"), timeout=self.settings.start_timeout_seconds + 60
        )

    def _reap(self) -> None:
        self._guards = [guard for guard in self._guards if guard.poll() is None]

    def _log_tail(self, lines: int = 5) -> str:
        try:
            with (self.home / "server.log").open("rb") as log:
                log.seek(max(0, log.seek(0, os.SEEK_END) - 4000))
                text = log.read().decode("utf-8", "replace")
        except OSError:
            return "(no server log)"
        tail = " | ".join(line.strip() for line in text.splitlines()[-lines:] if line.strip())
        return f"{tail or '(empty log)'} (full log: {self.home / 'server.log'})"


def _endpoint(state: dict[str, Any], *, reused: bool) -> LocalEndpoint:
    register_secret(state["api_key"])  # also a key read from another process's server.json
    return LocalEndpoint(
        api_base=state["api_base"],
        model_id=state["model_id"],
        port=state["port"],
        guard_pid=state["guard_pid"],
        server_pid=state.get("server_pid"),
        pinned=bool(state.get("pinned")),
        started_at=state.get("started_at", 0.0),
        reused=reused,
        server_start=state.get("server_start"),
        api_key=state["api_key"],
        runtime=str(state.get("runtime") or ""),
        runtime_version=str(state.get("runtime_version") or ""),
        slot_dir=str(state.get("slot_dir") or ""),
    )


class _RuntimeCrashed(Exception):
    """The server died of a crash signal while it loaded: this runtime cannot run here."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def verify_server(port: int, server_pid: int | None, server_start: int | None) -> None:
    """Return when the socket listening on 127.0.0.1:``port`` belongs to the server process
    ``server_pid`` (started at ``server_start``); else ``ModelUnavailable`` saying why, and the
    caller sends nothing. Cheap (``/proc`` reads, no connection): run before every request."""
    holder, uid = _holder(port, server_pid, server_start)
    if holder != "ours":
        raise _refusal(port, holder, uid)


def _holder(
    port: int, server_pid: int | None, server_start: int | None
) -> tuple[Holder, int | None]:
    """Who listens on 127.0.0.1:``port``: ``ours`` (only the server ``server_pid``, alive since
    ``server_start``), ``none``, ``foreign`` (another process; its uid) or ``unknown`` (the
    sockets cannot be read, so nothing is proven)."""
    listeners = procs.loopback_listeners(port)
    if listeners is None:
        return "unknown", None
    if not listeners:
        return "none", None
    owned: set[int] | None = None
    if server_pid is not None and procs.alive(server_pid, server_start):
        owned = procs.socket_inodes(server_pid)
        if not procs.alive(server_pid, server_start):  # its descriptors were another's
            owned = None
    mine = {listener.inode for listener in listeners} & (owned or set())
    ipv4_mine = any(
        listener.inode in mine and listener.address in (HOST, procs.IPV4_ANY)
        for listener in listeners
    )
    # A dual-stack [::] socket cannot be bound beside the server's 127.0.0.1 one, so an IPv6
    # wildcard next to it is IPv6-only and never receives a connection to 127.0.0.1.
    foreign = [
        listener
        for listener in listeners
        if listener.inode not in mine and not (ipv4_mine and listener.address == "::")
    ]
    if foreign:
        return "foreign", foreign[0].uid
    return ("ours", None) if mine else ("none", None)


def _refusal(port: int, holder: Holder, uid: int | None) -> ModelUnavailable:
    where = f"{HOST}:{port}"
    if holder == "foreign":
        who = "another process" + (f", uid {uid}," if uid is not None else "")
        return ModelUnavailable(
            f"Refusing the embedded model server on {where}: the listening socket does not "
            f"belong to the server fleet-lsp started ({who} holds the port). Nothing was sent "
            "to it.",
            port=port,
        )
    if holder == "unknown":
        return ModelUnavailable(
            f"Refusing the embedded model server on {where}: its listening socket cannot be "
            "checked (/proc/net/tcp is not readable), so it cannot be proven to be the server "
            "fleet-lsp started. Nothing was sent to it.",
            port=port,
        )
    return ModelUnavailable(
        f"The embedded model server on {where} is no longer running (nothing of it listens on "
        "its port); nothing was sent. The next Turn starts it again.",
        port=port,
    )


def _healthy(api_base: str, api_key: str, timeout: float = 2.0) -> bool:
    """``GET <api_base>/models`` with the key answers 200 with a JSON model list (asked only of
    a server whose socket was proven ours: :func:`verify_server`)."""
    request = urllib.request.Request(  # noqa: S310 - http on loopback
        f"{api_base}/models", headers={"Authorization": f"Bearer {api_key}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - loopback
            body = json.loads(response.read(1_000_000) or b"{}")
            return response.status == 200 and isinstance(body, dict) and "data" in body
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _answers_without_key(api_base: str, timeout: float = 5.0) -> bool:
    """Whether ``GET <api_base>/models`` without the key is answered rather than refused (401):
    the key would then protect nothing."""
    try:
        with urllib.request.urlopen(f"{api_base}/models", timeout=timeout):  # noqa: S310 - loopback
            return True
    except urllib.error.HTTPError as exc:
        return exc.code not in (401, 403)
    except (urllib.error.URLError, OSError):
        return False


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def _child_environ() -> dict[str, str]:
    """This environment without secrets (the model server gets only its own key, added by the
    caller), without the variables that would override the server's argv, and offline."""
    from fleet_core.offline import offline_environ

    return {
        name: value
        for name, value in offline_environ().items()
        if not any(marker in name.upper() for marker in _SECRET_MARKERS)
        and name.upper() not in _SERVER_OVERRIDES
        and not name.upper().startswith(_SERVER_OVERRIDE_PREFIX)
    }
