"""Skills: bundled (shipped in this package) and user Skills from ``.fleet/skills/<name>/``.

A Skill is a folder ``<name>/SKILL.md`` whose YAML-style front matter has ``name`` (equal to the
folder) and ``description`` (1-1024 chars), followed by a non-empty body; optional ``scripts/``,
``references/`` and ``assets/`` files. Skills are validated, then synchronized into the Session
workspace under ``skills/<name>/``; the catalog (names and descriptions) is a Turn input and the
sandbox can read a Skill with ``use_skill(name=...)``. A user Skill with a bundled name wins.

Session Skills are the ones a Turn saved with ``save_skill`` (``fleet_core.engine.learning``): they
live only in that Session's ``skills/<name>/``, never under ``.agents/skills/`` (developer guidance,
never Skill content) nor in the user folder; ``discover_session`` lists them for the catalog,
after the bundled and user Skills and never replacing one, at most ``MAX_SESSION_SKILLS``.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from html import escape
from pathlib import Path

from fleet_core.errors import InvalidInput
from fleet_core.workspace import Workspace

BUNDLED_DIR = Path(__file__).parent / "bundled"
NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
MAX_NAME = 64
MAX_DESCRIPTION = 1024
MAX_FILE_BYTES = 1_000_000
MAX_FILES = 200
MAX_TOTAL_BYTES = 5_000_000
MAX_SKILLS = 200
MAX_SESSION_SKILLS = 50  # Skills a Session's Turns saved that the catalog lists
MAX_SAVED_SKILL_BYTES = 200_000  # one saved SKILL.md (the predecessor's instructions bound)
FORBIDDEN_DIR = (".agents", "skills")  # developer guidance: never read or written as Skills


class SkillError(InvalidInput):
    kind = "SkillInvalid"


@dataclass(frozen=True, slots=True)
class Skill:
    name: str
    description: str
    body: str
    source: str  # "bundled" | "user"
    files: dict[str, bytes] = field(default_factory=dict)  # relative path -> bytes (incl. SKILL.md)


def parse_front_matter(text: str, *, where: str) -> tuple[dict[str, str], str]:
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        raise SkillError(f"{where}: SKILL.md must start with '---' front matter")
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() == "---")
    except StopIteration:
        raise SkillError(f"{where}: SKILL.md front matter is not closed with '---'") from None
    meta: dict[str, str] = {}
    for line in lines[1:end]:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, sep, value = line.partition(":")
        if not sep or not key.strip().isidentifier():
            raise SkillError(f"{where}: front matter line {line!r} is not 'key: value'")
        meta[key.strip()] = value.strip().strip('"').strip("'")
    return meta, "\n".join(lines[end + 1 :]).strip()


def load_skill(folder: Path, *, source: str) -> Skill:
    """Validate one Skill folder (no symlinks, caps on files and bytes)."""
    name = folder.name
    where = f"Skill '{name}'"
    if len(name) > MAX_NAME or not NAME.fullmatch(name):
        raise SkillError(f"{where}: the folder name must be lowercase words joined by '-'")
    files: dict[str, bytes] = {}
    total = 0
    for path in sorted(_walk(folder, where)):
        rel = path.relative_to(folder).as_posix()
        if path.stat().st_size > MAX_FILE_BYTES:  # checked before reading it
            raise SkillError(f"{where}: {rel} is larger than {MAX_FILE_BYTES:,} bytes")
        data = path.read_bytes()
        if len(data) > MAX_FILE_BYTES:
            raise SkillError(f"{where}: {rel} is larger than {MAX_FILE_BYTES:,} bytes")
        total += len(data)
        files[rel] = data
        if len(files) > MAX_FILES or total > MAX_TOTAL_BYTES:
            raise SkillError(f"{where}: more than {MAX_FILES} files or {MAX_TOTAL_BYTES:,} bytes")
    if "SKILL.md" not in files:
        raise SkillError(f"{where}: SKILL.md is missing")
    try:
        text = files["SKILL.md"].decode("utf-8")
    except UnicodeDecodeError:
        raise SkillError(f"{where}: SKILL.md is not UTF-8") from None
    description, body = check_skill_md(name, text)
    return Skill(name=name, description=description, body=body, source=source, files=files)


def check_name(name: object) -> str:
    """A Skill name: lowercase letters and digits in words joined by single '-', 1-64 chars."""
    if not isinstance(name, str) or len(name) > MAX_NAME or not NAME.fullmatch(name):
        raise SkillError(
            f"Skill name {str(name)[:80]!r} is invalid: use lowercase letters and digits in "
            f"words joined by single '-' (at most {MAX_NAME} characters), e.g. 'csv-cleanup'"
        )
    return name


def check_skill_md(name: str, text: str) -> tuple[str, str]:
    """Validate a SKILL.md's text for Skill ``name``; returns (description, body)."""
    where = f"Skill '{name}'"
    meta, body = parse_front_matter(text, where=where)
    if meta.get("name") != name:
        raise SkillError(f"{where}: front matter name must equal the folder name")
    description = meta.get("description", "")
    if not 1 <= len(description) <= MAX_DESCRIPTION:
        raise SkillError(f"{where}: description must be 1-{MAX_DESCRIPTION} characters")
    if not body:
        raise SkillError(f"{where}: SKILL.md has no instructions after the front matter")
    return description, body


def _walk(folder: Path, where: str) -> list[Path]:
    found: list[Path] = []
    mode = os.lstat(folder).st_mode
    if stat.S_ISLNK(mode):
        raise SkillError(f"{where}: the folder is a symlink")
    for entry in os.scandir(folder):
        path = Path(entry.path)
        if entry.is_symlink():
            raise SkillError(f"{where}: {entry.name} is a symlink; symlinks are not allowed")
        if entry.is_dir(follow_symlinks=False):
            found.extend(_walk(path, where))
        elif entry.is_file(follow_symlinks=False):
            found.append(path)
        else:
            raise SkillError(f"{where}: {entry.name} is not a regular file")
    return found


def is_forbidden_dir(path: Path) -> bool:
    """Whether ``path`` is or lies under a ``.agents/skills`` folder (never Skill content)."""
    parts = path.parts
    return any(parts[i : i + 2] == FORBIDDEN_DIR for i in range(len(parts) - 1))


def discover(user_dir: Path | None) -> list[Skill]:
    """Bundled Skills, replaced by user Skills of the same name; sorted by name. A user folder
    under ``.agents/skills`` is never read."""
    skills = {s.name: s for s in _load_dir(BUNDLED_DIR, "bundled")}
    if user_dir is not None and is_forbidden_dir(user_dir):
        user_dir = None
    if user_dir is not None and user_dir.is_dir() and not user_dir.is_symlink():
        skills.update({s.name: s for s in _load_dir(user_dir, "user")})
    if len(skills) > MAX_SKILLS:
        raise SkillError(f"More than {MAX_SKILLS} Skills")
    return [skills[name] for name in sorted(skills)]


def _load_dir(root: Path, source: str) -> list[Skill]:
    return [
        load_skill(p, source=source) for p in sorted(root.iterdir()) if not p.name.startswith(".")
    ]


def discover_session(workspace: Workspace, known: list[Skill]) -> list[Skill]:
    """The Session Skills in ``skills/`` of ``workspace``: folders that are not a bundled or user
    Skill (``known``), valid, sorted by name, at most ``MAX_SESSION_SKILLS`` (the first by name)
    and never beyond ``MAX_SKILLS`` in all. An invalid folder is skipped, never fatal: a Turn's
    code can write under ``skills/`` too."""
    taken = {s.name for s in known}
    room = min(MAX_SESSION_SKILLS, MAX_SKILLS - len(known))
    root = workspace.root / "skills"
    if room <= 0 or root.is_symlink() or not root.is_dir():
        return []
    found: list[Skill] = []
    for folder in sorted(root.iterdir()):
        if len(found) >= room:
            break
        if folder.name in taken or folder.name.startswith(".") or folder.is_symlink():
            continue
        if not folder.is_dir():
            continue
        try:
            found.append(load_skill(folder, source="session"))
        except (SkillError, OSError):
            continue
    return found


def sync(workspace: Workspace, skills: list[Skill]) -> int:
    """Write each Skill's files under ``skills/<name>/`` where they differ; returns the count."""
    written = 0
    for skill in skills:
        for rel, data in skill.files.items():
            path = f"skills/{skill.name}/{rel}"
            try:
                if workspace.read(path) == data:
                    continue
            except Exception:  # noqa: S110 - missing or unreadable: (re)write it
                pass
            workspace.write(path, data)
            written += 1
    return written


def catalog(skills: list[Skill]) -> str:
    """The Stage-1 catalog shown to the model."""
    if not skills:
        return "No Skills installed."
    rows = [f'<skill name="{escape(s.name)}">{escape(s.description)}</skill>' for s in skills]
    return "<available_skills>\n" + "\n".join(rows) + "\n</available_skills>"


def use_skill_text(skills: list[Skill], name: str) -> str:
    """Stage 2: a Skill's header, resources and instructions."""
    for skill in skills:
        if skill.name == name:
            resources = sorted(p for p in skill.files if p != "SKILL.md")
            listing = "\n".join(f"- skills/{name}/{p}" for p in resources) or "(none)"
            return (
                f"# Skill {name}\n{skill.description}\n\nResources:\n{listing}\n\n"
                f"Instructions:\n{skill.body}"
            )
    known = ", ".join(s.name for s in skills) or "none"
    raise SkillError(f"No Skill named {name!r}; available: {known}")
