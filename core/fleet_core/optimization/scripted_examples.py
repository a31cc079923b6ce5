"""Scripted models and a curated replay dataset for optimization tests and
``benchmarks/bench_optimize.py``: the scripted LM (``engine.scripted_lm``) is the only stand-in, and
the code the serving model writes runs in the real sandbox.

The serving model computes the right answer only under the improved instruction (``MARK``); the
judge accepts "42"; the reflection model proposes the instruction with ``MARK`` and returns Flex
source unchanged. ``add_examples`` runs one replay-captured Turn per example and labels it in the
store, as ``fleet-lsp eval label`` would (MLflow off).
"""

from __future__ import annotations

import re
import uuid
from typing import TYPE_CHECKING, Any, Protocol

from fleet_core.engine.scripted_lm import fields, scripted_lm, submit
from fleet_core.models import TurnRequest, TurnResult

if TYPE_CHECKING:
    from fleet_core.store import Store

MARK = "ALWAYS ANSWER WITH DIGITS"
TASK = "What is six times seven?"


def serving(text: str) -> str:
    """The root model: ``6 * 7`` under the improved instruction, ``'unknown'`` otherwise."""
    return submit("str(6 * 7)") if MARK in text else submit("'unknown'")


def judge(text: str) -> str:
    answers = re.findall(r"\[\[ ## answer ## \]\]\n(.*?)\n", text)  # the system's first
    ok = bool(answers) and answers[-1].strip() == "42"
    return fields(reasoning="Compared.", correct=str(ok), safe="True", critique="Checked.")


def current_source(text: str) -> str:
    match = re.search(r"\[\[ ## current_source ## \]\]\n(.*?)\n\n\[\[ ## ", text, re.S)
    return fields(revised_source=match.group(1) if match else "")


def reflection_replies() -> dict[str, Any]:
    return {
        "revised_source": current_source,
        "new_instruction": fields(new_instruction=f"{MARK}. Compute the value with Python."),
    }


def scripted_models() -> tuple[Any, Any, Any]:
    """Fresh scripted serving, judge and reflection LMs."""
    return (
        scripted_lm(rules={"": serving}),
        scripted_lm(rules={"": judge}),
        scripted_lm(rules=reflection_replies()),
    )


class ExampleRuntime(Protocol):
    """What ``add_examples`` drives: a ``FleetRuntime``, named by what it offers (the core does
    not import the facade)."""

    store: Store

    async def new_session(self, session_id: str | None = None, mode: str | None = None) -> Any: ...

    async def write_file(self, session_id: str, path: str, data: bytes) -> Any: ...

    async def run_turn(self, request: TurnRequest) -> TurnResult: ...


async def add_examples(
    runtime: ExampleRuntime,
    groups: dict[str, int],
    *,
    critical: tuple[str, ...] = (),
    replay: bool = True,
    status: str = "approved",
) -> list[str]:
    """One replay-captured (unless ``replay`` is false), labelled Turn per example; its ids."""
    turn_ids = []
    for group, count in groups.items():
        for i in range(count):
            session_id = f"src-{group}-{i}-{uuid.uuid4().hex[:6]}"
            await runtime.new_session(session_id, mode="rlm")
            await runtime.write_file(session_id, "files/input.txt", f"{group} {i}".encode())
            result = await runtime.run_turn(
                TurnRequest(session_id=session_id, task=TASK, record_replay=replay)
            )
            if result.status != "completed":
                raise RuntimeError(f"the example Turn did not complete: {result.error}")
            labels = {
                "review_status": status,
                "source_group": group,
                "expected_answer": "42",
                "expected_values": ["42"],
                "critical": group in critical,
                "reviewer": "human",
            }
            runtime.store.upsert_trace_labels(
                f"tr-{result.turn_id}",
                session_id=session_id,
                turn_id=result.turn_id,
                labels=labels,
                eligible=replay,
                ineligible_reason=None,
            )
            turn_ids.append(result.turn_id)
    return turn_ids
