"""Weights assembly: parts concatenated in order, verified by sha256, idempotent, bounded."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

import pytest

from fleet_core.errors import ModelUnavailable
from fleet_core.localmodel.weights import QWEN_CODER_1_5B, assemble, assembled, locate_parts
from tests.localmodel.conftest import make_parts


def test_assembles_parts_in_order_with_progress(tmp_path: Path) -> None:
    parts, spec = make_parts(tmp_path / "parts")
    seen: list[tuple[int, int]] = []
    target = assemble(
        spec, tmp_path / "home", parts=parts, progress=lambda d, t: seen.append((d, t))
    )
    assert target.read_bytes() == b"".join(p.read_bytes() for p in parts)
    assert hashlib.sha256(target.read_bytes()).hexdigest() == spec.sha256
    assert seen[-1] == (spec.size_bytes, spec.size_bytes)
    assert assembled(spec, tmp_path / "home") == target


def test_assembly_is_idempotent(tmp_path: Path) -> None:
    parts, spec = make_parts(tmp_path / "parts")
    target = assemble(spec, tmp_path / "home", parts=parts)
    before = target.stat().st_mtime_ns
    calls: list[int] = []
    again = assemble(spec, tmp_path / "home", parts=parts, progress=lambda d, t: calls.append(d))
    assert again == target and target.stat().st_mtime_ns == before and calls == []


def test_changed_file_is_not_trusted(tmp_path: Path) -> None:
    """A file changed after verification is not reported as assembled (it is rebuilt)."""
    parts, spec = make_parts(tmp_path / "parts")
    target = assemble(spec, tmp_path / "home", parts=parts)
    target.write_bytes(b"x" * spec.size_bytes)
    assert assembled(spec, tmp_path / "home") is None
    assert (
        assemble(spec, tmp_path / "home", parts=parts).read_bytes()[:10]
        == parts[0].read_bytes()[:10]
    )


def test_wrong_digest_is_refused_and_nothing_is_kept(tmp_path: Path) -> None:
    parts, spec = make_parts(tmp_path / "parts")
    wrong = dataclasses.replace(spec, sha256="0" * 64)
    home = tmp_path / "home"
    with pytest.raises(ModelUnavailable, match="sha256"):
        assemble(wrong, home, parts=parts)
    assert not (home / spec.file_name).exists()
    assert [p.name for p in home.iterdir() if not p.name.startswith(".assemble")] == []


def test_parts_in_the_wrong_order_fail_the_digest(tmp_path: Path) -> None:
    parts, spec = make_parts(tmp_path / "parts")
    with pytest.raises(ModelUnavailable, match="sha256"):
        assemble(spec, tmp_path / "home", parts=list(reversed(parts)))


def test_short_disk_is_refused_before_writing(tmp_path: Path) -> None:
    parts, spec = make_parts(tmp_path / "parts")
    huge = dataclasses.replace(spec, size_bytes=1 << 60)
    with pytest.raises(ModelUnavailable, match="Not enough disk space") as info:
        assemble(huge, tmp_path / "home", parts=parts)
    assert "[local_model] directory" in info.value.message
    assert not (tmp_path / "home" / spec.file_name).exists()


def test_missing_parts_name_the_extra() -> None:
    missing = dataclasses.replace(
        QWEN_CODER_1_5B, part_modules=("no_such_part_pkg_1", "no_such_part_pkg_2")
    )
    with pytest.raises(ModelUnavailable, match="local-model"):
        locate_parts(missing)
