"""Child workspaces: copied inputs with a receipt, and artifact promotion with provenance.

A child agent gets a *fresh* workspace holding copies of the inputs it was given (explicit paths
under ``files/`` or ``artifacts/``, or all of ``files/`` by default) and an input receipt
(path -> sha256). After the child succeeds (and its sandbox is stopped), new or changed regular
files under its ``artifacts/`` are copied to the parent's ``artifacts/<child-agent-id>/...``,
each with a :class:`PromotionReceipt`. Symlinks, FIFOs, sockets and devices are never followed or
promoted; quotas are checked before anything is written; a failed child promotes nothing
(the caller simply does not call :func:`promote_child_artifacts`). Persisting receipts is the
runtime's job.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from fleet_core import names
from fleet_core.errors import InvalidInput
from fleet_core.sandbox.errors import ResourceLimitError, WorkspacePathError
from fleet_core.workspace import (
    ROOTS,
    Workspace,
    count_entries,
    count_new_entries,
    validate_relative_path,
)

INPUT_ROOTS = ("files", "artifacts")
MAX_INPUT_PATHS = 100
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


@dataclass(frozen=True, slots=True)
class InputReceipt:
    path: str
    sha256: str
    size_bytes: int


@dataclass(frozen=True, slots=True)
class ChildWorkspace:
    """A prepared child workspace and what was copied into it."""

    agent_id: str
    parent_agent_id: str
    ancestors: tuple[str, ...]
    workspace: Workspace
    inputs: tuple[InputReceipt, ...]

    @property
    def root(self) -> Path:
        return self.workspace.root

    def input_digests(self) -> dict[str, str]:
        return {r.path: r.sha256 for r in self.inputs}


@dataclass(frozen=True, slots=True)
class PromotionReceipt:
    """Provenance of one promoted artifact."""

    path: str  # in the parent's workspace: artifacts/<child>/<rel>
    root_path: str  # as seen from the root agent: artifacts/<a>/<b>/.../<child>/<rel>
    sha256: str
    size_bytes: int
    source_agent_id: str
    source_sandbox_id: str
    source_path: str  # in the child's workspace: artifacts/<rel>


@dataclass(frozen=True, slots=True)
class PromotionResult:
    promoted: tuple[PromotionReceipt, ...]
    skipped: tuple[tuple[str, str], ...] = field(default_factory=tuple)  # (path, reason)


class PromotionQuotaError(ResourceLimitError):
    kind = "PromotionQuota"


def prepare_child_workspace(
    parent: Workspace,
    child_root: Path,
    *,
    agent_id: str,
    parent_agent_id: str,
    ancestors: Sequence[str] = (),
    input_paths: Sequence[str] | None = None,
    max_entries: int | None = None,
) -> ChildWorkspace:
    """Create ``child_root`` as a fresh workspace and copy the inputs into it.

    ``input_paths`` name regular files under ``files/`` or ``artifacts/`` of the parent; ``None``
    copies every file under ``files/``. ``ancestors`` are the agent ids between the root agent
    (exclusive) and the parent (inclusive if it is not the root), used for ``root_path``.
    ``max_entries`` (``sandbox.max_files``): inputs that would fill the child's workspace past
    it are refused (``ResourceLimitError``) before anything is created.
    """
    _check_agent_id(agent_id)
    paths = parent.paths("files") if input_paths is None else _checked_inputs(input_paths)
    if max_entries is not None:
        _check_child_entries(agent_id, paths, max_entries)
    if child_root.exists() and any(child_root.iterdir()):
        raise InvalidInput(f"Child workspace {child_root} already exists and is not empty")
    child_root.mkdir(parents=True, exist_ok=True)
    child = Workspace(
        child_root, max_file_bytes=parent.max_file_bytes, max_read_bytes=parent.max_read_bytes
    )
    child.ensure_layout()
    receipts = [_copy_input(parent, child, path) for path in paths]
    return ChildWorkspace(
        agent_id=agent_id,
        parent_agent_id=parent_agent_id,
        ancestors=tuple(ancestors),
        workspace=child,
        inputs=tuple(receipts),
    )


def promote_child_artifacts(
    child: ChildWorkspace,
    parent: Workspace,
    *,
    source_sandbox_id: str,
    max_files: int,
    max_bytes: int,
    max_entries: int | None = None,
) -> PromotionResult:
    """Copy the child's new/changed regular ``artifacts/`` files to the parent.

    Call only after the child succeeded and its sandbox is stopped. All-or-nothing: quotas are
    checked before writing, and files already written are removed if a later write fails.
    ``max_entries`` (``sandbox.max_files``): a promotion that would make the parent's workspace
    hold more entries is refused (``PromotionQuotaError``), like the promotion quotas.
    """
    planned, skipped = _plan_promotion(child, max_files=max_files, max_bytes=max_bytes)
    if max_entries is not None and planned:
        _check_parent_entries(child, parent, [rel for rel, _d, _h in planned], max_entries)
    written: list[str] = []
    receipts: list[PromotionReceipt] = []
    try:
        for rel, data, digest in planned:
            target = _promoted_path(child.agent_id, rel, taken=set(written))
            parent.write(target, data)
            written.append(target)
            receipts.append(_receipt(child, rel, target, data, digest, source_sandbox_id))
    except BaseException:
        for target in written:
            with contextlib.suppress(OSError, InvalidInput, WorkspacePathError):
                parent.delete(target)
        raise
    return PromotionResult(promoted=tuple(receipts), skipped=tuple(skipped))


def _promoted_path(agent_id: str, rel: str, *, taken: set[str]) -> str:
    """Where a child's ``artifacts/<rel>`` lands in the parent, under a name the workspace can
    hold (``fleet_core.names``: the child's own sandbox already escaped it, but the prefix can
    make the path too long), never onto another promoted file."""
    target = names.safe_path(f"artifacts/{agent_id}/{rel}")
    if target in taken:
        target = f"artifacts/{agent_id}/{names.short_name(target.rpartition('/')[2], rel)}"
    return target


def _check_child_entries(agent_id: str, paths: Sequence[str], max_entries: int) -> None:
    folders = {"/".join(p.split("/")[:d]) for p in paths for d in range(1, p.count("/") + 1)}
    entries = len(ROOTS) + len(set(paths)) + len(folders - set(ROOTS))
    if entries > max_entries:
        raise ResourceLimitError(
            f"Child {agent_id}'s inputs would fill its workspace with {entries:,} entries, over "
            f"the file-count quota of {max_entries:,} (setting sandbox.max_files); give it only "
            "the inputs it needs (input_paths)",
            agent_id=agent_id,
        )


def _check_parent_entries(
    child: ChildWorkspace, parent: Workspace, rels: list[str], max_entries: int
) -> None:
    targets = [f"artifacts/{child.agent_id}/{rel}" for rel in rels]
    new = count_new_entries(parent.root, targets)
    held = count_entries(parent.root, stop_after=max_entries)
    if new and held + new > max_entries:
        raise PromotionQuotaError(
            f"Promoting child {child.agent_id}'s {len(rels)} artifact(s) would make the "
            f"workspace hold {held + new:,} entries, over its file-count quota of "
            f"{max_entries:,} (setting sandbox.max_files); nothing was promoted",
            agent_id=child.agent_id,
        )


def _receipt(
    child: ChildWorkspace, rel: str, target: str, data: bytes, digest: str, sandbox_id: str
) -> PromotionReceipt:
    lineage = "/".join((*child.ancestors, child.agent_id))
    return PromotionReceipt(
        path=target,
        root_path=names.safe_path(f"artifacts/{lineage}/{rel}"),
        sha256=digest,
        size_bytes=len(data),
        source_agent_id=child.agent_id,
        source_sandbox_id=sandbox_id,
        source_path=names.safe_path(f"artifacts/{rel}"),
    )


def _plan_promotion(
    child: ChildWorkspace, *, max_files: int, max_bytes: int
) -> tuple[list[tuple[str, bytes, str]], list[tuple[str, str]]]:
    inputs = child.input_digests()
    planned: list[tuple[str, bytes, str]] = []
    skipped: list[tuple[str, str]] = []
    total = 0
    base = child.root / "artifacts"
    for rel, problem in _walk_artifacts(base, ""):
        path = f"artifacts/{rel}"
        if problem:
            skipped.append((path, problem))
            continue
        data = _read_regular(base / rel, limit=max_bytes - total)
        if data is None:
            skipped.append((path, "not a regular file"))
            continue
        digest = hashlib.sha256(data).hexdigest()
        if inputs.get(path) == digest:
            continue  # an unchanged copied-in input
        total += len(data)
        if len(planned) + 1 > max_files or total > max_bytes:
            raise PromotionQuotaError(
                f"Child {child.agent_id} produced more artifacts than allowed "
                f"({max_files} files / {max_bytes:,} bytes per child); nothing was promoted",
                agent_id=child.agent_id,
            )
        planned.append((rel, data, digest))
    return planned, skipped


def _walk_artifacts(base: Path, prefix: str) -> list[tuple[str, str]]:
    """(relative path, problem) for every entry; problem is '' for regular files."""
    found: list[tuple[str, str]] = []
    try:
        entries = sorted(os.scandir(base), key=lambda e: e.name)
    except OSError:
        return found
    for entry in entries:
        rel = f"{prefix}{entry.name}"
        mode = entry.stat(follow_symlinks=False).st_mode
        if stat.S_ISLNK(mode):
            found.append((rel, "symlink (never followed or promoted)"))
        elif stat.S_ISDIR(mode):
            found.extend(_walk_artifacts(Path(entry.path), f"{rel}/"))
        elif not stat.S_ISREG(mode):
            found.append((rel, "not a regular file (FIFO, socket or device)"))
        else:
            found.append((rel, ""))
    return found


def _read_regular(path: Path, *, limit: int) -> bytes | None:
    """Read a regular file without following links; None if it is not one (anymore)."""
    try:
        fd = os.open(path, _READ_FLAGS)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return None
        return handle.read(max(limit, 0) + 1)


def _copy_input(parent: Workspace, child: Workspace, path: str) -> InputReceipt:
    data = parent.read(path, max_bytes=parent.max_file_bytes)
    info = child.write(path, data)
    return InputReceipt(path=path, sha256=info.sha256, size_bytes=info.size_bytes)


def _checked_inputs(paths: Sequence[str]) -> list[str]:
    if len(paths) > MAX_INPUT_PATHS:
        raise InvalidInput(f"At most {MAX_INPUT_PATHS} input paths per child, got {len(paths)}")
    checked: list[str] = []
    for path in paths:
        validate_relative_path(path, INPUT_ROOTS)
        if path not in checked:
            checked.append(path)
    return checked


def _check_agent_id(agent_id: str) -> None:
    if not agent_id or "/" in agent_id or agent_id in (".", "..") or agent_id in ROOTS:
        raise InvalidInput(f"Invalid child agent id {agent_id!r}")
    validate_relative_path(f"artifacts/{agent_id}")
