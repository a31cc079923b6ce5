"""Process identity and the users registry of the embedded model (standard library only; Linux).

A process is named by its pid *and* its start time (``/proc/<pid>/stat``), so a recycled pid is
never mistaken for the process that registered. A user is a process that uses the model server:
one file ``<home>/users/<pid>`` holding its start time. The guard stops the server when no user
is alive (unless it is pinned by ``fleet-lsp model serve``).

Socket ownership (:func:`loopback_listeners`, :func:`socket_inodes`) is how the supervisor proves
that the process listening on the embedded server's port is the server it started: a listening
socket's inode in ``/proc/net/tcp`` must be one of that process's descriptors (docs/security.md).
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path

MAX_USERS = 4096  # registry entries read at most (bounded: a stale entry is removed when seen)
_TCP_LISTEN = "0A"  # the state column of /proc/net/tcp
# Local addresses of a listening socket that a connection to 127.0.0.1:<port> can reach: the
# exact address, the IPv4 wildcard, and IPv6 sockets that take IPv4 connections (dual stack).
IPV4_ANY = "0.0.0.0"  # noqa: S104 - read from /proc/net/tcp, never bound
LOOPBACK_REACHABLE = frozenset({"127.0.0.1", IPV4_ANY, "::", "::ffff:127.0.0.1", "::ffff:0.0.0.0"})


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


@dataclass(frozen=True, slots=True)
class Listener:
    """One listening TCP socket of this network namespace (a row of ``/proc/net/tcp``)."""

    inode: int
    uid: int  # the socket's owner
    address: str  # its local address, e.g. 127.0.0.1 or ::


def loopback_listeners(port: int) -> list[Listener] | None:
    """The listening sockets on ``port`` that a connection to 127.0.0.1:``port`` could reach
    (:data:`LOOPBACK_REACHABLE`), from ``/proc/net/tcp`` and ``tcp6``; ``None`` when the
    sockets cannot be read (then nothing can be proven about the port)."""
    found: list[Listener] = []
    for table in ("tcp", "tcp6"):
        try:
            text = Path(f"/proc/net/{table}").read_text(encoding="ascii", errors="replace")
        except FileNotFoundError:
            if table == "tcp":
                return None
            continue  # no IPv6 in this kernel or namespace
        except OSError:
            return None
        for line in text.splitlines()[1:]:
            fields = line.split()
            if len(fields) < 10 or fields[3] != _TCP_LISTEN:
                continue
            address_hex, _, port_hex = fields[1].partition(":")
            try:
                if int(port_hex, 16) != port:
                    continue
                address = _address(address_hex)
                listener = Listener(inode=int(fields[9]), uid=int(fields[7]), address=address)
            except ValueError:
                continue
            if address in LOOPBACK_REACHABLE:
                found.append(listener)
    return found


def _address(hex_text: str) -> str:
    """A ``/proc/net/tcp`` address (32-bit words in host byte order) as text."""
    if len(hex_text) not in (8, 32):
        raise ValueError(hex_text)
    raw = b"".join(
        int(hex_text[i : i + 8], 16).to_bytes(4, sys.byteorder) for i in range(0, len(hex_text), 8)
    )
    family = socket.AF_INET if len(raw) == 4 else socket.AF_INET6
    return socket.inet_ntop(family, raw)


def socket_inodes(pid: int) -> set[int] | None:
    """The inodes of the sockets ``pid`` holds open (``/proc/<pid>/fd``); ``None`` when its
    descriptors cannot be read (gone, or another user's process)."""
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return None
    inodes: set[int] = set()
    for name in names:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{name}")
        except OSError:
            continue  # closed meanwhile
        if target.startswith("socket:[") and target.endswith("]"):
            try:
                inodes.add(int(target[8:-1]))
            except ValueError:
                continue
    return inodes
