"""The compiled Turn program: what GEPA may change, its digest, and the Session's active file.

A program is a set of *overrides* over the code's built-in Turn program: per component, the text
that replaces it. Components (names are GEPA's parameter paths, stable):

- ``rlm.generate_action``: the primary RLM's action-generation instructions;
- ``rlm.extract``: its fallback-extraction instructions;
- ``triage`` and ``direct``: the triage and direct-answer instructions;
- ``flex``: the Flex route's module source code;
- ``codefirst``: the small profile's code-first system prompt (``engine.codefirst.SYSTEM``).

The built-in default is the empty override set; its digest (``DEFAULT_PROGRAM_DIGEST``) is what a
Turn reports when nothing is approved, so ``compiled_program_digest`` is never null. The code that
interprets a program is identified separately (the code digest of a candidate's manifest).

Files (standard library only; written atomically: temp file, fsync, rename):
``<state_dir>/optimization/<session_id>/active.json`` is the Session's served program. The
``ActivePrograms`` loader re-reads it when its mtime or size changes (a regular file, at most
``MAX_PROGRAM_BYTES``); a file that cannot be read or parsed leaves the last good program in
place (and is logged), so a Turn is never failed by it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import stat
import tempfile
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from fleet_core.digests import DEFAULT_PROGRAM_DIGEST as DEFAULT_PROGRAM_DIGEST  # re-exported
from fleet_core.digests import canonical_json

log = logging.getLogger(__name__)

COMPONENTS = ("rlm.generate_action", "rlm.extract", "triage", "direct", "flex", "codefirst")
INSTRUCTION_COMPONENTS = (*COMPONENTS[:4], "codefirst")
CODE_COMPONENTS = ("flex",)
MAX_PROGRAM_BYTES = 10_000_000
MAX_COMPONENT_CHARS = 200_000
PROGRAM_FORMAT = 1
ACTIVE_CACHE_MAX = 1_024  # Sessions whose active file a loader remembers


class ProgramState(BaseModel):
    """A Turn program as overrides of the built-in one (empty: the built-in default)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal[1] = 1
    components: dict[str, str] = Field(default_factory=dict)

    @field_validator("components")
    @classmethod
    def _known(cls, value: dict[str, str]) -> dict[str, str]:
        unknown = sorted(set(value) - set(COMPONENTS))
        if unknown:
            raise ValueError(f"unknown program components {unknown}; known: {list(COMPONENTS)}")
        for name, text in value.items():
            if not text.strip():
                raise ValueError(f"component {name!r} is empty")
            if len(text) > MAX_COMPONENT_CHARS:
                raise ValueError(f"component {name!r} is longer than {MAX_COMPONENT_CHARS}")
        return value

    def canonical(self) -> bytes:
        """The bytes that are stored and digested (sorted keys, compact, UTF-8)."""
        return canonical_json(self.model_dump(mode="json"))

    def digest(self) -> str:
        return hashlib.sha256(self.canonical()).hexdigest()

    @classmethod
    def parse(cls, data: bytes) -> ProgramState:
        if len(data) > MAX_PROGRAM_BYTES:
            raise ValueError(f"program file is larger than {MAX_PROGRAM_BYTES:,} bytes")
        return cls.model_validate(json.loads(data.decode("utf-8")))


DEFAULT_PROGRAM = ProgramState()
if DEFAULT_PROGRAM.digest() != DEFAULT_PROGRAM_DIGEST:  # the leaf's constant (models.py uses it)
    raise RuntimeError("fleet_core.digests.DEFAULT_PROGRAM_DIGEST is not ProgramState()'s digest")


def optimization_dir(state_dir: Path, session_id: str) -> Path:
    return state_dir / "optimization" / session_id


def active_path(state_dir: Path, session_id: str) -> Path:
    return optimization_dir(state_dir, session_id) / "active.json"


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` all or nothing (temp file in the same directory, fsync,
    rename); a symlink at ``path`` is refused."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink():
        raise OSError(f"{path} is a symlink; refusing to replace it")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def read_regular(path: Path, limit: int = MAX_PROGRAM_BYTES) -> bytes | None:
    """A regular file's bytes (``None`` when absent); symlinks and oversized files raise."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(info.st_mode):
        raise OSError(f"{path} is not a regular file")
    if info.st_size > limit:
        raise OSError(f"{path} is larger than {limit:,} bytes")
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as handle:
        return handle.read(limit + 1)[:limit]


class ActivePrograms:
    """The served program of each Session, reloaded when its file changes (thread-safe)."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, tuple[tuple[int, int, int], ProgramState]] = OrderedDict()

    def get(self, session_id: str) -> ProgramState:
        """Blocking (a stat, and a read when the file changed): call from a worker thread."""
        path = active_path(self.state_dir, session_id)
        try:
            info = path.lstat()
        except FileNotFoundError:
            with self._lock:
                self._cache.pop(session_id, None)
            return DEFAULT_PROGRAM
        key = (info.st_mtime_ns, info.st_size, info.st_ino)
        with self._lock:
            cached = self._cache.get(session_id)
        if cached is not None and cached[0] == key:
            return cached[1]
        try:
            data = read_regular(path)
            program = ProgramState.parse(data or b"")
        except (OSError, ValueError, ValidationError) as exc:
            log.warning("the active program of Session %s was not loaded: %s", session_id, exc)
            return cached[1] if cached is not None else DEFAULT_PROGRAM
        with self._lock:
            self._cache[session_id] = (key, program)
            self._cache.move_to_end(session_id)
            while len(self._cache) > ACTIVE_CACHE_MAX:
                self._cache.popitem(last=False)
        return program


def changed_components(baseline: dict[str, str], candidate: dict[str, str]) -> dict[str, str]:
    """The components whose text differs from the baseline's."""
    return {k: v for k, v in candidate.items() if k in COMPONENTS and baseline.get(k) != v}
