"""The architecture's import invariants (docs/ARCHITECTURE.md), checked on the source."""

from __future__ import annotations

import ast
import itertools
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CORE = REPO / "core" / "fleet_core"

# library -> the only places in fleet_core allowed to import it (paths relative to fleet_core/)
ROOMS = {
    # engine/; the DSPy CodeInterpreter adapter (lazily); the judge programs (evaluation/judge.py)
    "dspy": ("engine/", "sandbox/interpreter.py", "evaluation/", "optimization/search.py"),
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


def _loaded(imports: str, libraries: set[str]) -> str:
    code = (
        f"import sys, {imports}\n"
        f"print(','.join(sorted(set({sorted(libraries)!r}) & set(sys.modules))))"
    )
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_the_server_module_loads_no_heavy_library() -> None:
    heavy = {"dspy", "mlflow", "litellm", "daytona", "pandas", "numpy"}
    assert _loaded("fleet_lsp.server, fleet_core.api", heavy) == ""
    # initialize is answered before the runtime (pydantic models, SQLAlchemy) is even imported
    assert _loaded("fleet_lsp.server", heavy | {"pydantic", "sqlalchemy"}) == ""


# ---------------------------------------------------------------------------------------------
# The faces stand only on the facade: fleet_lsp uses FleetRuntime and the shared records, never
# the store, the engine, observability or evaluation internals (type-only imports are free).
# ---------------------------------------------------------------------------------------------

FACES = REPO / "fleet_lsp"
ALL = frozenset({"*"})
# fleet_core module -> the names a face may import from it at run time (ALL: any name)
FACE_IMPORTS: dict[str, frozenset[str]] = {
    "fleet_core": frozenset({"__version__"}),
    "fleet_core.api": ALL,  # the one API boundary (fleet_core/api/)
    "fleet_core.models": ALL,
    "fleet_core.modes": ALL,  # standard library only: the execution modes and the routes
    "fleet_core.errors": ALL,
    "fleet_core.events": ALL,
    "fleet_core.event_payloads": ALL,
    "fleet_core.config": ALL,
    "fleet_core.workspace": ALL,
    "fleet_core.net": ALL,
    "fleet_core.offline": ALL,  # standard library only: the libraries' offline switches
}
# members of the runtime a face must not reach: what is behind the facade
HIDDEN_MEMBERS = frozenset({"store", "tracer", "turns"})


def _allowed(module: str, name: str, extra: dict[str, frozenset[str]]) -> bool:
    if module == "fleet_core.api" or module.startswith("fleet_core.api."):
        return True  # the API boundary, all of it
    rules = FACE_IMPORTS | extra
    names = rules.get(module, frozenset())
    return "*" in names or name in names or "*" in rules.get(f"{module}.{name}", frozenset())


def _type_only(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node except those under ``if TYPE_CHECKING:`` (annotations only)."""
    found: list[ast.AST] = []
    stack = [tree]
    while stack:
        node = stack.pop()
        found.append(node)
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_only(child):
                stack.extend(child.orelse)
            else:
                stack.append(child)
    return found


def face_violations(source: str, relative: str = "face.py") -> list[str]:
    """What in one face module goes around the facade (empty: nothing)."""
    extra: dict[str, frozenset[str]] = {}
    problems = []
    for node in _runtime_nodes(ast.parse(source)):
        line = f"{relative}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "fleet_core" and not _allowed(
                    alias.name, "*", extra
                ):
                    problems.append(f"{line} imports {alias.name}")
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] != "fleet_core":
                continue
            for alias in node.names:
                if not _allowed(node.module, alias.name, extra):
                    problems.append(f"{line} imports {alias.name} from {node.module}")
        elif isinstance(node, ast.Attribute):
            if node.attr in HIDDEN_MEMBERS:
                problems.append(f"{line} touches .{node.attr}")
            private = node.attr.startswith("_") and not node.attr.startswith("__")
            if private and "runtime" in ast.unparse(node.value).lower():
                problems.append(f"{line} touches {ast.unparse(node)} (private to the runtime)")
        elif isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for part in ast.walk(target):
                    if isinstance(part, ast.Attribute) and part.attr == "config":
                        problems.append(f"{line} assigns {ast.unparse(part)}; use reconfigure")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("setattr", "getattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and (node.args[1].value in HIDDEN_MEMBERS or node.args[1].value == "config")
            and (node.func.id == "setattr" or node.args[1].value != "config")
        ):
            problems.append(f"{line} {node.func.id}(..., {node.args[1].value!r})")
    return problems


FACE_FILES = sorted(FACES.rglob("*.py"))


@pytest.mark.parametrize("path", FACE_FILES, ids=lambda p: str(p.relative_to(FACES)))
def test_faces_use_only_the_facade(path: Path) -> None:
    relative = path.relative_to(FACES).as_posix()
    assert face_violations(path.read_text(encoding="utf-8"), relative) == []


def test_the_facade_rule_catches_planted_violations() -> None:
    planted = """
from typing import TYPE_CHECKING
from fleet_core.store import Store
from fleet_core.engine.lm import ConfiguredLmProvider
from fleet_core.observability.tracing import create_tracer
from fleet_core.evaluation.labels import LabelService
from fleet_core.observability.errors import ReplayError
import fleet_core.evaluation.runner

async def handler(runtime, ls):
    await runtime.store.get_turn("t")
    await runtime._run(print)
    (await ls.runtime())._own("s")
    runtime.config = None
    setattr(runtime, "config", None)
    return runtime.tracer.load_trace("x"), getattr(runtime, "store")
"""
    found = face_violations(planted)
    expected = [
        "imports Store from fleet_core.store",
        "imports ConfiguredLmProvider from fleet_core.engine.lm",
        "imports create_tracer from fleet_core.observability.tracing",
        "imports LabelService from fleet_core.evaluation.labels",
        "imports ReplayError from fleet_core.observability.errors",
        "imports fleet_core.evaluation.runner",
        "touches .store",
        "touches runtime._run",
        "(private to the runtime)",
        "assigns runtime.config",
        "setattr(..., 'config')",
        "touches .tracer",
        "getattr(..., 'store')",
    ]
    for fragment in expected:
        assert any(fragment in problem for problem in found), (fragment, found)
    # the scripted-model hook is part of the API (fleet_core.api.scripted), never the engine's
    assert face_violations("from fleet_core.engine.scripted_lm import scripted_lm\n") != []
    assert face_violations("from fleet_core.api.scripted import scripted_provider\n") == []


def test_the_facade_rule_allows_the_facade_records_and_type_only_imports() -> None:
    clean = """
from typing import TYPE_CHECKING
from fleet_core.errors import FleetError
from fleet_core import api as facade
from fleet_core.api.traces import TraceNotFound
if TYPE_CHECKING:
    from fleet_core.store import Store
    from fleet_core.evaluation.runner import EvalReport

async def handler(runtime, server):
    server._runtime = runtime
    await runtime.reconfigure(runtime.config)
    return await runtime.get_turn("t"), runtime.config.settings
"""
    assert face_violations(clean) == []


# --- no import circles in fleet_core ----------------------------------------------------------
# Every import counts: module level, inside functions (lazy) and under TYPE_CHECKING, so a circle
# cannot hide behind a deferred import.


def core_modules(root: Path = CORE) -> dict[str, Path]:
    found = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def import_graph(modules: dict[str, Path], top: str = "fleet_core") -> dict[str, set[str]]:
    """module -> the modules of the ``top`` package it imports (``from pkg import submodule``
    names the submodule, not the package)."""

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str | None] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets.update(resolve(alias.name) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, *([node.module] if node.module else [])])
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    targets.add(full if full in modules else resolve(base))
        graph[name] = {t for t in targets if t and t != name and t.startswith(top)}
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            child = next(edges, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return cycles


def test_fleet_core_has_no_import_circles() -> None:
    cycles = import_cycles(import_graph(core_modules()))
    assert cycles == [], f"import circles in fleet_core: {cycles}"


def test_the_circle_check_finds_a_planted_circle(tmp_path: Path) -> None:
    package = tmp_path / "fleet_core"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "a.py").write_text("def f():\n    from fleet_core.sub import b\n")
    (package / "sub" / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from fleet_core import a\n"
    )
    (package / "c.py").write_text("from fleet_core.sub import b\n")  # no circle through c
    graph = import_graph(core_modules(package))
    assert import_cycles(graph) == [["fleet_core.a", "fleet_core.sub.b"]]


# --- layers: no package circle, and the core never imports its api ----------------------------
# The same graph one level up: each sub-package (engine, localmodel, sandbox, store,
# observability, evaluation, optimization, skills, api, ...) is one node, each top-level module
# (models.py, turns.py, runtime.py, ...) its own, and ``fleet_core/__init__.py`` the node
# ``fleet_core``. As for modules, every import counts, type-only ones too: a package that names
# another's type under TYPE_CHECKING still stands on it, so the layering holds for both.

# the leaves every layer may import: they import nothing but other leaves, so no circle runs
# through them (``fleet_core`` is the package's __init__)
LEAVES = frozenset(
    {
        "fleet_core",
        "fleet_core.errors",
        "fleet_core.config",
        "fleet_core.events",
        "fleet_core.event_payloads",
        "fleet_core.workspace",
        "fleet_core.names",
        "fleet_core.tracking",
        "fleet_core.net",
        "fleet_core.offline",
        "fleet_core.models",
        "fleet_core.modes",
        "fleet_core.paging",
        "fleet_core.digests",
        "fleet_core.endpoints",
    }
)
API = "fleet_core.api"  # the boundary the faces use; nothing else in fleet_core imports it

PackageGraph = dict[str, dict[str, set[str]]]  # package -> package -> the module imports behind


def package_of(module: str) -> str:
    """``fleet_core.engine.lm`` -> ``fleet_core.engine``; ``fleet_core.models`` stays itself."""
    return ".".join(module.split(".")[:2])


def package_graph(graph: dict[str, set[str]]) -> PackageGraph:
    packages: PackageGraph = {}
    for module, targets in graph.items():
        edges = packages.setdefault(package_of(module), {})
        for target in targets:
            if package_of(target) != package_of(module):
                edges.setdefault(package_of(target), set()).add(f"{module} -> {target}")
    return packages


def shortest_cycle(graph: PackageGraph, start: str, inside: set[str]) -> list[str]:
    """A shortest circle from ``start`` back to it within ``inside`` (its component)."""
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph.get(node, {})):
                if child == start:
                    return [*paths[node], start]
                if child in inside and child not in paths:
                    paths[child] = [*paths[node], child]
                    following.append(child)
        frontier = following
    raise AssertionError(f"{start} is on no circle")  # not reached: a component always closes


def describe_package_cycles(graph: PackageGraph) -> list[str]:
    """Per circle (a strongly connected component): its packages, and the shortest circle
    through each of them with the module imports that make every step."""
    found = []
    for members in import_cycles({node: set(edges) for node, edges in graph.items()}):
        lines = [f"{len(members)} packages in one circle: {', '.join(members)}"]
        seen: set[frozenset[tuple[str, str]]] = set()
        for start in members:
            cycle = shortest_cycle(graph, start, set(members))
            steps = frozenset(itertools.pairwise(cycle))
            if steps in seen:
                continue
            seen.add(steps)
            lines.append("  " + " -> ".join(cycle))
            lines += [
                f"    {a} -> {b}  ({'; '.join(sorted(graph[a][b]))})"
                for a, b in itertools.pairwise(cycle)
            ]
        found.append("\n".join(lines))
    return found


def leaf_problems(graph: PackageGraph) -> list[str]:
    return [
        f"{leaf} imports {target} ({'; '.join(sorted(modules))})"
        for leaf in sorted(LEAVES & set(graph))
        for target, modules in sorted(graph[leaf].items())
        if target not in LEAVES
    ]


def api_imports(modules: dict[str, Path]) -> list[str]:
    """Where a module outside ``fleet_core/api/`` imports the api (read from the statements, so
    it holds before the package exists as well)."""

    def is_api(name: str) -> bool:
        return name == API or name.startswith(f"{API}.")

    found = []
    for name, path in sorted(modules.items()):
        if is_api(name):
            continue
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                named = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, *([node.module] if node.module else [])])
                named = [base, *(f"{base}.{alias.name}" for alias in node.names)]
            else:
                continue
            if any(is_api(target) for target in named):
                found.append(f"{name}:{node.lineno} imports {API}")
    return found


def test_fleet_core_has_no_package_circles() -> None:
    cycles = describe_package_cycles(package_graph(import_graph(core_modules())))
    assert cycles == [], "package circles in fleet_core:\n" + "\n".join(cycles)


def test_the_leaves_import_only_leaves() -> None:
    assert leaf_problems(package_graph(import_graph(core_modules()))) == []


def test_the_core_never_imports_its_api() -> None:
    assert api_imports(core_modules()) == []


def test_the_layer_checks_find_planted_violations(tmp_path: Path) -> None:
    package = tmp_path / "fleet_core"
    for sub in ("low", "high", "api"):
        (package / sub).mkdir(parents=True)
        (package / sub / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "models.py").write_text("from fleet_core.low import a\n")  # a leaf that is not
    (package / "low" / "a.py").write_text("def f():\n    from fleet_core.high import b\n")
    (package / "high" / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from fleet_core.low import c\n"
    )
    (package / "low" / "c.py").write_text("from fleet_core import api\n")
    (package / "high" / "d.py").write_text("from ..api.facade import Runtime\n")
    (package / "api" / "facade.py").write_text("class Runtime: ...\n")
    modules = core_modules(package)
    graph = package_graph(import_graph(modules))
    # no module circle (a -> b -> c), but low and high stand on each other
    assert import_cycles(import_graph(modules)) == []
    [cycle] = describe_package_cycles(graph)
    assert cycle.startswith("2 packages in one circle: fleet_core.high, fleet_core.low\n")
    assert "fleet_core.low -> fleet_core.high  (fleet_core.low.a -> fleet_core.high.b)" in cycle
    assert "fleet_core.high -> fleet_core.low  (fleet_core.high.b -> fleet_core.low.c)" in cycle
    assert api_imports(modules) == [
        "fleet_core.high.d:1 imports fleet_core.api",
        "fleet_core.low.c:1 imports fleet_core.api",
    ]
    assert leaf_problems(graph) == [
        "fleet_core.models imports fleet_core.low (fleet_core.models -> fleet_core.low.a)"
    ]


# --- the CLI: one package, command modules over shared support --------------------------------

CLI = "fleet_lsp.cli"
CLI_APP = "fleet_lsp.cli.app"  # the typer app: the one module that registers the commands
CLI_COMMANDS = "fleet_lsp.cli.commands"  # one module per command group


def _under(name: str, package: str) -> bool:
    return name == package or name.startswith(f"{package}.")


def _declares_commands(path: Path) -> bool:
    """A function decorated ``@<typer app>.command(...)``: a command's declaration."""
    return any(
        isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and any(
            isinstance(d, ast.Call)
            and isinstance(d.func, ast.Attribute)
            and d.func.attr == "command"
            for d in node.decorator_list
        )
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
    )


def cli_problems(modules: dict[str, Path]) -> list[str]:
    """What breaks the CLI's layering among the ``fleet_lsp`` modules (empty: nothing).

    The CLI is one package, ``fleet_lsp/cli/``, in layers: the entry point ``fleet_lsp.cli``
    (``main``, no typer, no rich) -> ``fleet_lsp.cli.app`` (the typer app, which registers every
    command) -> the command modules ``fleet_lsp.cli.commands.*`` (one per command group) -> the
    modules they share (``fleet_lsp.cli.support``: opening a runtime, ``fail``, the exit codes,
    output helpers; the commands' implementations; ``terminal``, ``live``, ...). Checked on the
    source, every import counting (module level, lazy and type-only):

    1. typer is imported only under ``fleet_lsp/cli/``, and ``@<typer app>.command`` decorates
       functions in command modules only (a top-level command is a plain function of its command
       module, registered by the app): the CLI is that package, nothing else;
    2. no module imports a command module (or the ``commands`` package) except
       ``fleet_lsp.cli.app``: command modules never import each other, and support never
       imports back from them;
    3. no import circle runs through a CLI module (a module under ``fleet_lsp/cli/`` or one that
       imports typer), whatever other ``fleet_lsp`` modules it passes through.
    """
    graph = import_graph(modules, top="fleet_lsp")
    typer_users = {name for name, path in modules.items() if "typer" in imported_roots(path)}
    cli = {name for name in modules if _under(name, CLI)} | typer_users
    problems = [
        f"{name} imports typer outside fleet_lsp/cli/"
        for name in sorted(typer_users)
        if not _under(name, CLI)
    ]
    problems += [
        f"{name} declares a command outside {CLI_COMMANDS}"
        for name, path in sorted(modules.items())
        if not _under(name, CLI_COMMANDS) and _declares_commands(path)
    ]
    problems += [
        f"{name} imports the command module {target} (only {CLI_APP} may)"
        for name, targets in sorted(graph.items())
        if name != CLI_APP
        for target in sorted(targets)
        if _under(target, CLI_COMMANDS)
    ]
    problems += [
        f"import circle through the CLI: {' <-> '.join(cycle)}"
        for cycle in sorted(import_cycles(graph))
        if set(cycle) & cli
    ]
    return problems


def test_the_cli_is_one_package_without_circles() -> None:
    assert cli_problems(core_modules(FACES)) == []


def test_the_cli_rule_finds_planted_violations(tmp_path: Path) -> None:
    package = tmp_path / "fleet_lsp"
    (package / "cli" / "commands").mkdir(parents=True)
    files = {
        "__init__.py": "",
        "server.py": "",
        "tool.py": "import typer\napp = typer.Typer()\n\n@app.command()\ndef run() -> None: ...\n",
        "cli/__init__.py": "def main():\n    from fleet_lsp.cli.app import app\n",
        "cli/app.py": "from fleet_lsp.cli.commands import a, b\n",
        "cli/support.py": "def run():\n    from fleet_lsp.cli.commands.a import helper\n",
        "cli/commands/__init__.py": "",
        "cli/commands/a.py": "import typer\nfrom fleet_lsp.cli import support\n",
        "cli/commands/b.py": "from fleet_lsp.cli.commands import a\n",
        "cli/impl.py": "from fleet_lsp import server\n",
    }
    for name, text in files.items():
        (package / name).write_text(text)
    (package / "server.py").write_text("from fleet_lsp.cli import impl\n")  # a circle via server
    assert cli_problems(core_modules(package)) == [
        "fleet_lsp.tool imports typer outside fleet_lsp/cli/",
        "fleet_lsp.tool declares a command outside fleet_lsp.cli.commands",
        "fleet_lsp.cli.commands.b imports the command module fleet_lsp.cli.commands.a "
        "(only fleet_lsp.cli.app may)",
        "fleet_lsp.cli.support imports the command module fleet_lsp.cli.commands.a "
        "(only fleet_lsp.cli.app may)",
        "import circle through the CLI: fleet_lsp.cli.commands.a <-> fleet_lsp.cli.support",
        "import circle through the CLI: fleet_lsp.cli.impl <-> fleet_lsp.server",
    ]
