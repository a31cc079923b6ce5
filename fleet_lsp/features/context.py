"""``fleet/context/*`` (attach a file, a folder or a selection; select/clear the dataset) and
``fleet/workspace/*`` (list, delete)."""

from __future__ import annotations

import asyncio
import fnmatch
import hashlib
import os
import stat
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from fleet_core.errors import FileTooLarge, InvalidInput, WorkspaceFileNotFound
from fleet_lsp.protocol import (
    AttachParams,
    FolderAttachReply,
    SessionParams,
    SetDatasetParams,
    WorkspaceListParams,
    WorkspaceListReply,
    WorkspacePathParams,
)

if TYPE_CHECKING:
    from fleet_core.models import DatasetContext, WorkspaceFile
    from fleet_lsp.server import FleetServer

DEFAULT_EXCLUDE = (
    ".git",
    ".hg",
    ".svn",
    ".fleet",
    ".venv",
    "venv",
    "node_modules",
    "__pycache__",
    ".mypy_cache",
    ".ruff_cache",
    ".pytest_cache",
    "*.pyc",
    ".DS_Store",
)
DEFAULT_MAX_FILES = 500
DEFAULT_MAX_BYTES = 100_000_000


def file_path(uri: str) -> Path:
    """A ``file:`` URI (or a plain absolute path) as a local path."""
    from pygls.uris import to_fs_path

    if uri.startswith("file:"):
        path = to_fs_path(uri)
        if not path:
            raise InvalidInput(f"Cannot map {uri[:200]!r} to a local path")
        return Path(path)
    if os.path.isabs(uri):
        return Path(uri)
    raise InvalidInput(f"Expected a file:/// URI, got {uri[:200]!r}")


def scan_folder(
    root: Path, exclude: list[str], max_files: int, max_bytes: int
) -> tuple[list[tuple[Path, str]], list[str]]:
    """Regular files under ``root`` (no symlinks followed), minus excluded names/paths."""
    found: list[tuple[Path, str]] = []
    skipped: list[str] = []
    total = 0
    for current, dirs, files in os.walk(root, followlinks=False):
        rel_dir = PurePosixPath(Path(current).relative_to(root).as_posix())
        kept = []
        for name in sorted(dirs):
            rel = (rel_dir / name).as_posix().removeprefix("./")
            if _excluded(name, rel, exclude) or os.path.islink(os.path.join(current, name)):
                skipped.append(rel + "/")
            else:
                kept.append(name)
        dirs[:] = kept
        for name in sorted(files):
            rel = (rel_dir / name).as_posix().removeprefix("./")
            host = Path(current) / name
            mode = os.lstat(host).st_mode
            if _excluded(name, rel, exclude) or not stat.S_ISREG(mode):
                skipped.append(rel)
                continue
            total += os.lstat(host).st_size
            found.append((host, rel))
            if len(found) > max_files:
                raise FileTooLarge(
                    f"Folder '{root.name}' has more than {max_files} files to attach; narrow it "
                    "with 'exclude' patterns or raise 'maxFiles'",
                    max_files=max_files,
                )
            if total > max_bytes:
                raise FileTooLarge(
                    f"Folder '{root.name}' holds more than {max_bytes:,} bytes to attach; narrow "
                    "it with 'exclude' patterns or raise 'maxBytes'",
                    max_bytes=max_bytes,
                )
    return found, skipped


def _excluded(name: str, rel: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatch(name, p) or fnmatch.fnmatch(rel, p) for p in patterns)


def register(server: FleetServer) -> None:
    @server.fleet_method("fleet/context/attach")
    async def attach(ls: FleetServer, p: AttachParams) -> WorkspaceFile | FolderAttachReply:
        runtime = await ls.runtime()
        if (p.uri is None) == (p.text is None):
            raise InvalidInput("fleet/context/attach needs exactly one of 'uri' or 'text'")
        attached: WorkspaceFile | FolderAttachReply
        if p.text is not None:
            if not p.as_:
                raise InvalidInput(
                    "Attaching a selection ('text') needs 'as', e.g. files/snippet.py"
                )
            attached = await runtime.write_file(
                p.session_id, p.as_, p.text.encode("utf-8"), room=True
            )
            ls.session_changed(p.session_id, "updated")
            return attached
        assert p.uri is not None
        source = file_path(p.uri)
        if source.is_dir() and not source.is_symlink():
            attached = await _attach_folder(ls, p, source)
        else:
            if not source.exists():
                raise WorkspaceFileNotFound(f"No file at {source}")
            attached = await runtime.attach(p.session_id, source, p.as_)
        ls.session_changed(p.session_id, "updated")
        return attached

    async def _attach_folder(ls: FleetServer, p: AttachParams, source: Path) -> FolderAttachReply:
        runtime = await ls.runtime()
        exclude = list(DEFAULT_EXCLUDE) + list(p.exclude or [])
        found, skipped = await asyncio.to_thread(
            scan_folder,
            source,
            exclude,
            p.max_files or DEFAULT_MAX_FILES,
            p.max_bytes or DEFAULT_MAX_BYTES,
        )
        base = p.as_ or f"files/{source.name}"
        label = f"folder '{source.name}' ({len(found):,} files)"
        await runtime.check_room(p.session_id, [f"{base}/{rel}" for _h, rel in found], label=label)
        files = []
        for host, rel in found:
            files.append(await runtime.attach(p.session_id, host, f"{base}/{rel}", room=False))
        digest = hashlib.sha256("\n".join(f"{f.path} {f.sha256}" for f in files).encode())
        return FolderAttachReply(
            path=base,
            size_bytes=sum(f.size_bytes for f in files),
            sha256=digest.hexdigest(),
            files=files,
            skipped=skipped[:200],
        )

    @server.fleet_method("fleet/context/setDataset")
    async def set_dataset(ls: FleetServer, p: SetDatasetParams) -> DatasetContext:
        runtime = await ls.runtime()
        dataset = await runtime.set_dataset(p.session_id, p.path, p.description)
        ls.session_changed(p.session_id, "updated")
        return dataset

    @server.fleet_method("fleet/context/clearDataset")
    async def clear_dataset(ls: FleetServer, p: SessionParams) -> None:
        runtime = await ls.runtime()
        await runtime.clear_dataset(p.session_id)
        ls.session_changed(p.session_id, "updated")

    @server.fleet_method("fleet/workspace/list")
    async def workspace_list(ls: FleetServer, p: WorkspaceListParams) -> WorkspaceListReply:
        runtime = await ls.runtime()
        page = await runtime.workspace_page(p.session_id, p.cursor, p.limit)
        return WorkspaceListReply(
            files=page.files, artifacts=page.artifacts, next_cursor=page.next_cursor
        )

    @server.fleet_method("fleet/workspace/delete")
    async def workspace_delete(ls: FleetServer, p: WorkspacePathParams) -> None:
        runtime = await ls.runtime()
        await runtime.delete_file(p.session_id, p.path)
        ls.session_changed(p.session_id, "updated")
