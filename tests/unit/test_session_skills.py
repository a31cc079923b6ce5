"""Session Skills in the catalog (``skills.discover_session``): valid folders only, never a
bundled or user name, bounded; and ``.agents/skills`` is never read as Skill content."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet_core import skills as skill_lib
from fleet_core.workspace import Workspace


def _workspace(tmp_path: Path) -> Workspace:
    workspace = Workspace(tmp_path / "ws", max_file_bytes=10_000_000, max_read_bytes=10_000_000)
    workspace.ensure_layout()
    return workspace


def _skill_md(name: str, description: str = "Does a thing") -> bytes:
    return f"---\nname: {name}\ndescription: {description}\n---\n\nSteps.\n".encode()


def test_session_skills_are_valid_folders_not_shadowing_known_ones(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path)
    known = skill_lib.discover(None)
    skill_lib.sync(workspace, known)
    workspace.write("skills/alpha/SKILL.md", _skill_md("alpha"))
    workspace.write("skills/broken/SKILL.md", b"no front matter")
    workspace.write("skills/tabular-analysis/SKILL.md", _skill_md("tabular-analysis", "mine"))
    found = skill_lib.discover_session(workspace, known)
    assert [(s.name, s.source) for s in found] == [("alpha", "session")]
    catalog = skill_lib.catalog(sorted(known + found, key=lambda s: s.name))
    assert '<skill name="alpha">Does a thing</skill>' in catalog
    assert catalog.count('<skill name="tabular-analysis">') == 1


def test_the_catalog_lists_at_most_the_session_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = _workspace(tmp_path)
    for i in range(4):
        workspace.write(f"skills/s{i}/SKILL.md", _skill_md(f"s{i}"))
    monkeypatch.setattr(skill_lib, "MAX_SESSION_SKILLS", 3)
    assert [s.name for s in skill_lib.discover_session(workspace, [])] == ["s0", "s1", "s2"]


def test_a_user_skills_folder_under_agents_skills_is_never_read(tmp_path: Path) -> None:
    folder = tmp_path / ".agents" / "skills"
    (folder / "guide").mkdir(parents=True)
    (folder / "guide" / "SKILL.md").write_bytes(_skill_md("guide"))
    assert skill_lib.is_forbidden_dir(folder)
    assert skill_lib.is_forbidden_dir(folder / "guide")
    assert not skill_lib.is_forbidden_dir(tmp_path / ".fleet" / "skills")
    names = {s.name for s in skill_lib.discover(folder)}
    assert "guide" not in names and "tabular-analysis" in names
    ordinary = tmp_path / ".fleet" / "skills"
    (ordinary / "guide").mkdir(parents=True)
    (ordinary / "guide" / "SKILL.md").write_bytes(_skill_md("guide"))
    assert "guide" in {s.name for s in skill_lib.discover(ordinary)}
