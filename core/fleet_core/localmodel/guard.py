"""The guard: the one parent of the embedded model server, and its watchdog.

``python -m fleet_core.localmodel.guard --home DIR -- <server argv>`` starts the server with its
output in ``DIR/server.log`` (kept under :data:`MAX_LOG_BYTES`) and ``PR_SET_PDEATHSIG`` set, so
the server dies with the guard however the guard ends. Every ``--poll`` seconds it checks:

- the server exited: the guard exits too, with the server's code (``128 + N`` for a death by
  signal N: the supervisor tells a SIGILL at load from other failures), and the supervisor sees a
  dead state and starts anew;
- no registered user is alive (``DIR/users``; :mod:`fleet_core.localmodel.procs`) and the state
  file does not pin the server (``fleet-lsp model serve``): it stops the server and exits. So a
  fleet-lsp that exits, or is killed with ``kill -9``, leaves no model process behind;
- SIGTERM or SIGINT: it stops the server and exits (``fleet-lsp model stop``).

The supervisor starts the guard in its own session, so a terminal's Ctrl-C reaches the users,
whose exit the guard then notices. Standard library only; it imports nothing heavy.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType

from fleet_core.localmodel.procs import live_users

MAX_LOG_BYTES = 8 * 1024 * 1024
STATE_FILE = "server.json"
SERVER_PID_FILE = "server.pid"
_PR_SET_PDEATHSIG = 1
_IDLE_POLLS = 2  # consecutive polls without a live user before the server is stopped


def _die_with_parent() -> None:  # runs in the child between fork and exec
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _pinned(home: Path) -> bool:
    try:
        state = json.loads((home / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    mine = isinstance(state, dict) and state.get("guard_pid") == os.getpid()
    return bool(mine and state.get("pinned"))


def _forget(home: Path) -> None:
    """Remove the state file when it still names this guard (never another guard's)."""
    path = home / STATE_FILE
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        state = None
    if isinstance(state, dict) and state.get("guard_pid") == os.getpid():
        path.unlink(missing_ok=True)
    pid_file = home / SERVER_PID_FILE
    try:
        if pid_file.read_text(encoding="ascii").split()[0] == str(os.getpid()):
            pid_file.unlink(missing_ok=True)
    except (OSError, IndexError):
        pass


def _stop(server: subprocess.Popen[bytes], grace: float = 10.0) -> None:
    if server.poll() is None:
        server.terminate()
        try:
            server.wait(grace)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def run(home: Path, argv: list[str], poll: float) -> int:
    stopping = False

    def on_signal(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    log_path = home / "server.log"
    if log_path.exists():  # the previous server's log stays one start (why it ended)
        os.replace(log_path, home / "server.log.1")
    with log_path.open("ab") as log:
        server = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=home,
            preexec_fn=_die_with_parent,  # the guard is single-threaded: safe
        )
    tmp = home / f".{SERVER_PID_FILE}.{os.getpid()}"
    tmp.write_text(f"{os.getpid()} {server.pid}", encoding="ascii")
    os.replace(tmp, home / SERVER_PID_FILE)
    idle = 0
    try:
        while not stopping:
            if server.poll() is not None:
                code = server.returncode
                return 128 - code if code < 0 else code or 1  # a signal's death: 128 + signal
            if _pinned(home) or live_users(home):
                idle = 0
            else:
                idle += 1
                if idle >= _IDLE_POLLS:
                    break
            try:
                if log_path.stat().st_size > MAX_LOG_BYTES:
                    os.truncate(log_path, 0)  # the server appends, so it goes on at offset 0
            except OSError:
                pass
            time.sleep(poll)
        return 0
    finally:
        _stop(server)
        _forget(home)


def main(args: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="fleet_core.localmodel.guard")
    parser.add_argument("--home", required=True, type=Path)
    parser.add_argument("--poll", type=float, default=1.0)
    parser.add_argument("argv", nargs=argparse.REMAINDER)
    ns = parser.parse_args(args)
    argv = ns.argv[1:] if ns.argv[:1] == ["--"] else ns.argv
    if not argv:
        parser.error("the server's argv is missing (after --)")
    return run(ns.home, argv, max(0.05, ns.poll))


if __name__ == "__main__":
    sys.exit(main())
