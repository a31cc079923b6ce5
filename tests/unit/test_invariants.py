"""The architecture's import invariants (docs/ARCHITECTURE.md), checked on the source."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CORE = REPO / "core" / "fleet_core"

# library -> the only places in fleet_core allowed to import it (paths relative to fleet_core/)
ROOMS = {
    # engine/; the DSPy CodeInterpreter adapter (lazily); the judge programs (evaluation/judge.py)
    "dspy": ("engine/", "sandbox/interpreter.py", "evaluation/"),
    "litellm": ("engine/",),
    "mlflow": ("observability/",),
    "sqlalchemy": ("store/",),
    "alembic": ("store/",),
    "psycopg": ("store/",),
    "psycopg_pool": ("store/",),
    "daytona": ("sandbox/daytona.py", "sandbox/daytona_support.py"),
}
NEVER_IN_CORE = ("fleet_lsp", "pygls", "lsprotocol", "typer", "rich")


def imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


CORE_FILES = sorted(CORE.rglob("*.py"))


@pytest.mark.parametrize("path", CORE_FILES, ids=lambda p: str(p.relative_to(CORE)))
def test_core_imports_stay_in_their_rooms(path: Path) -> None:
    relative = path.relative_to(CORE).as_posix()
    roots = imported_roots(path)
    assert not roots & set(NEVER_IN_CORE), f"{relative} imports a front-end library"
    for library, rooms in ROOMS.items():
        if library in roots:
            assert relative.startswith(rooms), f"{relative} imports {library} outside {rooms}"


def test_the_server_module_loads_no_heavy_library() -> None:
    code = (
        "import sys, fleet_lsp.server, fleet_core.runtime\n"
        "heavy = {'dspy', 'mlflow', 'litellm', 'daytona', 'pandas', 'numpy'} & set(sys.modules)\n"
        "print(','.join(sorted(heavy)))"
    )
    found = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert found == ""
