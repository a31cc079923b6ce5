"""Process identity and the users registry of the embedded model (standard library only; Linux).

A process is named by its pid *and* its start time (``/proc/<pid>/stat``), so a recycled pid is
never mistaken for the process that registered. A user is a process that uses the model server:
one file ``<home>/users/<pid>`` holding its start time. The guard stops the server when no user
is alive (unless it is pinned by ``fleet-lsp model serve``).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

MAX_USERS = 4096  # registry entries read at most (bounded: a stale entry is removed when seen)


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot; ``None`` when it is gone or a
    zombie (a killed process its parent has not reaped yet is gone for our purposes)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    # "pid (comm) state ppid ...": comm may hold spaces and parentheses; split after the last ")"
    fields = raw[raw.rfind(")") + 2 :].split()
    if not fields or fields[0] in ("Z", "X"):
        return None
    try:
        return int(fields[19])  # field 22 of the whole line
    except (IndexError, ValueError):
        return None


def alive(pid: int, started: int | None) -> bool:
    """Whether ``pid`` is still the process that started at ``started``."""
    if pid <= 0:
        return False
    now = start_time(pid)
    return now is not None and (started is None or now == started)


def rss_bytes(pid: int) -> int | None:
    """Resident memory of ``pid`` (``VmRSS``), ``None`` when unknown."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text(encoding="ascii").splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def register_user(home: Path, pid: int | None = None) -> None:
    users = home / "users"
    users.mkdir(parents=True, exist_ok=True)
    pid = os.getpid() if pid is None else pid
    started = start_time(pid)
    (users / str(pid)).write_text(str(started or ""), encoding="ascii")


def unregister_user(home: Path, pid: int | None = None) -> None:
    (home / "users" / str(os.getpid() if pid is None else pid)).unlink(missing_ok=True)


def live_users(home: Path) -> list[int]:
    """Registered processes still alive; entries of dead ones are removed."""
    users = home / "users"
    try:
        entries = sorted(users.iterdir())[:MAX_USERS]
    except OSError:
        return []
    found = []
    for entry in entries:
        try:
            pid = int(entry.name)
            text = entry.read_text(encoding="ascii").strip()
        except (OSError, ValueError):
            entry.unlink(missing_ok=True)
            continue
        if alive(pid, int(text) if text.isdigit() else None):
            found.append(pid)
        else:
            entry.unlink(missing_ok=True)
    return found


def terminate(pid: int, started: int | None, *, grace: float = 10.0) -> bool:
    """SIGTERM, then SIGKILL after ``grace`` seconds; ``True`` when the process is gone (or was
    already). Never signals a process whose start time differs (a recycled pid)."""
    if not alive(pid, started):
        return True
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return True
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not alive(pid, started):
            return True
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return True
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        if not alive(pid, started):
            return True
        time.sleep(0.05)
    return False
