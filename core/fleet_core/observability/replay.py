"""Immutable replay snapshots: everything needed to re-run a Turn, captured before it runs.

Opt-in per Turn (``recordReplay``). The engine captures during input preparation::

    files = collect_workspace_files(workspace)            # bounds checked before reading
    snapshot = capture_replay(turn_id=..., session_id=..., task=..., mode=...,
                              workspace_manifest=manifest, files=files, ...,
                              configuration=session_config, redactor=redactor)
    digest, blob = encode_replay(snapshot)                 # before the Turn runs
    ...
    store.finish_turn(turn_id, TurnOutcome(..., replay=(digest, blob)))
    snapshot = decode_replay(*reversed(store.get_replay(turn_id)))   # re-verifies everything

Encoding: canonical JSON (sorted keys, compact separators, non-ASCII kept) → gzip with mtime 0
→ sha256 of the compressed bytes. Every read re-verifies that digest, the size caps, the schema
version, each file's digest against the digest map (same path set), the Skill revision digest
and, when given, the owning Session and Turn. Bound violations and secrets raise *before* the
Turn runs: a configured secret value in a file name or file bytes refuses capture (the snapshot
must never carry a credential); free text (task, memory, history, manifest) is redacted.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import platform
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from fleet_core.observability.errors import ReplayCorrupt, ReplayRefused, ReplayTooLarge
from fleet_core.observability.redaction import NO_SECRETS, Limits, Redactor

SCHEMA_VERSION = 1


@dataclass(frozen=True, slots=True)
class ReplayLimits:
    max_file_bytes_total: int = 8_000_000
    max_files: int = 5_000
    max_json_bytes: int = 16_000_000
    max_compressed_bytes: int = 16_000_000
    max_text_chars: int = 2_000_000


DEFAULT_LIMITS = ReplayLimits()


class ReplaySnapshot(BaseModel):
    """Schema version 1 of a Turn's replay snapshot (file bytes base64 in ``file_bytes``)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    schema_version: int = SCHEMA_VERSION
    turn_id: str
    session_id: str
    task: str
    mode: str
    workspace_manifest: str
    files: dict[str, str]  # path -> sha256
    file_bytes: dict[str, str]  # path -> base64
    skill_revision_sha256: str
    skills_catalog: Any = None
    memory_summary: str = ""
    session_history: Any = None
    dataset_context: dict[str, Any] | None = None
    configuration: dict[str, Any]
    configuration_digest: str
    turn_timeout_seconds: int | None = None
    versions: dict[str, str]

    def file(self, path: str) -> bytes:
        return base64.b64decode(self.file_bytes[path])


def canonical_json(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def skill_revision(files: Mapping[str, str]) -> str:
    """sha256 of the canonical JSON of the ``skills/`` part of the digest map."""
    subset = {p: d for p, d in files.items() if p.startswith("skills/")}
    return hashlib.sha256(canonical_json(subset)).hexdigest()


def default_versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for dist in ("fleet-core", "fleet-lsp", "dspy", "mlflow"):
        try:
            found[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return found


def collect_workspace_files(
    workspace: Any, *, limits: ReplayLimits = DEFAULT_LIMITS, roots: Sequence[str] | None = None
) -> dict[str, bytes]:
    """Read every regular workspace file (under ``roots`` if given), checking bounds by size
    *before* reading, and re-checking each file's digest after reading."""
    infos = []
    selected: list[str | None] = list(roots) if roots else [None]
    for root in selected:
        infos += workspace.tree(root)
    if len(infos) > limits.max_files:
        raise ReplayTooLarge(
            f"Replay capture needs {len(infos)} files; the limit is {limits.max_files}. "
            "Remove files from the workspace or run without recordReplay."
        )
    total = sum(int(info.size_bytes) for info in infos)
    if total > limits.max_file_bytes_total:
        raise ReplayTooLarge(
            f"Replay capture needs {total:,} bytes of workspace files; the limit is "
            f"{limits.max_file_bytes_total:,}. Remove large files or run without recordReplay."
        )
    files: dict[str, bytes] = {}
    for info in infos:
        data = workspace.read(info.path, max_bytes=max(1, int(info.size_bytes)))
        if hashlib.sha256(data).hexdigest() != info.sha256:
            raise ReplayCorrupt(
                f"'{info.path}' changed while the Turn was prepared; run the Turn again"
            )
        files[info.path] = data
    return files


def check_replay_files(
    files: Mapping[str, bytes],
    *,
    redactor: Redactor = NO_SECRETS,
    limits: ReplayLimits = DEFAULT_LIMITS,
) -> None:
    """The file checks of ``capture_replay`` alone (bounds, secrets in names and bytes); the engine
    runs them before a Turn is claimed, so a refused capture never starts the Turn."""
    if len(files) > limits.max_files:
        raise ReplayTooLarge(
            f"Replay capture needs {len(files)} files; the limit is {limits.max_files}"
        )
    total = sum(len(b) for b in files.values())
    if total > limits.max_file_bytes_total:
        raise ReplayTooLarge(
            f"Replay capture needs {total:,} bytes of workspace files; the limit is "
            f"{limits.max_file_bytes_total:,}. Remove large files or run without recordReplay."
        )
    for path, data in files.items():
        if redactor.contains_secret(path):
            raise ReplayRefused(
                f"Replay capture refused: the workspace file name '{redactor.text(path, 300)}' "
                "contains a configured secret value; rename the file or run without "
                "recordReplay (replays never store credentials)"
            )
        if redactor.contains_secret(data):
            raise ReplayRefused(
                f"'{redactor.text(path, 300)}' contains a configured secret value; replay capture "
                "refused (replays never store credentials)"
            )


def capture_replay(
    *,
    turn_id: str,
    session_id: str,
    task: str,
    mode: str,
    workspace_manifest: str,
    files: Mapping[str, bytes],
    configuration: Any,
    memory_summary: str = "",
    session_history: Any = None,
    skills_catalog: Any = None,
    dataset_context: Mapping[str, Any] | None = None,
    turn_timeout_seconds: int | None = None,
    versions: Mapping[str, str] | None = None,
    redactor: Redactor = NO_SECRETS,
    limits: ReplayLimits = DEFAULT_LIMITS,
) -> ReplaySnapshot:
    """Validate and assemble a snapshot; raises ``ReplayTooLarge``/``ReplayRefused`` (before the
    Turn runs). ``configuration`` is an ``EffectiveConfig`` (with Session overrides applied) or
    its settings as a dict; secrets are never part of it."""
    check_replay_files(files, redactor=redactor, limits=limits)
    if hasattr(configuration, "settings"):
        settings = configuration.settings.model_dump(mode="json")
        digest = configuration.digest()
    else:
        settings = dict(configuration)
        digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()
    digests = {p: hashlib.sha256(b).hexdigest() for p, b in sorted(files.items())}
    text_limit = limits.max_text_chars
    try:
        return ReplaySnapshot(
            turn_id=turn_id,
            session_id=session_id,
            task=redactor.text(task, text_limit),
            mode=mode,
            workspace_manifest=redactor.text(workspace_manifest, text_limit),
            files=digests,
            file_bytes={p: base64.b64encode(files[p]).decode() for p in digests},
            skill_revision_sha256=skill_revision(digests),
            skills_catalog=_json(redactor.value(skills_catalog, _LIMITS)),
            memory_summary=redactor.text(memory_summary, text_limit),
            session_history=_json(redactor.value(session_history, _LIMITS)),
            dataset_context=_json(redactor.value(dict(dataset_context), _LIMITS))
            if dataset_context
            else None,
            configuration=_json(redactor.value(settings, _LIMITS)),
            configuration_digest=digest,
            turn_timeout_seconds=turn_timeout_seconds,
            versions=dict(versions or default_versions()),
        )
    except ValidationError as exc:
        raise ReplayRefused(f"Replay snapshot is invalid: {exc.errors()[0]['msg']}") from None


def encode_replay(
    snapshot: ReplaySnapshot, *, limits: ReplayLimits = DEFAULT_LIMITS
) -> tuple[str, bytes]:
    """Canonical JSON → gzip (mtime 0) → ``(sha256 of the compressed bytes, bytes)``."""
    raw = canonical_json(snapshot.model_dump(mode="json"))
    if len(raw) > limits.max_json_bytes:
        raise ReplayTooLarge(
            f"Replay snapshot is {len(raw):,} bytes of JSON; the limit is {limits.max_json_bytes:,}"
        )
    blob = gzip.compress(raw, compresslevel=9, mtime=0)
    if len(blob) > limits.max_compressed_bytes:
        raise ReplayTooLarge(
            f"Replay snapshot is {len(blob):,} bytes compressed; the limit is "
            f"{limits.max_compressed_bytes:,}"
        )
    return hashlib.sha256(blob).hexdigest(), blob


def decode_replay(
    blob: bytes,
    expected_sha256: str,
    *,
    turn_id: str | None = None,
    session_id: str | None = None,
    limits: ReplayLimits = DEFAULT_LIMITS,
) -> ReplaySnapshot:
    """Verify and decode stored bytes; any mismatch raises ``ReplayCorrupt`` naming what failed."""
    if len(blob) > limits.max_compressed_bytes:
        raise ReplayCorrupt(
            f"Replay snapshot is {len(blob):,} bytes; the limit is {limits.max_compressed_bytes:,}"
        )
    actual = hashlib.sha256(blob).hexdigest()
    if actual != expected_sha256:
        raise ReplayCorrupt(
            f"Replay snapshot digest mismatch (expected {expected_sha256[:12]}…, got "
            f"{actual[:12]}…): the stored snapshot was tampered with or damaged"
        )
    try:
        inflater = zlib.decompressobj(wbits=31)
        raw = inflater.decompress(blob, limits.max_json_bytes + 1)
        if len(raw) > limits.max_json_bytes or inflater.unconsumed_tail:
            raise ReplayCorrupt(f"Replay snapshot JSON exceeds {limits.max_json_bytes:,} bytes")
        data = json.loads(raw)
    except (zlib.error, ValueError) as exc:
        raise ReplayCorrupt(f"Replay snapshot cannot be decoded: {exc}") from None
    if not isinstance(data, dict) or data.get("schema_version") != SCHEMA_VERSION:
        version = data.get("schema_version") if isinstance(data, dict) else None
        raise ReplayCorrupt(
            f"Unsupported replay schema version {version!r} (expected {SCHEMA_VERSION})"
        )
    try:
        snapshot = ReplaySnapshot.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ReplayCorrupt(f"Replay snapshot field '{where}': {first['msg']}") from None
    if set(snapshot.files) != set(snapshot.file_bytes):
        raise ReplayCorrupt("Replay snapshot file set differs from its digest map")
    total = 0
    for path, digest in snapshot.files.items():
        try:
            content = base64.b64decode(snapshot.file_bytes[path], validate=True)
        except ValueError:
            raise ReplayCorrupt(f"Replay file '{path}' is not valid base64") from None
        total += len(content)
        if hashlib.sha256(content).hexdigest() != digest:
            raise ReplayCorrupt(f"Replay file '{path}' does not match its recorded sha256")
    if total > limits.max_file_bytes_total:
        raise ReplayCorrupt(
            f"Replay files total {total:,} bytes; the limit is {limits.max_file_bytes_total:,}"
        )
    if skill_revision(snapshot.files) != snapshot.skill_revision_sha256:
        raise ReplayCorrupt("Replay Skill revision digest does not match its skills/ files")
    if turn_id is not None and snapshot.turn_id != turn_id:
        raise ReplayCorrupt(
            f"Replay snapshot belongs to Turn '{snapshot.turn_id}', not '{turn_id}'"
        )
    if session_id is not None and snapshot.session_id != session_id:
        raise ReplayCorrupt(
            f"Replay snapshot belongs to Session '{snapshot.session_id}', not '{session_id}'"
        )
    return snapshot


_LIMITS = Limits(max_string=200_000, max_items=1_000, max_depth=12, max_nodes=200_000)


def _json(value: Any) -> Any:
    """Plain JSON types only (strict model fields reject tuples and the like)."""
    return json.loads(json.dumps(value, default=str))
