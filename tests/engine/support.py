"""Helpers the engine tests share: a Turn run with its events collected, and the small-model
profile's scenario (a sales CSV, a log, a program and its expected artifact) that its
test_small_profile_*.py files share."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any, Literal

import dspy
from dspy.lm15 import Message, Response, TextPart, Usage

from fleet_core.api import FleetRuntime
from fleet_core.engine.scripted_lm import ScriptedEngine
from fleet_core.events import TurnEvent
from fleet_core.models import TurnRequest, TurnResult


async def run_turn(
    runtime: FleetRuntime,
    session: str,
    task: str,
    mode: Literal["hybrid", "rlm", "flex"] | None = None,
) -> tuple[TurnResult, list[TurnEvent]]:
    """One Turn through the facade; its result and every event it emitted, in order."""
    events: list[TurnEvent] = []
    request = TurnRequest(session_id=session, task=task, mode=mode)
    result = await runtime.run_turn(request, on_event=events.append)
    return result, events


def payloads(events: list[TurnEvent], kind: str) -> list[Any]:
    """The typed payloads (``TurnEvent.data``: the kind's model) of the events of one kind."""
    found = [e.data for e in events if e.kind == kind]
    assert all(data is not None for data in found), f"a {kind} payload does not parse"
    return found


# --- the small-model profile's scenario -------------------------------------------------------

SALES = "region,revenue\nnorth,100\nsouth,250\nnorth,50.5\neast,10\nsouth,0.5\n"
TASK = "Calculate revenue by region and save artifacts/revenue_by_region.csv."
EXPECTED = {"east": 10.0, "north": 150.5, "south": 250.5}
PROGRAM = (
    "import os\nimport pandas as pd\n"
    "df = pd.read_csv('files/sales.csv')\n"
    "totals = df.groupby('region', as_index=False)['revenue'].sum()\n"
    "os.makedirs('artifacts', exist_ok=True)\n"
    "totals.to_csv('artifacts/revenue_by_region.csv', index=False)\n"
    "print(totals.to_string(index=False))"
)

#: The quickstart program failing on a column the table does not have, and another program
#: (other names) failing the same way.
BROKEN = PROGRAM.replace("'revenue'].sum()", "'amount'].sum()")
BROKEN_AGAIN = BROKEN.replace("totals", "sums")

LABELLED_TOTALS = "df.groupby('region', as_index=False)['revenue'].sum()"
#: Totals whose regions are gone before the write (the host keeps a grouped result's labels,
#: engine/rewrites.py, but cannot bring back labels a program threw away), as the embedded
#: model also writes them.
BARE_TOTALS = "pd.Series(df.groupby('region')['revenue'].sum().to_numpy(), name='revenue')"


def fenced(code: str) -> str:
    return f"```python\n{code}\n```"


class RecordingEngine(ScriptedEngine):
    """A scripted engine that also keeps each request's sampling settings."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.configs: list[Any] = []

    def complete(self, request: Any) -> Response:
        self.configs.append(request.config)
        return super().complete(request)


def recording_lm(replies: list[str]) -> Any:
    engine = RecordingEngine(replies)
    lm = dspy.LM("openai/scripted", engine=engine, cache=False)
    lm.engine_script = engine
    return lm


async def quick_session(runtime: Any, tmp_path: Path, *, select: bool = True) -> None:
    await runtime.new_session("s")
    source = tmp_path / "sales.csv"
    source.write_text(SALES)
    await runtime.attach("s", source)
    if select:
        await runtime.set_dataset("s", "files/sales.csv", "sales")


async def dataset_session(runtime: Any, tmp_path: Path, name: str, content: str) -> None:
    """Session "s" with ``files/<name>`` attached and selected as its dataset."""
    await runtime.new_session("s")
    source = tmp_path / name
    source.write_text(content)
    await runtime.attach("s", source)
    await runtime.set_dataset("s", f"files/{name}", name.split(".")[0])


async def artifact_rows(runtime: Any) -> dict[str, float]:
    data = await runtime.read_file("s", "artifacts/revenue_by_region.csv")
    return {r["region"]: float(r["revenue"]) for r in csv.DictReader(io.StringIO(data.decode()))}


def task_cells(events: list[Any]) -> list[str]:
    return [e.data.code for e in events if e.kind == "code_cell" and e.data.phase == "task"]


LOG = (
    "2026-01-01T10:00:00 INFO svc=api request served\n"
    "2026-01-01T10:00:01 ERROR svc=db disk full\n"
    "2026-01-01T10:00:02 WARN svc=api slow response\n"
    "2026-01-01T10:00:03 ERROR svc=api upstream timeout\n"
)
LOG_TASK = (
    "Find the ERROR lines in files/app.log, save them to artifacts/errors.txt and count them."
)
LOG_PROGRAM = (
    "os.makedirs('artifacts', exist_ok=True)\n"
    "lines = [l for l in open('files/app.log') if CONDITION]\n"
    "open('artifacts/errors.txt', 'w').writelines(lines)\n"
    "print(len(lines), 'ERROR lines')"
)


async def log_session(runtime: Any, tmp_path: Path) -> None:
    await dataset_session(runtime, tmp_path, "app.log", LOG)


class CappedEngine(RecordingEngine):
    """A scripted engine that honours the request's output cap as a server does: a reply
    longer than ``max_tokens`` tokens (``chars_per_token`` characters each) is cut there and
    ends with ``finish_reason`` "length" (or ``cut_reason``, e.g. None for a server that does
    not say)."""

    def __init__(
        self, *args: Any, chars_per_token: int = 4, cut_reason: str | None = "length", **kw: Any
    ) -> None:
        super().__init__(*args, **kw)
        self.chars_per_token = chars_per_token
        self.cut_reason = cut_reason

    def complete(self, request: Any) -> Response:
        response = super().complete(request)
        limit = request.config.max_tokens
        text = response.text or ""
        if limit is None or len(text) <= limit * self.chars_per_token:
            return response
        cut = text[: limit * self.chars_per_token]
        return Response(
            id=None,
            model=request.model,
            message=Message.assistant([TextPart(cut)]),
            finish_reason=self.cut_reason,
            usage=Usage(input_tokens=10, output_tokens=limit, total_tokens=10 + limit),
        )


def capped_lm(replies: list[str], **kw: Any) -> Any:
    engine = CappedEngine(replies, **kw)
    lm = dspy.LM("openai/scripted", engine=engine, cache=False)
    lm.engine_script = engine
    return lm


async def small_turn(runtime: Any, task: str) -> tuple[Any, list[Any]]:
    """One Turn of Session "s" on ``task``: its result and every event it sent."""
    from fleet_core.models import TurnRequest

    events: list[Any] = []
    result = await runtime.run_turn(TurnRequest(session_id="s", task=task), on_event=events.append)
    return result, events
