"""Shared helpers for the crash-recovery and load suites: the real server over stdio with a raw
JSON-RPC client (a reader thread, requests as futures, server requests answered), and
inspection of what a server leaves behind: processes, cgroups, temp files, child workspaces and
the store's integrity."""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from fleet_core.engine.scripted_lm import action, route
from tests.lsp.test_turns import QUICK_CODE

REPO = Path(__file__).resolve().parents[2]
SALES = REPO / "fleet_lsp" / "examples" / "sales.csv"
SLOW_TASK = "SLOWCRASH: compute the regional revenue table slowly and save it as an artifact."
# a Turn that begins rewriting the quickstart's artifact in place and is still writing it
TORN_TASK = "TORNWRITE: rewrite the regional revenue table."
TORN_CODE = (
    "import time\n"
    "handle = open('artifacts/revenue_by_region.csv', 'w')\n"
    "handle.write('region,rev')\n"
    "handle.flush()\n"
    "time.sleep(120)"
)

# the quickstart cell of tests/lsp/test_turns.py, made repeatable: each rule is one reply reused
# forever (a reply list is consumed once per server process), so the cell submits itself
ROOT_SUBMIT = "\nSUBMIT(answer=totals.to_string(index=False), learned_skill_note='groupby+sum')"
SLOW_CODE = (
    "import time\ntime.sleep(0.6)\n"
    + QUICK_CODE.replace("REGION=North check", "NORTH-SLOW check").replace(
        "REGION=South check", "SOUTH-SLOW check"
    )
    + "\ntime.sleep(0.3)"
)


def _child(region: str, delay: float) -> str:
    return action(
        "import csv, time\n"
        f"time.sleep({delay})\n"
        "rows = [r for r in csv.DictReader(open('files/sales.csv')) "
        f"if r['region'] == '{region}']\n"
        "total = round(sum(float(r['revenue']) for r in rows), 2)\n"
        f"open('artifacts/{region}.txt', 'w').write(str(total))\n"
        f"SUBMIT(findings='{region}=' + str(total))"
    )


SCRIPT: dict[str, Any] = {
    "root": {
        "rules": {
            "SLOWCRASH": action(SLOW_CODE + ROOT_SUBMIT),
            "TORNWRITE": action(TORN_CODE),
            "revenue by region": action(QUICK_CODE + ROOT_SUBMIT),
        }
    },
    "sub": {
        "rules": {
            "NORTH-SLOW": _child("North", 0.5),
            "SOUTH-SLOW": _child("South", 0.7),
            "REGION=North": _child("North", 0.0),
            "REGION=South": _child("South", 0.0),
            "SLOWCRASH": route("rlm"),
            "TORNWRITE": route("rlm"),
            "revenue by region": route("rlm"),
        }
    },
}


SERVER = [sys.executable, "-m", "fleet_lsp", "serve"]
CGROUP_ROOT = Path("/sys/fs/cgroup")
CGROUP_PREFIX = "fleet-sbx-"


class RpcError(Exception):
    def __init__(self, method: str, error: dict[str, Any]) -> None:
        super().__init__(f"{method}: {error.get('code')} {error.get('message')}")
        self.method = method
        self.error = error

    @property
    def kind(self) -> str | None:
        data = self.error.get("data")
        return data.get("kind") if isinstance(data, dict) else None


class ServerGone(Exception):
    """The server's output closed before the answer arrived (it was killed or crashed)."""


def _frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message).encode()
    return f"Content-Length: {len(body)}\r\n\r\n".encode() + body


def _read_message(stream: IO[bytes]) -> dict[str, Any] | None:
    length = -1
    while True:
        line = stream.readline()
        if not line:
            return None
        if line in (b"\r\n", b"\n"):
            break
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    body = stream.read(length)
    if len(body) < length:
        return None
    message: dict[str, Any] = json.loads(body)
    return message


def server_env(state: Path, script: Path | None, **extra: str) -> dict[str, str]:
    """The environment of a server under test: no FLEET_* from the caller, a private state
    dir and the scripted models."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEET_")}
    env["FLEET_STATE_DIR"] = str(state)
    if script is not None:
        env["FLEET_TEST_SCRIPT"] = str(script)
    env.update(extra)
    return env


class Server:
    """``fleet-lsp serve`` over stdio, driven by raw JSON-RPC from any thread."""

    def __init__(self, env: dict[str, str], cwd: Path, log: Path) -> None:
        self.log = log
        self._log_file = log.open("ab")
        self.proc = subprocess.Popen(
            SERVER,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log_file,
            env=env,
            cwd=cwd,
        )
        self.pid = self.proc.pid
        self._ids = itertools.count(1)
        self._pending: dict[int, tuple[str, Future[Any]]] = {}
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self.notifications: list[dict[str, Any]] = []
        self.closed = threading.Event()
        self._reader = threading.Thread(target=self._read, name=f"rpc-{self.pid}", daemon=True)
        self._reader.start()
        self.descendants = ProcessWatch(self.pid)

    # --- transport ---------------------------------------------------------------------------

    def _write(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        with self._write_lock:
            try:
                self.proc.stdin.write(_frame(message))
                self.proc.stdin.flush()
            except (BrokenPipeError, ValueError, OSError) as exc:
                raise ServerGone(str(exc)) from exc

    def _read(self) -> None:
        assert self.proc.stdout is not None
        try:
            while (message := _read_message(self.proc.stdout)) is not None:
                if "method" in message and "id" in message:  # a server request: accept it
                    with contextlib.suppress(ServerGone):
                        self._write({"jsonrpc": "2.0", "id": message["id"], "result": None})
                elif "method" in message:
                    self.notifications.append(message)
                else:
                    with self._lock:
                        entry = self._pending.pop(message.get("id"), None)  # type: ignore[arg-type]
                    if entry is None:
                        continue
                    method, future = entry
                    if "error" in message:
                        future.set_exception(RpcError(method, message["error"]))
                    else:
                        future.set_result(message.get("result"))
        except (OSError, ValueError):
            pass
        finally:
            self.closed.set()
            with self._lock:
                pending, self._pending = self._pending, {}
            for method, future in pending.values():
                if not future.done():
                    future.set_exception(ServerGone(f"{method}: the server's output closed"))

    def send(self, method: str, params: Any) -> Future[Any]:
        msg_id = next(self._ids)
        future: Future[Any] = Future()
        with self._lock:
            if self.closed.is_set():
                future.set_exception(ServerGone(f"{method}: the server's output closed"))
                return future
            self._pending[msg_id] = (method, future)
        try:
            self._write({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        except ServerGone as exc:
            with self._lock:
                self._pending.pop(msg_id, None)
            future.set_exception(exc)
        return future

    def request(self, method: str, params: Any, timeout: float = 120.0) -> Any:
        return self.send(method, params).result(timeout)

    def notify(self, method: str, params: Any) -> None:
        self._write({"jsonrpc": "2.0", "method": method, "params": params})

    # --- lifecycle ---------------------------------------------------------------------------

    def initialize(self) -> dict[str, Any]:
        result = self.request(
            "initialize",
            {
                "processId": os.getpid(),
                "capabilities": {},
                "rootUri": None,
                "initializationOptions": {"fleet": {"protocolVersion": 1, "turnEvents": False}},
            },
            timeout=60,
        )
        self.notify("initialized", {})
        return dict(result)

    def kill(self) -> None:
        """kill -9, then wait for the process (its children are not waited for)."""
        self.descendants.scan()
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        self.closed.wait(10)
        self._close_pipes()

    def shutdown(self, timeout: float = 60.0, *, close_stdin: bool = True) -> int:
        """``shutdown`` then ``exit``; the process's exit code. Like editors' clients, closes
        the server's stdin after ``exit`` unless told not to."""
        try:
            self.request("shutdown", None, timeout=timeout)
            self.notify("exit", None)
            if close_stdin and self.proc.stdin is not None:
                with self._write_lock:
                    self.proc.stdin.close()
            code = self.proc.wait(timeout=timeout)
        except Exception:
            self.proc.kill()
            code = self.proc.wait(timeout=30)
        self._close_pipes()
        return code

    def _close_pipes(self) -> None:
        for stream in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError, ValueError):
                if stream is not None:
                    stream.close()
        self._log_file.close()
        self.descendants.stop()

    # --- /proc -------------------------------------------------------------------------------

    def status(self) -> dict[str, int]:
        """``Threads`` and ``VmRSS`` (kB) from /proc/<pid>/status."""
        return proc_status(self.pid)


def proc_status(pid: int) -> dict[str, int]:
    fields: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("Threads", "VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0])
    return fields


# --- processes ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Proc:
    pid: int
    start: int  # starttime in clock ticks: (pid, start) names one process, reuse excluded
    cmdline: str


def _stat(pid: int) -> tuple[int, int, str] | None:
    """(ppid, starttime, state) of ``pid`` or None when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]), int(fields[19]), fields[0]


def _cmdline(pid: int) -> str:
    try:
        return (
            Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        )
    except OSError:
        return ""


def all_pids() -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]


def descendants(root: int) -> list[Proc]:
    children: dict[int, list[int]] = {}
    starts: dict[int, int] = {}
    for pid in all_pids():
        stat = _stat(pid)
        if stat is not None:
            children.setdefault(stat[0], []).append(pid)
            starts[pid] = stat[1]
    found: list[Proc] = []
    stack = list(children.get(root, []))
    while stack:
        pid = stack.pop()
        found.append(Proc(pid, starts[pid], _cmdline(pid)))
        stack.extend(children.get(pid, []))
    return found


def alive(proc: Proc) -> str | None:
    """The state letter of ``proc`` if that very process still exists (a zombie is ``Z``)."""
    stat = _stat(proc.pid)
    if stat is None or stat[1] != proc.start:
        return None
    return stat[2]


class ProcessWatch:
    """Every descendant a server ever had, sampled every 50 ms (sandboxes live for a cell)."""

    def __init__(self, root: int, interval: float = 0.05) -> None:
        self.root = root
        self.seen: dict[tuple[int, int], Proc] = {}
        self._stop = threading.Event()
        self._interval = interval
        self._thread = threading.Thread(target=self._run, name=f"watch-{root}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self.scan()

    def scan(self) -> None:
        with contextlib.suppress(Exception):
            for proc in descendants(self.root):
                self.seen.setdefault((proc.pid, proc.start), proc)

    def stop(self) -> None:
        self._stop.set()

    def survivors(self) -> list[tuple[Proc, str]]:
        """Descendants seen at some point that still exist, with their state letter."""
        left = []
        for proc in self.seen.values():
            state = alive(proc)
            if state is not None:
                left.append((proc, state))
        return left


def processes_mentioning(needles: Iterable[str]) -> list[Proc]:
    """Processes (but this one) whose command line mentions any of ``needles``."""
    found = []
    for pid in all_pids():
        if pid == os.getpid():
            continue
        text = _cmdline(pid)
        stat = _stat(pid)
        if stat is not None and any(n in text for n in needles):
            found.append(Proc(pid, stat[1], text))
    return found


def wait_until(predicate: Any, timeout: float, interval: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    value = predicate()
    while not value and time.monotonic() < deadline:
        time.sleep(interval)
        value = predicate()
    return value


# --- cgroups, temp files, child workspaces ------------------------------------------------------


def sandbox_cgroups(host_pid: int) -> list[Path]:
    """Per-sandbox cgroups a host process made (``fleet-sbx-<pid>-...``, see
    ``fleet_core.sandbox.isolation.cgroup_name``) under any controller's hierarchy."""
    found: list[Path] = []
    prefix = f"{CGROUP_PREFIX}{host_pid}-"
    for controller in ("pids", "memory"):
        mount = CGROUP_ROOT / controller
        if not mount.is_dir():
            continue
        for directory, subdirs, _files in os.walk(mount):
            for name in subdirs:
                if name.startswith(prefix):
                    found.append(Path(directory) / name)
            subdirs[:] = [d for d in subdirs if not d.startswith(CGROUP_PREFIX)]
    return found


def temp_files(state: Path) -> list[Path]:
    """Atomic-write temp files (``.fleet-*``, ``workspace._atomic_file``) and other temp-looking
    files anywhere under the state dir."""
    found = []
    for path in state.rglob("*"):
        name = path.name
        if name.startswith(".fleet-") or name.endswith((".tmp", ".part")):
            found.append(path)
    return found


def child_workspaces(state: Path) -> list[Path]:
    """``<state>/agents/<session>/<turn>/`` directories (a Turn removes its own when it ends)."""
    agents = state / "agents"
    if not agents.is_dir():
        return []
    return sorted(t for s in agents.iterdir() if s.is_dir() for t in s.iterdir())


# --- store --------------------------------------------------------------------------------------


def sqlite_integrity(database: Path) -> tuple[list[str], list[tuple[Any, ...]]]:
    """``PRAGMA integrity_check`` rows and ``PRAGMA foreign_key_check`` violations."""
    with contextlib.closing(sqlite3.connect(database, timeout=30)) as conn:
        integrity = [row[0] for row in conn.execute("PRAGMA integrity_check")]
        violations = list(conn.execute("PRAGMA foreign_key_check"))
    return integrity, violations


def postgres_integrity(url: str) -> list[str]:
    """What PostgreSQL can say cheaply: every FK constraint is validated, and a full scan of
    every table (with its indexes via amcheck when installed) reads without error."""
    import psycopg

    problems: list[str] = []
    with psycopg.connect(url.replace("+psycopg", ""), autocommit=True) as conn:
        for (name,) in conn.execute(
            "SELECT conname FROM pg_constraint WHERE contype = 'f' AND NOT convalidated"
        ):
            problems.append(f"foreign key {name} not validated")
        tables = [
            row[0]
            for row in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        ]
        for table in tables:
            conn.execute(f'SELECT count(*) FROM "{table}"')
        # every FK checked by hand: a child row whose parent is missing
        fks = conn.execute(
            """SELECT c.conrelid::regclass::text, a.attname, c.confrelid::regclass::text,
                      af.attname
               FROM pg_constraint c
               JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]
               JOIN pg_attribute af ON af.attrelid = c.confrelid AND af.attnum = c.confkey[1]
               WHERE c.contype = 'f' AND array_length(c.conkey, 1) = 1"""
        ).fetchall()
        for child, column, parent, parent_column in fks:
            orphans = conn.execute(
                f"SELECT count(*) FROM {child} x WHERE x.{column} IS NOT NULL AND NOT EXISTS "
                f"(SELECT 1 FROM {parent} p WHERE p.{parent_column} = x.{column})"
            ).fetchone()
            if orphans and orphans[0]:
                problems.append(f"{orphans[0]} rows of {child}.{column} miss their {parent}")
    return problems


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass
class Timings:
    """Latencies (seconds) per method."""

    samples: dict[str, list[float]] = field(default_factory=dict)

    def add(self, method: str, seconds: float) -> None:
        self.samples.setdefault(method, []).append(seconds)

    def percentile(self, method: str, q: float) -> float:
        values = sorted(self.samples[method])
        index = min(len(values) - 1, max(0, round(q * (len(values) - 1))))
        return values[index]

    def summary(self) -> dict[str, dict[str, float]]:
        return {
            method: {
                "n": len(values),
                "p50_ms": round(self.percentile(method, 0.50) * 1000, 2),
                "p99_ms": round(self.percentile(method, 0.99) * 1000, 2),
                "max_ms": round(max(values) * 1000, 2),
            }
            for method, values in sorted(self.samples.items())
        }
