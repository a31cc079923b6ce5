"""``fleet-lsp`` commands (typer): the server and a command-line client of the same runtime.

Imports stay lazy: ``fleet-lsp --help`` and ``fleet-lsp config show`` load neither pygls nor
SQLAlchemy, and ``fleet-lsp serve`` (stdio) skips typer entirely so ``initialize`` is answered as
fast as a bare pygls server.
"""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from fleet_core.runtime import FleetRuntime

app = typer.Typer(
    name="fleet-lsp",
    help="Fleet agent runtime: language server (serve) and command-line client.",
    no_args_is_help=False,
    add_completion=False,
    pretty_exceptions_enable=False,
)
artifacts_app = typer.Typer(help="Session artifacts.", no_args_is_help=True)
trace_app = typer.Typer(help="Turn traces.", no_args_is_help=True)
config_app = typer.Typer(help="Effective configuration.", no_args_is_help=True)
eval_app = typer.Typer(
    help="Evaluation: label traces, build a synthetic dataset, run fleet_metric.",
    no_args_is_help=True,
)
mlflow_app = typer.Typer(help="The local MLflow store.", no_args_is_help=True)
memory_app = typer.Typer(
    help="A Session's memories: add, list, review, reject. Only reviewed ones reach the model.",
    no_args_is_help=True,
)
app.add_typer(artifacts_app, name="artifacts")
app.add_typer(trace_app, name="trace")
app.add_typer(config_app, name="config")
app.add_typer(eval_app, name="eval")
app.add_typer(mlflow_app, name="mlflow")
app.add_typer(memory_app, name="memory")
session_app = typer.Typer(
    help="One Session's settings: its model selection (list Sessions with `fleet-lsp sessions`).",
    no_args_is_help=True,
)
app.add_typer(session_app, name="session")
model_app = typer.Typer(
    help="The embedded offline model: the default when no endpoint is configured.",
    no_args_is_help=True,
)
app.add_typer(model_app, name="model")

#: Exit codes: 0 ok, 1 a failure (not found, a Turn or store error), 2 something the user must
#: fix first (invalid input or labels, no model configured, tracing off, bad configuration).
EXIT_FAILURE = 1
EXIT_USAGE = 2
USAGE_KINDS = frozenset(
    {"InvalidInput", "LabelInvalid", "ModelUnavailable", "TracingUnavailable", "ConfigError"}
)

NON_LOOPBACK_ENV = "FLEET_ALLOW_NON_LOOPBACK_BIND"
# MLflow logs store creation and migrations at INFO on stderr; a CLI user needs only warnings.
os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")


# ---------------------------------------------------------------------------------------------
# serve
# ---------------------------------------------------------------------------------------------


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


@app.command()
def serve(
    stdio: Annotated[
        bool, typer.Option("--stdio", help="Serve over stdin/stdout (default).")
    ] = False,
    tcp: Annotated[
        str | None,
        typer.Option(
            "--tcp",
            metavar="HOST:PORT",
            help="Serve one client over TCP (others are refused; the server ends with it).",
        ),
    ] = None,
) -> None:
    """Run the language server (stdio by default; --tcp HOST:PORT for debugging)."""
    if tcp is None:
        from fleet_lsp.cli import serve_stdio

        serve_stdio()
        return
    import logging
    import os

    host, sep, port_text = tcp.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise typer.BadParameter(
            "use --tcp HOST:PORT, e.g. --tcp 127.0.0.1:2087", param_hint="--tcp"
        )
    from fleet_core.net import is_loopback_host
    from fleet_lsp.server import configure_logging, create_server

    configure_logging(logging.INFO)
    log = logging.getLogger("fleet_lsp")
    if not is_loopback_host(host):
        allowed = _truthy(os.environ.get(NON_LOOPBACK_ENV))
        if not allowed:
            from fleet_core.config import load_config

            allowed = load_config().settings.server.allow_non_loopback_bind
        if not allowed:
            typer.echo(
                f"Refusing to listen on {host}: fleet-lsp has no caller authentication, so it "
                f"binds to loopback only. Set {NON_LOOPBACK_ENV}=true to allow it.",
                err=True,
            )
            raise typer.Exit(2)
        log.warning(
            "listening on non-loopback address %s:%s (%s=true); anyone who can reach it can "
            "drive this server, which has no caller authentication",
            host,
            port_text,
            NON_LOOPBACK_ENV,
        )
    server = create_server()
    server.start_tcp(host, int(port_text))  # logs "listening on" once bound
    raise typer.Exit(server.exit_code)


# ---------------------------------------------------------------------------------------------
# runtime commands
# ---------------------------------------------------------------------------------------------


def fail(exc: Any) -> typer.Exit:
    """Print a FleetError as one line on stderr; the exit code says what kind it was."""
    from fleet_lsp.terminal import visible

    message = " ".join(str(exc.message).split())
    typer.echo(visible(f"error ({exc.kind}): {message}"), err=True)
    return typer.Exit(EXIT_USAGE if exc.kind in USAGE_KINDS else EXIT_FAILURE)


def _test_provider() -> Any:
    """Scripted models when the FLEET_TEST_SCRIPT test hook is set (fleet_lsp.testing)."""
    import os

    script = os.environ.get("FLEET_TEST_SCRIPT")
    if not script:
        return None
    from fleet_lsp.testing import scripted_provider

    return scripted_provider(script)


def _run(fn: Callable[[FleetRuntime], Awaitable[Any]]) -> Any:
    """Run ``fn`` on a runtime for this command. Traces Turns queue stay queued (a CLI process
    never waits for MLflow): a server or ``fleet-lsp trace`` exports them."""
    import asyncio

    from fleet_core.errors import FleetError

    async def go() -> Any:
        from fleet_core.config import load_config
        from fleet_core.runtime import FleetRuntime

        runtime = await FleetRuntime.open(
            load_config(), lm_provider=_test_provider(), trace_export="deferred"
        )
        try:
            return await fn(runtime)
        finally:
            await runtime.close()  # also closes the tracer it created

    try:
        return asyncio.run(go())
    except FleetError as exc:
        raise fail(exc) from None


@app.command()
def sessions(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List Sessions, newest first."""

    async def go(runtime: FleetRuntime) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:  # every page (fleet/session/list pages the same way)
            page = await runtime.sessions_page(cursor, 500)
            found += [s.wire() for s in page.sessions]
            if page.next_cursor is None or page.next_cursor == cursor:
                return found
            cursor = page.next_cursor

    found = _run(go)
    if as_json:
        import json

        typer.echo(json.dumps(found, indent=2))
        return
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from fleet_lsp.terminal import visible

    table = Table("session", "mode", "turns", "updated", "dataset")
    for s in found:
        cells = (
            s["sessionId"],
            s["mode"],
            str(s["turnCount"]),
            s["updatedAt"],
            (s.get("dataset") or {}).get("path", ""),
        )
        table.add_row(*(escape(visible(cell)) for cell in cells))
    Console().print(table if found else "No sessions yet. Start one with: fleet-lsp demo")


@app.command()
def turn(
    task: Annotated[str, typer.Argument(help="What the agent should do.")],
    session: Annotated[str, typer.Option("--session", "-s", help="Session id (created if new).")],
    attach: Annotated[
        list[str] | None, typer.Option("--attach", help="Local file to attach (repeatable).")
    ] = None,
    dataset: Annotated[
        str | None,
        typer.Option("--dataset", help="Workspace path to select, e.g. files/sales.csv."),
    ] = None,
    mode: Annotated[str | None, typer.Option("--mode", help="hybrid | rlm | flex")] = None,
    record_replay: Annotated[
        bool,
        typer.Option(
            "--record-replay", help="Store a replay snapshot (makes the trace optimization data)."
        ),
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print only the TurnResult JSON.")
    ] = False,
) -> None:
    """Run one Turn with a live view of progress and child agents."""
    import os
    from pathlib import Path

    from fleet_core.errors import SessionNotFound

    sources = [Path(os.path.abspath(os.path.expanduser(item))) for item in attach or []]
    kept: list[str] = []  # memories proposed and Skills saved by the Turn's code

    async def go(runtime: FleetRuntime) -> dict[str, Any]:
        from fleet_core.models import TurnRequest

        try:
            await runtime.load_session(session)
        except SessionNotFound:
            await runtime.new_session(session, mode)
        for source in sources:
            info = await runtime.attach(session, source)
            if not as_json:
                typer.echo(f"attached {info.path} ({info.size_bytes:,} bytes)", err=True)
        if dataset:
            await runtime.set_dataset(session, dataset)
        request = TurnRequest(session_id=session, task=task, mode=mode, record_replay=record_replay)
        if as_json:
            return (await runtime.run_turn(request)).wire()
        from fleet_lsp.live import LiveTurnView

        with LiveTurnView(task) as view:
            result = await runtime.run_turn(request, on_event=view.on_event)
            view.done(result.status)
        kept.extend(view.kept)
        return result.wire()

    result = _run(go)
    import json

    if as_json:
        typer.echo(json.dumps(result, indent=2))
    else:
        _print_result(result)
        if kept:
            from rich.console import Console

            from fleet_lsp.terminal import visible

            for line in kept:
                Console().print(visible(line), markup=False, highlight=False)
    code = turn_exit_code(result)
    if code:
        typer.echo(turn_failure_line(result), err=True)
        raise typer.Exit(code)


#: A Turn's exit codes: 0 completed, 1 failed, 130 cancelled (docs/cli.md).
EXIT_CANCELLED = 130
_TURN_FIXES = (
    (
        ("AuthError", "401", "403", "Invalid API key", "Unauthorized"),
        "check the model endpoint's key (FLEET_LM_API_KEY; fleet-lsp doctor)",
    ),
    (
        ("ConnectError", "Connection", "connect", "unreachable", "timed out", "Timeout"),
        "check that the model endpoint answers (FLEET_LM_API_BASE; fleet-lsp doctor)",
    ),
    (
        ("TurnDeadlineExceeded",),
        "raise the Turn's timeout (runtime.turn_timeout_seconds) or ask for less",
    ),
    (("BudgetExhausted",), "raise the Turn's budget (engine settings) or ask for less"),
)


def turn_exit_code(result: dict[str, Any]) -> int:
    status = result.get("status")
    if status == "completed":
        return 0
    return EXIT_CANCELLED if status == "cancelled" else EXIT_FAILURE


def turn_failure_line(result: dict[str, Any]) -> str:
    """One line: what failed and what to do (the traceback stays in the log and the trace)."""
    error = result.get("error") or {}
    kind = str(error.get("kind") or result.get("status"))
    first = next((ln for ln in str(error.get("message") or "").splitlines() if ln.strip()), "")
    what = " ".join(first.split()) or f"the Turn ended {result.get('status')}"
    fix = next(
        (hint for needles, hint in _TURN_FIXES if any(n in f"{kind} {what}" for n in needles)),
        None,
    )
    trace = result.get("traceId") or result.get("turnId")
    if result.get("status") == "cancelled":
        fix = fix or "run it again when you want it"
    tail = (
        f"fix: {fix}; details: fleet-lsp trace show {trace}"
        if fix
        else (f"details: fleet-lsp trace show {trace}")
    )
    from fleet_lsp.terminal import visible

    return visible(f"error ({kind}): {what} · {tail}")


def _print_result(result: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.markup import escape

    from fleet_lsp.terminal import visible

    console = Console()
    status = escape(visible(result["status"]))
    route = escape(visible(result.get("route") or "n/a"))
    console.print(f"\n[bold]{status}[/bold] · route {route}")
    # The answer keeps the model's own layout (tables, aligned columns): no markup, no reflow.
    console.print(visible(result.get("answer") or "(no answer)"), markup=False, highlight=False)
    for artifact in result.get("artifacts", []):
        line = f"artifact: {artifact['path']} ({artifact['sizeBytes']:,} bytes) {artifact['uri']}"
        console.print(visible(line), markup=False, highlight=False)
    rejections = (result.get("usage") or {}).get("submitRejections")
    if rejections:
        console.print(f"ungrounded SUBMITs rejected: {int(rejections)}", markup=False)
    tid = result.get("traceId") or result.get("turnId")
    console.print(f"trace: fleet-lsp trace show {tid}", markup=False)


@artifacts_app.command("get")
def artifacts_get(
    session: Annotated[str, typer.Argument(help="Session id.")],
    path: Annotated[str, typer.Argument(help="Artifact path, e.g. artifacts/report.csv.")],
    local: Annotated[str | None, typer.Argument(help="Where to save it (default: stdout).")] = None,
) -> None:
    """Print an artifact, or save it to LOCAL."""
    workspace_path = path if path.startswith("artifacts/") else f"artifacts/{path}"

    async def go(runtime: FleetRuntime) -> bytes:
        return await runtime.read_file(session, workspace_path)

    data: bytes = _run(go)
    if local is None:
        if sys.stdout.isatty():  # shown, not acted on; piped, the bytes as they are
            from fleet_lsp.terminal import visible

            typer.echo(visible(data.decode("utf-8", errors="replace")), nl=False)
        else:
            sys.stdout.buffer.write(data)
        return
    from pathlib import Path

    target = Path(local)
    if target.is_dir():
        target = target / Path(workspace_path).name
    target.write_bytes(data)
    typer.echo(f"saved {workspace_path} to {target} ({len(data):,} bytes)", err=True)


@trace_app.command("show")
def trace_show(
    trace_id: Annotated[str, typer.Argument(help="Trace id or Turn id.")],
    raw: Annotated[bool, typer.Option("--raw", help="Print markdown source.")] = False,
) -> None:
    """Render a Turn's trace (from the stored MLflow trace) as markdown."""

    async def go(runtime: FleetRuntime) -> str:
        from fleet_lsp.traces import TraceService

        await runtime.flush_traces()  # what earlier CLI Turns queued
        return (await TraceService().get(runtime, trace_id=trace_id)).markdown

    from fleet_lsp.terminal import visible

    markdown = visible(_run(go))
    if raw:
        typer.echo(markdown)
        return
    from rich.console import Console
    from rich.markdown import Markdown

    Console().print(Markdown(markdown))


# ---------------------------------------------------------------------------------------------
# memory
# ---------------------------------------------------------------------------------------------

_SessionOption = Annotated[str, typer.Option("--session", "-s", help="Session id.")]


def _print_memories(memories: list[dict[str, Any]]) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    table = Table("memory", "kind", "reviewed", "created", "content")
    for m in memories:
        cells = (
            m["memoryId"],
            m["kind"],
            "yes" if m["reviewed"] else "no",
            m["createdAt"],
            m["content"],
        )
        table.add_row(*(escape(str(cell)) for cell in cells))
    Console().print(table if memories else "No memories in this Session.")


@memory_app.command("add")
def memory_add(
    content: Annotated[str, typer.Argument(help="What to remember (at most 4,000 characters).")],
    session: _SessionOption,
    kind: Annotated[str, typer.Option("--kind", help="A short label, e.g. preference.")] = "user",
    as_json: Annotated[bool, typer.Option("--json", help="Print the memory as JSON.")] = False,
) -> None:
    """Add a memory. It stays unreviewed (never shown to the model) until reviewed."""

    async def go(runtime: FleetRuntime) -> dict[str, Any]:
        return (await runtime.add_memory(session, content, kind=kind)).wire()

    memory: dict[str, Any] = _run(go)
    if as_json:
        typer.echo(json.dumps(memory, indent=2))
        return
    from rich.console import Console
    from rich.markup import escape

    Console().print(
        f"added memory {escape(memory['memoryId'])} (unreviewed): "
        f"fleet-lsp memory review {escape(memory['memoryId'])} -s {escape(session)}"
    )


@memory_app.command("list")
def memory_list(
    session: _SessionOption,
    reviewed: Annotated[
        bool | None,
        typer.Option("--reviewed/--unreviewed", help="Only reviewed (or only unreviewed) ones."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List a Session's memories, oldest first."""

    async def go(runtime: FleetRuntime) -> list[dict[str, Any]]:
        return [m.wire() for m in await runtime.memories(session, reviewed=reviewed)]

    memories: list[dict[str, Any]] = _run(go)
    if as_json:
        typer.echo(json.dumps(memories, indent=2))
        return
    _print_memories(memories)


@memory_app.command("review")
def memory_review(
    memory_id: Annotated[str, typer.Argument(help="The memory's id (memory list).")],
    session: _SessionOption,
    undo: Annotated[
        bool, typer.Option("--undo", help="Mark it unreviewed again (hidden from the model).")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Mark a memory reviewed: from the next Turn on, a task that mentions it shows it."""

    async def go(runtime: FleetRuntime) -> None:
        await runtime.review_memory(session, memory_id, not undo)

    _run(go)
    if as_json:
        typer.echo(json.dumps({"memoryId": memory_id, "reviewed": not undo}))
        return
    from rich.console import Console
    from rich.markup import escape

    state = "unreviewed" if undo else "reviewed"
    Console().print(f"memory {escape(memory_id)} {state}")


@memory_app.command("reject")
def memory_reject(
    memory_id: Annotated[str, typer.Argument(help="The memory's id (memory list).")],
    session: _SessionOption,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Reject a memory: it is deleted and never reaches the model."""

    async def go(runtime: FleetRuntime) -> None:
        await runtime.reject_memory(session, memory_id)

    _run(go)
    if as_json:
        typer.echo(json.dumps({"memoryId": memory_id, "rejected": True}))
        return
    from rich.console import Console
    from rich.markup import escape

    Console().print(f"memory {escape(memory_id)} rejected (deleted)")


# ---------------------------------------------------------------------------------------------
# models, session set-models
# ---------------------------------------------------------------------------------------------


@app.command()
def models(
    refresh: Annotated[
        bool, typer.Option("--refresh", help="Ask the endpoint again (not the cache).")
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print {models: [{id, ownedBy}], cached, fetchedAt}.")
    ] = False,
) -> None:
    """List the models the configured endpoint offers (GET <api_base>/models).

    Exit code 2 when no endpoint is configured or it does not answer (one line says which)."""

    async def go(runtime: FleetRuntime) -> dict[str, Any]:
        return (await runtime.list_models(refresh=refresh)).wire()

    found: dict[str, Any] = _run(go)
    if as_json:
        typer.echo(json.dumps(found, indent=2))
        return
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    table = Table("model", "owned by")
    for model in found["models"]:
        table.add_row(escape(model["id"]), escape(model["ownedBy"] or ""))
    console = Console()
    console.print(table if found["models"] else "The endpoint lists no models.")
    console.print(
        "select one for a Session: fleet-lsp session set-models SESSION --root MODEL", markup=False
    )


@session_app.command("set-models")
def session_set_models(
    session: Annotated[str, typer.Argument(help="Session id.")],
    root: Annotated[
        str | None, typer.Option("--root", help="Model id for Turn programs (root role).")
    ] = None,
    sub: Annotated[
        str | None,
        typer.Option("--sub", help="Model id for llm_query, child agents and triage (sub role)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print {sessionId, root, sub}.")] = False,
) -> None:
    """Set the Session's model ids; a role not given is cleared (the configuration's model
    applies). Model ids only (see `fleet-lsp models`): never an endpoint or a key."""

    async def go(runtime: FleetRuntime) -> dict[str, Any]:
        return (await runtime.set_models(session, root=root, sub=sub)).wire()

    chosen: dict[str, Any] = _run(go)
    if as_json:
        typer.echo(json.dumps(chosen, indent=2))
        return
    from rich.console import Console
    from rich.markup import escape

    console = Console()
    for role in ("root", "sub"):
        value = chosen[role]
        shown = escape(value) if value else "(the configuration's)"
        console.print(f"{role}: {shown}")


# ---------------------------------------------------------------------------------------------
# config, doctor
# ---------------------------------------------------------------------------------------------


@config_app.command("show")
def config_show(
    session: Annotated[
        str | None,
        typer.Option(
            "--session", "-s", help="With this Session's selections (source 'session') applied."
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Every effective non-secret value with its source, secret names as set/unset, the digest."""
    from fleet_core.config import load_config
    from fleet_core.errors import ConfigError

    try:
        config = load_config(log_warnings=False)  # printed below, with the rest
    except ConfigError as exc:
        typer.echo(f"configuration error: {exc.message}", err=True)
        raise typer.Exit(1) from None
    if session is not None:
        session_id = session

        async def go(runtime: FleetRuntime) -> Any:
            return await runtime.effective_config(session_id)

        config = _run(go)
    items = list(config.items())
    secrets = config.secret_status()
    from fleet_core.localmodel.selection import models_in_use

    models = models_in_use(config)  # a configured endpoint, the embedded model, or none
    if as_json:
        import json

        typer.echo(
            json.dumps(
                {
                    "configFile": str(config.config_file) if config.config_file else None,
                    "stateDir": str(config.state_dir),
                    "session": session,
                    "digest": config.digest(),
                    "settings": {k: {"value": v, "source": s} for k, v, s in items},
                    "secrets": {k: ("set" if v else "unset") for k, v in secrets.items()},
                    "models": {use.role: use.describe() for use in models},
                    # where each endpoint and its key came from; names only, never a value
                    "endpoints": {b.label: b.wire() for b in config.bindings.values()},
                    "workspace": {
                        "configFileScope": config.config_file_scope,
                        "trusted": config.workspace_trusted,
                        "ignored": [str(path) for path in config.workspace_ignored],
                    },
                    "warnings": list(config.warnings),
                },
                indent=2,
            )
        )
        return
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console()
    console.print(f"config file: {config.config_file or '(none; defaults)'}", markup=False)
    console.print(f"state dir:   {config.state_dir}", markup=False)
    if session is not None:
        console.print(f"session:     {session}", markup=False)
    table = Table("setting", "value", "source")
    for key, value, source in items:
        table.add_row(escape(key), escape("" if value is None else str(value)), source)
    console.print(table)
    secret_table = Table("secret", "status")
    for name, is_set in secrets.items():
        secret_table.add_row(name, "set" if is_set else "unset")
    console.print(secret_table)
    for use in models:
        console.print(f"{use.role} role uses: {use.describe()}", markup=False)
    console.print("endpoints and keys (never their values):")
    for binding in config.bindings.values():
        console.print(f"  {binding.describe()}", markup=False)
    if config.workspace_ignored:
        names = ", ".join(str(path) for path in config.workspace_ignored)
        console.print(
            f"workspace config ignored (FLEET_IGNORE_WORKSPACE_CONFIG): {names}", markup=False
        )
    elif config.workspace_trusted:
        console.print("workspace config trusted (FLEET_TRUST_WORKSPACE_CONFIG)")
    for warning in config.warnings:
        console.print(f"warning: {warning}", markup=False, style="yellow")
    console.print(f"digest: {config.digest()}")


@app.command()
def doctor(
    as_json: Annotated[
        bool, typer.Option("--json", help="Print {ok, checks: [{name, status, detail, fix}]}.")
    ] = False,
) -> None:
    """Check the database, sandbox isolation, MLflow store and model endpoints; say what to fix.

    Exit code 0 when every required check passed, 1 otherwise."""
    from dataclasses import asdict

    from fleet_lsp.doctor import run_checks

    checks = run_checks()
    if as_json:
        ok = all(check.status != "fail" for check in checks)
        report = {"ok": ok, "checks": [asdict(check) for check in checks]}
        typer.echo(json.dumps(report, indent=2))
        raise typer.Exit(0 if ok else 1)
    from rich.console import Console
    from rich.markup import escape

    console = Console()
    failed = 0
    styles = {"ok": ("ok", "green"), "warn": ("warn", "yellow"), "fail": ("FAIL", "red")}
    for check in checks:
        word, color = styles[check.status]
        console.print(
            f"[{color}]{word:>4}[/{color}]  [bold]{escape(check.name)}[/bold]: "
            f"{escape(check.detail)}"
        )
        if check.fix:
            console.print(f"      fix: {escape(check.fix)}")
        failed += check.status == "fail"
    if failed:
        console.print(f"{failed} required check(s) failed; fix them and rerun fleet-lsp doctor")
    else:
        console.print("everything a Turn needs is in place")
    raise typer.Exit(1 if failed else 0)


# ---------------------------------------------------------------------------------------------
# model: the embedded offline model
# ---------------------------------------------------------------------------------------------


def _config_or_exit() -> Any:
    from fleet_core.config import load_config
    from fleet_core.errors import ConfigError

    try:
        return load_config()
    except ConfigError as exc:
        typer.echo(f"configuration error: {exc.message}", err=True)
        raise typer.Exit(1) from None


@model_app.command("status")
def model_status(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Installed? Running (where, RSS, users)? Which model each role uses. Starts nothing."""
    from fleet_lsp import local_model

    record = local_model.status(_config_or_exit())
    if as_json:
        local_model.print_json(record)
    else:
        local_model.print_status(record)


@model_app.command("serve")
def model_serve(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Start the embedded model server (or find it running) and keep it running after this
    command, until `fleet-lsp model stop`: Turns of every fleet-lsp process then reuse it."""
    from fleet_core.errors import FleetError
    from fleet_lsp import local_model

    try:
        record = local_model.serve(_config_or_exit(), as_json=as_json)
    except FleetError as exc:
        raise fail(exc) from None
    if as_json:
        local_model.print_json(record)
        return
    how = "already running" if record["reused"] else f"ready in {record['seconds']:.1f} s"
    typer.echo(
        f"embedded model {record['modelId']} {how} at {record['apiBase']} "
        "(runs until `fleet-lsp model stop`)"
    )


@model_app.command("stop")
def model_stop(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Stop the embedded model server, whichever process started it."""
    from fleet_core.runtime import FleetRuntime

    stopped = FleetRuntime.stop_local_model(_config_or_exit())
    if as_json:
        typer.echo(json.dumps({"stopped": stopped}))
    else:
        typer.echo(
            "stopped the embedded model server"
            if stopped
            else "no embedded model server was running"
        )


@app.command()
def demo() -> None:
    """The quickstart through the real protocol: a Session, sales.csv, a Turn, the artifact."""
    from fleet_lsp.demo import run_demo

    raise typer.Exit(run_demo())


# ---------------------------------------------------------------------------------------------
# eval, mlflow
# ---------------------------------------------------------------------------------------------


@eval_app.command("label")
def eval_label(
    trace_id: Annotated[str, typer.Argument(help="Trace id (or the Turn id of a traced Turn).")],
    answer: Annotated[
        str | None, typer.Option("--answer", help="The expected (gold) answer.")
    ] = None,
    value: Annotated[
        list[str] | None,
        typer.Option("--value", help="A value the answer must contain (repeatable)."),
    ] = None,
    route: Annotated[
        str | None, typer.Option("--route", help="Required route: direct | flex | rlm.")
    ] = None,
    critical: Annotated[
        bool | None,
        typer.Option("--critical/--not-critical", help="Values are hard requirements."),
    ] = None,
    group: Annotated[
        str | None, typer.Option("--group", help="Source group (default: the Session id).")
    ] = None,
    status: Annotated[
        str | None,
        typer.Option("--status", help="approved | benchmark | synthetic | rejected."),
    ] = None,
    expectations_file: Annotated[
        str | None,
        typer.Option(
            "--expectations-file", metavar="FILE", help="Structured expectations (JSON, schema 1)."
        ),
    ] = None,
    reviewer: Annotated[str | None, typer.Option("--reviewer", help="Who reviewed it.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Label a trace (MLflow expectations + the store). Fields not given keep earlier values."""
    from fleet_lsp.evaluation import label_command

    label_command(
        trace_id,
        answer=answer,
        values=value,
        route=route,
        critical=critical,
        group=group,
        status=status,
        expectations_file=expectations_file,
        reviewer=reviewer,
        as_json=as_json,
    )


@eval_app.command("dataset")
def eval_dataset(
    seed: Annotated[int, typer.Option("--seed", help="Random seed (same seed, same data).")] = 7,
    out: Annotated[
        str | None,
        typer.Option("--out", help="Where to write it (default <state>/eval/dataset-<seed>.json)."),
    ] = None,
    per_kind: Annotated[
        int, typer.Option("--per-kind", min=1, max=50, help="Cases per CSV kind.")
    ] = 2,
    long_context: Annotated[
        bool, typer.Option("--long-context/--no-long-context", help="Include a long log case.")
    ] = True,
) -> None:
    """Build a seeded synthetic dataset whose gold values are computed from its files."""
    from fleet_lsp.evaluation import dataset_command

    dataset_command(seed=seed, out=out, per_kind=per_kind, long_context=long_context)


@eval_app.command("run")
def eval_run(
    dataset: Annotated[
        str | None,
        typer.Option("--dataset", help="A dataset file (default: the seeded synthetic one)."),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the default dataset.")] = 7,
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="Run the first N.")] = None,
    case: Annotated[
        list[str] | None, typer.Option("--case", help="Run only this case id (repeatable).")
    ] = None,
    labelled: Annotated[
        bool,
        typer.Option(
            "--labelled",
            help="Run the store's labelled, replay-captured traces instead of a dataset.",
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Run labelled cases as fresh Turns, score fleet_metric, record an MLflow evaluation run."""
    from fleet_lsp.evaluation import run_command

    raise typer.Exit(
        run_command(
            dataset=dataset,
            seed=seed,
            limit=limit,
            cases=case,
            labelled=labelled,
            as_json=as_json,
        )
    )


@app.command()
def optimize(
    session: Annotated[str, typer.Option("--session", "-s", help="The Session to optimize.")],
    gepa_budget: Annotated[
        str | None,
        typer.Option(
            "--gepa-budget",
            metavar="light|medium|heavy",
            help="GEPA's search budget (default light). It bounds the search's rollouts only: "
            "reflection, judging and the final validation (6 x (dev + holdout) replays) come "
            "on top.",
        ),
    ] = None,
    max_metric_calls: Annotated[
        int | None,
        typer.Option(
            "--max-metric-calls",
            min=1,
            max=100_000,
            help="Instead of --gepa-budget: at most N search rollouts (the search only).",
        ),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", min=0, help="Seed of splits and search.")] = 0,
    approve: Annotated[
        str | None,
        typer.Option(
            "--approve",
            metavar="VERSION",
            help="Approve a candidate (re-checks the gate and its evidence); the next Turn "
            "serves it.",
        ),
    ] = None,
    status: Annotated[
        bool,
        typer.Option("--status", help="List candidates, gate verdicts and the active version."),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Optimize a Session's Turn program with GEPA on approved, replay-captured labels; review
    the candidate's report, then approve it (docs/optimization.md)."""
    from fleet_lsp import optimize as opt

    chosen = [name for name, on in (("--approve", approve), ("--status", status)) if on]
    run_flags = [
        name
        for name, value in (
            ("--gepa-budget", gepa_budget),
            ("--max-metric-calls", max_metric_calls),
        )
        if value is not None
    ]
    if len(chosen) > 1 or (chosen and run_flags):
        raise typer.BadParameter(f"{' and '.join(chosen + run_flags)} do not go together")
    if len(run_flags) > 1:
        raise typer.BadParameter("give either --gepa-budget or --max-metric-calls, not both")
    if gepa_budget is not None and gepa_budget not in ("light", "medium", "heavy"):
        raise typer.BadParameter("use light, medium or heavy", param_hint="--gepa-budget")
    if approve is not None:
        raise typer.Exit(opt.approve_command(session, approve, as_json=as_json))
    if status:
        raise typer.Exit(opt.status_command(session, as_json=as_json))
    raise typer.Exit(
        opt.run_command(
            session,
            budget=gepa_budget or "light",
            max_metric_calls=max_metric_calls,
            seed=seed,
            as_json=as_json,
        )
    )


@mlflow_app.command("ui")
def mlflow_ui(
    host: Annotated[str, typer.Option("--host", help="Address to bind (loopback).")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="Port.")] = 5000,
) -> None:
    """Start the MLflow UI on loopback against the local store (Ctrl-C stops it)."""
    from fleet_lsp.mlflow_ui import ui_command

    raise typer.Exit(ui_command(host, port))
