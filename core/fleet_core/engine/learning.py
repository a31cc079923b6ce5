"""What a Turn's code asks the Session to keep: memories (``workspace.remember``) and Skills
(``save_skill``). Both are host tools bridged into every agent's sandbox.

- ``workspace.remember(name, content)`` proposes an *unreviewed* memory (``kind: "sandbox"``,
  ``sources: {name, turnId, agentId}``). It is checked when proposed (name, content, the per-Turn
  and per-Session bounds: a refusal is an error the model's code sees, naming the bound) and
  committed with the Turn's outcome (``Store.finish_turn``), so nothing of a Turn whose commit
  is refused persists. Only a person's review lets it reach the model.
- ``save_skill(name, content, replace=False, description=None)`` writes a Session Skill's
  ``SKILL.md`` under the Session workspace's ``skills/<name>/`` at once (files are not
  transactional; the next Turn's catalog lists it). Names follow the Skill rule, the text is
  validated like any ``SKILL.md`` and bounded, an existing Skill is replaced only with
  ``replace=True``, a bundled or user Skill's name is refused (those are synced from their
  source each Turn), and the catalog's bound on Session Skills holds. Nothing is ever written
  outside ``skills/<name>/SKILL.md``.

Both emit a typed event (``memory_proposed``, ``skill_saved``) that the Turn's trace records.
"""

from __future__ import annotations

import re
import threading
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from fleet_core import skills as skill_lib
from fleet_core.engine.control import TurnControl
from fleet_core.errors import InvalidInput
from fleet_core.event_payloads import MemoryProposedPayload, SkillSavedPayload
from fleet_core.models import Memory
from fleet_core.workspace import Workspace

SANDBOX_MEMORY_KIND = "sandbox"
MEMORY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
MAX_REMEMBERED_PER_TURN = 20

WORKSPACE_HELPER = '''
class _FleetWorkspace:
    """Session helpers: workspace.remember(name, content) proposes a memory for review."""

    def remember(self, name, content):
        """Propose an unreviewed memory; a person reviews it before any Turn sees it."""
        return workspace_remember(name=name, content=content)

    def __repr__(self):
        return "<workspace: remember(name, content)>"


workspace = _FleetWorkspace()
'''
"""Sandbox source run with the Turn's other helpers: the ``workspace`` object over the
``workspace_remember`` host tool."""

INSTRUCTIONS = (
    " To keep something for later Turns, call workspace.remember(name, content): it proposes an "
    "unreviewed memory that a person reviews before any Turn sees it. save_skill(name, content, "
    "replace=False, description=None) saves a reusable Skill (content: its SKILL.md, with "
    "front matter name and description, or pass description) for this Session's next Turns."
)


class TurnLearning:
    """One Turn's memory proposals and Skill saves (thread-safe: children call it too)."""

    def __init__(
        self,
        *,
        control: TurnControl,
        workspace: Workspace,
        turn_id: str,
        known_skills: Sequence[skill_lib.Skill],
        memory_count: int,
        memories_per_session: int,
        memory_chars: int,
    ) -> None:
        self.control = control
        self.workspace = workspace
        self.turn_id = turn_id
        self._reserved = {s.name: s.source for s in known_skills}
        self._known_count = len(known_skills)
        self._room = max(memories_per_session - memory_count, 0)
        self._per_session = memories_per_session
        self._memory_chars = memory_chars
        self._memories: list[Memory] = []
        self._lock = threading.Lock()

    @property
    def memories(self) -> list[Memory]:
        """The memories proposed so far (committed with the Turn's outcome)."""
        with self._lock:
            return list(self._memories)

    def tools(self, agent_id: str, parent_agent_id: str | None) -> list[Callable[..., Any]]:
        """The host tools for one agent's sandbox."""

        def workspace_remember(name: str, content: str) -> dict[str, Any]:
            """Propose an unreviewed memory (use workspace.remember(name, content))."""
            return self.remember(name, content, agent_id, parent_agent_id)

        def save_skill(
            name: str, content: str, replace: bool = False, description: str | None = None
        ) -> dict[str, Any]:
            """Save a Session Skill: content is its SKILL.md (front matter name + description,
            or pass description); replace=True to overwrite an existing one."""
            return self.save_skill(name, content, replace, description, agent_id, parent_agent_id)

        return [workspace_remember, save_skill]

    # --- memories ----------------------------------------------------------------------------

    def remember(
        self, name: object, content: object, agent_id: str, parent_agent_id: str | None
    ) -> dict[str, Any]:
        if not isinstance(name, str) or not MEMORY_NAME.fullmatch(name):
            raise InvalidInput(
                "workspace.remember: name must be 1-64 letters, digits, '_', '.' or '-' "
                f"starting with a letter or digit (got {str(name)[:80]!r})"
            )
        if not isinstance(content, str):
            raise InvalidInput("workspace.remember: content must be a string")
        text = content.strip()
        if not text:
            raise InvalidInput("workspace.remember: content must not be empty")
        if len(text) > self._memory_chars:
            raise InvalidInput(
                f"workspace.remember: a memory holds at most {self._memory_chars} characters "
                f"(got {len(text)}); keep the essential part"
            )
        with self._lock:
            if len(self._memories) >= MAX_REMEMBERED_PER_TURN:
                raise InvalidInput(
                    f"workspace.remember: a Turn proposes at most {MAX_REMEMBERED_PER_TURN} "
                    "memories; this one was not kept"
                )
            if len(self._memories) >= self._room:
                raise InvalidInput(
                    f"workspace.remember: the Session already holds {self._per_session} "
                    "memories (the limit); this one was not kept"
                )
            memory = Memory(
                memory_id=uuid.uuid4().hex,
                kind=SANDBOX_MEMORY_KIND,
                content=text,
                sources={"name": name, "turnId": self.turn_id, "agentId": agent_id},
                created_at=datetime.now(UTC),
            )
            self._memories.append(memory)
        self.control.emit(
            "memory_proposed",
            MemoryProposedPayload(
                memory_id=memory.memory_id, name=name, kind=SANDBOX_MEMORY_KIND, chars=len(text)
            ),
            agent_id=agent_id,
            parent_agent_id=parent_agent_id,
        )
        return {
            "memory_id": memory.memory_id,
            "status": "proposed: unreviewed until a person reviews it",
        }

    # --- skills ------------------------------------------------------------------------------

    def save_skill(
        self,
        name: object,
        content: object,
        replace: object,
        description: object,
        agent_id: str,
        parent_agent_id: str | None,
    ) -> dict[str, Any]:
        try:
            return self._save_skill(name, content, replace, description, agent_id, parent_agent_id)
        except skill_lib.SkillError as exc:  # one kind and prefix for every refusal
            raise InvalidInput(f"save_skill: {exc}") from None

    def _save_skill(
        self,
        name: object,
        content: object,
        replace: object,
        description: object,
        agent_id: str,
        parent_agent_id: str | None,
    ) -> dict[str, Any]:
        name = skill_lib.check_name(name)
        if not isinstance(content, str):
            raise InvalidInput("save_skill: content must be a string (the SKILL.md text)")
        if description is not None and not content.lstrip().startswith("---"):
            if not isinstance(description, str):
                raise InvalidInput("save_skill: description must be a string")
            description = " ".join(description.split())
            content = f"---\nname: {name}\ndescription: {description}\n---\n\n{content.strip()}\n"
        data = content.encode("utf-8")
        if len(data) > skill_lib.MAX_SAVED_SKILL_BYTES:
            raise InvalidInput(
                f"save_skill: SKILL.md would be {len(data):,} bytes; the limit is "
                f"{skill_lib.MAX_SAVED_SKILL_BYTES:,}"
            )
        if not content.lstrip().startswith("---"):
            raise InvalidInput(
                "save_skill: content must be a SKILL.md starting with front matter, e.g. "
                f"'---\\nname: {name}\\ndescription: <one line>\\n---\\n<instructions>', "
                "or pass description=..."
            )
        skill_lib.check_skill_md(name, content)
        source = self._reserved.get(name)
        if source is not None:
            raise InvalidInput(
                f"save_skill: {name!r} is a {source} Skill, synced from its source before every "
                "Turn; choose another name"
            )
        path = f"skills/{name}/SKILL.md"
        with self._lock:
            existing = self._session_skill_names()
            exists = name in existing
            if exists and replace is not True:
                raise InvalidInput(
                    f"save_skill: Skill {name!r} already exists in this Session; pass "
                    "replace=True to overwrite it"
                )
            room = min(skill_lib.MAX_SESSION_SKILLS, skill_lib.MAX_SKILLS - self._known_count)
            if not exists and len(existing) >= room:
                raise InvalidInput(
                    f"save_skill: the Session already holds {len(existing)} saved Skills "
                    f"(the catalog lists at most {room}); replace one instead"
                )
            info = self.workspace.write(path, data)
        self.control.emit(
            "skill_saved",
            SkillSavedPayload(
                name=name,
                path=path,
                size_bytes=info.size_bytes,
                sha256=info.sha256,
                replaced=exists,
            ),
            agent_id=agent_id,
            parent_agent_id=parent_agent_id,
        )
        return {"name": name, "path": path, "replaced": exists, "sha256": info.sha256}

    def _session_skill_names(self) -> set[str]:
        root = self.workspace.root / "skills"
        if root.is_symlink() or not root.is_dir():
            return set()
        return {
            p.name
            for p in root.iterdir()
            if p.name not in self._reserved and not p.name.startswith(".") and p.is_dir()
        }
