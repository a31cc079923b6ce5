"""Agent spaces over our sandboxes: the Session workspace for the root, child workspaces below.

Each interpreter an RLM/Flex forward asks for is a ``SandboxInterpreter`` over a fresh sandbox on
the agent's workspace; sandbox I/O is awaited on the Turn's event loop through its blocking portal.
Children get a fresh workspace with copied inputs (``fleet_core.sandbox.children``) and, when they
succeed, their new artifacts are promoted to ``artifacts/<child-id>/`` with provenance.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from anyio.from_thread import BlockingPortal

from fleet_core.config import SandboxSettings
from fleet_core.engine.control import TurnControl
from fleet_core.models import ProvenanceRecord
from fleet_core.sandbox import SandboxLimits, SandboxSpec, create_sandbox
from fleet_core.sandbox.base import Sandbox
from fleet_core.sandbox.children import (
    ChildWorkspace,
    prepare_child_workspace,
    promote_child_artifacts,
)
from fleet_core.sandbox.interpreter import SandboxInterpreter
from fleet_core.workspace import Workspace


class _Prestarted:
    """A sandbox whose ``start()`` was already scheduled on the loop when it was created, so the
    worker boots while the agent's first model call is in flight; ``start()`` awaits that."""

    def __init__(self, sandbox: Sandbox, portal: BlockingPortal) -> None:
        self._sandbox = sandbox
        self._started = portal.start_task_soon(sandbox.start)

    async def start(self) -> Any:
        return await asyncio.wrap_future(self._started)

    async def destroy(self) -> None:
        with contextlib.suppress(BaseException):
            await asyncio.wrap_future(self._started)
        await self._sandbox.destroy()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sandbox, name)


class SandboxRuntime:
    """What every agent space of one Turn shares: settings, loop, portal, control, paths."""

    def __init__(
        self,
        *,
        settings: SandboxSettings,
        control: TurnControl,
        portal: BlockingPortal,
        loop: asyncio.AbstractEventLoop,
        session_id: str,
        turn_id: str,
        children_dir: Path,
    ) -> None:
        self.settings = settings
        self.control = control
        self.portal = portal
        self.loop = loop
        self.session_id = session_id
        self.turn_id = turn_id
        self.children_dir = children_dir
        self._tasks: set[asyncio.Task[Any]] = set()

    def interrupt_soon(self, sandbox: Sandbox) -> None:
        """Schedule ``sandbox.interrupt()`` on the loop from any thread; never blocks."""

        def start() -> None:
            task = self.loop.create_task(sandbox.interrupt())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

        with contextlib.suppress(RuntimeError):  # loop closed: nothing left to interrupt
            self.loop.call_soon_threadsafe(start)


class SandboxAgentSpace:
    """One agent's workspace and the sandboxes running its code."""

    def __init__(
        self,
        runtime: SandboxRuntime,
        workspace: Workspace,
        *,
        agent_id: str = "root",
        parent: SandboxAgentSpace | None = None,
        child: ChildWorkspace | None = None,
    ) -> None:
        self.runtime = runtime
        self.workspace = workspace
        self.agent_id = agent_id
        self.parent = parent
        self.parent_agent_id = parent.agent_id if parent else None
        self.depth: int = parent.depth + 1 if parent else 0
        self.child = child
        self._sandboxes: list[Sandbox] = []
        self._lock = threading.Lock()

    @property
    def ancestors(self) -> tuple[str, ...]:
        """Agent ids from below the root down to this agent (empty for the root)."""
        if self.parent is None:
            return ()
        return (*self.parent.ancestors, self.agent_id)

    def new_interpreter(self) -> tuple[SandboxInterpreter, Callable[[], None]]:
        """The DSPy adapter over a fresh sandbox on this workspace (its start already scheduled)
        and a non-blocking interrupt; the Turn's control is applied by ``TurnInterpreter``."""
        runtime = self.runtime
        spec = SandboxSpec(
            session_id=runtime.session_id,
            agent_id=self.agent_id,
            parent_agent_id=self.parent_agent_id,
            workspace=self.workspace.root,
            limits=SandboxLimits.from_settings(runtime.settings),
            labels={"turn": runtime.turn_id},
        )
        tree = self.workspace.change_tree() if self.child is None else None  # a child's is fresh
        sandbox = create_sandbox(spec, runtime.settings, tree=tree)
        with self._lock:
            self._sandboxes.append(sandbox)
        interpreter = SandboxInterpreter(
            _Prestarted(sandbox, runtime.portal), portal=runtime.portal, owns_sandbox=True
        )
        return interpreter, lambda: runtime.interrupt_soon(sandbox)

    def open_child(self, agent_id: str, input_paths: Sequence[str] | None) -> SandboxAgentSpace:
        root = self.runtime.children_dir / agent_id
        child = prepare_child_workspace(
            self.workspace,
            root,
            agent_id=agent_id,
            parent_agent_id=self.agent_id,
            ancestors=self.ancestors,
            input_paths=list(input_paths) if input_paths is not None else None,
            max_entries=self.runtime.settings.max_files,
        )
        return SandboxAgentSpace(
            self.runtime, child.workspace, agent_id=agent_id, parent=self, child=child
        )

    def promote(self) -> list[ProvenanceRecord]:
        if self.child is None or self.parent is None:
            return []
        with self._lock:
            sandbox_id = self._sandboxes[-1].id if self._sandboxes else ""
        settings = self.runtime.settings
        result = promote_child_artifacts(
            self.child,
            self.parent.workspace,
            source_sandbox_id=sandbox_id,
            max_files=settings.child_max_promoted_files,
            max_bytes=settings.child_max_promoted_bytes,
            max_entries=settings.max_files,
        )
        return [
            ProvenanceRecord(
                path=r.path,
                root_path=r.root_path,
                sha256=r.sha256,
                size_bytes=r.size_bytes,
                agent_id=r.source_agent_id,
                source_sandbox=r.source_sandbox_id,
                parent_chain=list(self.ancestors[:-1]),
                turn_id=self.runtime.turn_id,
            )
            for r in result.promoted
        ]

    def close(self) -> None:
        with self._lock:
            sandboxes, self._sandboxes = list(self._sandboxes), []
        for sandbox in sandboxes:
            try:
                self.runtime.portal.call(sandbox.destroy)
            except Exception:  # noqa: S112 - best effort; the interpreter already destroyed it
                continue
        if self.child is not None:
            shutil.rmtree(self.child.root, ignore_errors=True)
