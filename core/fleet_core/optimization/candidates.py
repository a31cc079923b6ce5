"""Candidates on disk, their manifests, identities and approval.

Layout (``<state_dir>/optimization/<session_id>/``): ``candidates/<version>/`` holds
``program.json`` (the candidate's bytes), ``manifest.json``, ``report.md`` and ``scores.svg``.
A candidate directory is staged under a dot-name and renamed into place in one step, so a
cancelled or crashed run never leaves a half-written candidate (staging directories older than
an hour are removed by the next run). ``active.json`` is the served program (``program.py``).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import time
from datetime import UTC, datetime
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from fleet_core.evaluation.metric import SCORER_VERSION
from fleet_core.optimization.dataset import OptimizationRefused
from fleet_core.optimization.gate import GateVerdict, evaluate_gate
from fleet_core.optimization.program import (
    DEFAULT_PROGRAM_DIGEST,
    ProgramState,
    active_path,
    atomic_write,
    optimization_dir,
    read_regular,
)
from fleet_core.optimization.validation import Observation

MAX_MANIFEST_BYTES = 20_000_000
STAGING_STALE_SECONDS = 3_600  # saving a candidate takes well under a second
REEVALUATE = "the evidence is stale; reevaluate (run fleet-lsp optimize again)"


@cache
def code_digest() -> str:
    """sha256 over every ``.py`` file of the installed fleet_core package (path and bytes)."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def dependency_versions() -> dict[str, str]:
    found = {"python": platform.python_version(), "scorer": SCORER_VERSION}
    for dist in ("fleet-core", "dspy", "gepa", "mlflow"):
        try:
            found[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            found[dist] = "absent"
    return found


class Identity(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    incumbent_digest: str
    configuration_digest: str
    code_digest: str
    dependencies: dict[str, str]


class Manifest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    version: str
    session_id: str
    created_at: str
    candidate_digest: str
    identity: Identity
    dataset: dict[str, Any]
    search: dict[str, Any]
    changed_components: list[str]
    evaluation: list[Observation]
    gate: GateVerdict


def new_version(session_id: str) -> str:
    return f"{session_id}-{os.urandom(16).hex()}"


VERSION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}-[0-9a-f]{32}$")


def candidate_dir(state_dir: Path, session_id: str, version: str) -> Path:
    if not VERSION_RE.match(version) or not version.startswith(f"{session_id}-"):
        raise OptimizationRefused(
            f"'{version[:100]}' is not a candidate version of Session '{session_id}' "
            f"(expected {session_id}-<32 hex>; see fleet-lsp optimize --session {session_id} "
            "--status)"
        )
    return optimization_dir(state_dir, session_id) / "candidates" / version


def save_candidate(
    state_dir: Path,
    manifest: Manifest,
    program: ProgramState,
    report: str,
    plot_svg: str,
) -> Path:
    """Stage every file, then rename the directory into place (all or nothing)."""
    final = candidate_dir(state_dir, manifest.session_id, manifest.version)
    staging = final.parent / f".staging-{manifest.version}"
    staging.mkdir(parents=True, exist_ok=False)
    try:
        atomic_write(staging / "program.json", program.canonical())
        atomic_write(staging / "report.md", report.encode())
        atomic_write(staging / "scores.svg", plot_svg.encode())
        atomic_write(staging / "manifest.json", manifest.model_dump_json(indent=1).encode())
        os.rename(staging, final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return final


def sweep_staging(state_dir: Path, session_id: str) -> None:
    """Remove staging directories a crashed run left (older than ``STAGING_STALE_SECONDS``: a
    run in another process may be staging its candidate right now)."""
    root = optimization_dir(state_dir, session_id) / "candidates"
    if not root.is_dir():
        return
    cutoff = time.time() - STAGING_STALE_SECONDS
    for entry in root.iterdir():
        if not entry.name.startswith(".staging-"):
            continue
        try:
            stale = entry.lstat().st_mtime < cutoff
        except FileNotFoundError:
            continue
        if stale:
            shutil.rmtree(entry, ignore_errors=True)


def _read_candidate_file(state_dir: Path, session_id: str, version: str, name: str) -> bytes:
    path = candidate_dir(state_dir, session_id, version) / name
    try:
        data = read_regular(path, MAX_MANIFEST_BYTES)
    except OSError as exc:
        raise OptimizationRefused(f"Candidate {version}: {exc}") from None
    if data is None:
        raise OptimizationRefused(f"Session '{session_id}' has no candidate {version}")
    return data


def load_manifest(state_dir: Path, session_id: str, version: str) -> Manifest:
    data = _read_candidate_file(state_dir, session_id, version, "manifest.json")
    try:
        return Manifest.model_validate_json(data)
    except ValueError:
        raise OptimizationRefused(f"Candidate {version}: its manifest is invalid") from None


def list_candidates(state_dir: Path, session_id: str) -> list[Manifest]:
    root = optimization_dir(state_dir, session_id) / "candidates"
    found: list[Manifest] = []
    if not root.is_dir():
        return found
    for entry in sorted(root.iterdir()):
        if entry.name.startswith("."):
            continue
        try:
            found.append(load_manifest(state_dir, session_id, entry.name))
        except OptimizationRefused:
            continue
    found.sort(key=lambda m: m.created_at)
    return found


def active_digest(state_dir: Path, session_id: str) -> str:
    data = read_regular(active_path(state_dir, session_id))
    if data is None:
        return DEFAULT_PROGRAM_DIGEST
    return ProgramState.parse(data).digest()


def read_report(state_dir: Path, session_id: str, version: str) -> str:
    data = _read_candidate_file(state_dir, session_id, version, "report.md")
    return data.decode("utf-8", errors="replace")


def approve(state_dir: Path, session_id: str, version: str, current: Identity) -> Manifest:
    """Re-check everything, then write the active program atomically; refusals say why."""
    manifest = load_manifest(state_dir, session_id, version)
    directory = candidate_dir(state_dir, session_id, version)
    dev_ids = sorted({o.example_id for o in manifest.evaluation if o.split == "dev"})
    hold_ids = sorted({o.example_id for o in manifest.evaluation if o.split == "holdout"})
    verdict = evaluate_gate(
        manifest.evaluation,
        changed=manifest.changed_components,
        dev_ids=dev_ids,
        holdout_ids=hold_ids,
    )
    if not verdict.passed:
        failed = "; ".join(f"{c.name}: {c.detail}" for c in verdict.failures())
        raise OptimizationRefused(f"Candidate {version} does not pass the gate ({failed})")
    try:
        data = read_regular(directory / "program.json")
    except OSError as exc:
        raise OptimizationRefused(f"Candidate {version}: {exc}") from None
    if data is None or hashlib.sha256(data).hexdigest() != manifest.candidate_digest:
        raise OptimizationRefused(
            f"Candidate {version}: its program bytes do not match the manifest's digest"
        )
    program = ProgramState.parse(data)
    if program.digest() != manifest.candidate_digest:
        raise OptimizationRefused(f"Candidate {version}: its program is not in canonical form")
    recorded = manifest.identity
    stale = []
    if current.incumbent_digest != recorded.incumbent_digest:
        stale.append("the active program changed since the evaluation")
    if current.configuration_digest != recorded.configuration_digest:
        stale.append("the configuration (with the Session's overrides) changed")
    if current.code_digest != recorded.code_digest:
        stale.append("the fleet-core code changed")
    if current.dependencies != recorded.dependencies:
        changed = sorted(
            k
            for k in set(current.dependencies) | set(recorded.dependencies)
            if current.dependencies.get(k) != recorded.dependencies.get(k)
        )
        stale.append(f"dependency versions changed ({', '.join(changed)})")
    if stale:
        raise OptimizationRefused(f"Candidate {version}: {'; '.join(stale)}: {REEVALUATE}")
    try:
        atomic_write(active_path(state_dir, session_id), data)
    except OSError as exc:
        raise OptimizationRefused(f"The active program was not written: {exc}") from None
    return manifest


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True)
