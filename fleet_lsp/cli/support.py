"""What the CLI's commands share: opening a runtime for one command (``with_runtime``),
``fail`` and the exit codes, the test-provider hook, a Turn's outcome on the terminal.

It imports no command module (``fleet_lsp.cli.commands``): they, and the commands'
implementations (``evaluation``, ``optimize``, ...), stand on it
(tests/unit/test_invariants.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from fleet_core.api import FleetRuntime


#: Exit codes: 0 ok, 1 a failure (not found, a Turn or store error), 2 something the user must
#: fix first (invalid input or labels, no model configured, tracing off, bad configuration).
EXIT_FAILURE = 1
EXIT_USAGE = 2
USAGE_KINDS = frozenset(
    {"InvalidInput", "LabelInvalid", "ModelUnavailable", "TracingUnavailable", "ConfigError"}
)

NON_LOOPBACK_ENV = "FLEET_ALLOW_NON_LOOPBACK_BIND"


def truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def fail(exc: Any) -> typer.Exit:
    """Print a FleetError as one line on stderr; the exit code says what kind it was."""
    from fleet_lsp.cli.terminal import visible

    message = " ".join(str(exc.message).split())
    typer.echo(visible(f"error ({exc.kind}): {message}"), err=True)
    return typer.Exit(EXIT_USAGE if exc.kind in USAGE_KINDS else EXIT_FAILURE)


def provider_from_test_hook() -> Any:
    """Scripted models when the FLEET_TEST_SCRIPT hook is set (``fleet_core.api.scripted``)."""
    from fleet_core.api.scripted import provider_from_environment

    return provider_from_environment()


def with_runtime(fn: Callable[[FleetRuntime], Awaitable[Any]]) -> Any:
    """Run ``fn`` on a runtime for this command. Traces Turns queue stay queued (a CLI process
    never waits for MLflow): a server or ``fleet-lsp trace`` exports them."""
    import asyncio

    from fleet_core.errors import FleetError

    async def go() -> Any:
        from fleet_core.api import FleetRuntime
        from fleet_core.config import load_config

        runtime = await FleetRuntime.open(
            load_config(), lm_provider=provider_from_test_hook(), trace_export="deferred"
        )
        try:
            return await fn(runtime)
        finally:
            await runtime.close()  # also closes the tracer it created

    try:
        return asyncio.run(go())
    except FleetError as exc:
        raise fail(exc) from None


_SINCE_UNITS = {"m": 60, "h": 3600, "d": 86_400, "w": 7 * 86_400}


def since_instant(text: str) -> str:
    """``--since``: a duration back from now (``30m``, ``12h``, ``7d``, ``2w``) or an ISO-8601
    instant, as an ISO-8601 instant; a bad value exits with a usage error (one line)."""
    from datetime import UTC, datetime, timedelta

    from fleet_lsp.cli.terminal import visible

    value = text.strip()
    unit = _SINCE_UNITS.get(value[-1:].lower()) if value else None
    if unit is not None and value[:-1].isdigit():
        return (datetime.now(UTC) - timedelta(seconds=int(value[:-1]) * unit)).isoformat()
    try:
        stamp = datetime.fromisoformat(value)
    except ValueError:
        typer.echo(
            f"error: --since {visible(value[:64])!r}: use 30m, 12h, 7d, 2w or an ISO-8601 "
            "instant such as 2026-12-01T00:00:00Z",
            err=True,
        )
        raise typer.Exit(EXIT_USAGE) from None
    return (stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)).isoformat()


#: A Turn's exit codes: 0 completed cleanly, 3 completed with errors (its answer was extracted,
#: partial or an error message), 1 failed, 130 cancelled (docs/cli.md).
EXIT_CANCELLED = 130
EXIT_COMPLETED_WITH_ERRORS = 3
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
        return 0 if outcome_kind(result) in ("submitted", None) else EXIT_COMPLETED_WITH_ERRORS
    return EXIT_CANCELLED if status == "cancelled" else EXIT_FAILURE


def outcome_kind(result: dict[str, Any]) -> str | None:
    """How the answer was reached (``TurnResult.outcome.kind``); None: not recorded."""
    outcome = result.get("outcome")
    return str(outcome.get("kind")) if isinstance(outcome, dict) else None


def headline(result: dict[str, Any]) -> str:
    """``completed``, ``completed with errors``, ``failed`` or ``cancelled``."""
    status = str(result.get("status"))
    clean = outcome_kind(result) in ("submitted", None)
    return status if status != "completed" or clean else "completed with errors"


def outcome_line(result: dict[str, Any]) -> str:
    """One line for a Turn that completed with errors: how its answer was reached and why."""
    from fleet_lsp.cli.terminal import visible

    outcome = result.get("outcome") or {}
    said = "; ".join(
        str(r.get("detail") or r.get("kind")) for r in outcome.get("reasons") or () if r
    )
    trace = result.get("traceId") or result.get("turnId")
    kind = outcome.get("kind")
    return visible(
        f"completed with errors ({kind}): {said} · details: fleet-lsp trace show {trace}"
    )


def time_line(result: dict[str, Any]) -> str:
    """Where the Turn's time went (``TurnResult.usage``; docs/local-model.md): e.g. ``time:
    41.2 s = model 38.9 s (prompt 30.1 s, generation 8.2 s) + sandbox 1.1 s + host 1.2 s``;
    '' when the Turn reported no duration."""
    usage = result.get("usage") or {}
    total = result.get("durationSeconds")
    if not isinstance(total, int | float):
        return ""

    def seconds(key: str) -> float | None:
        value = usage.get(key)
        return float(value) if isinstance(value, int | float) else None

    model, sandbox = seconds("modelSeconds") or 0.0, seconds("sandboxSeconds") or 0.0
    prompt, generation = seconds("promptSeconds"), seconds("generationSeconds")
    start = seconds("modelStartSeconds") or 0.0
    server = (
        f" (prompt {prompt:.1f} s, generation {generation:.1f} s)"
        if prompt is not None and generation is not None
        else ""
    )
    starting = f" + model start {start:.1f} s" if start >= 0.05 else ""
    host = max(0.0, total - model - sandbox - start)
    return (
        f"time: {total:.1f} s = model {model:.1f} s{server}{starting} + sandbox {sandbox:.1f} s "
        f"+ host {host:.1f} s"
    )


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
    from fleet_lsp.cli.terminal import visible

    return visible(f"error ({kind}): {what} · {tail}")


def print_result(result: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.markup import escape

    from fleet_lsp.cli.terminal import visible

    console = Console()
    status = escape(visible(headline(result)))
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
    timing = time_line(result)
    if timing:
        console.print(timing, markup=False, highlight=False)
    tid = result.get("traceId") or result.get("turnId")
    console.print(f"trace: fleet-lsp trace show {tid}", markup=False)
