"""Optimization fixtures: a runtime with scripted serving, judge and reflection models and a
curated dataset of replay-captured, labelled Turns (real sandbox, real SQLite store)."""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from fleet_core.config import load_config
from fleet_core.engine.lm import StaticLmProvider
from fleet_core.engine.testing import fields, scripted_lm, submit
from fleet_core.models import TurnRequest
from fleet_core.runtime import FleetRuntime

MARK = "ALWAYS ANSWER WITH DIGITS"


def serving(text: str) -> str:
    """The scripted root model: computes the right answer only under the improved instruction
    (the code it writes runs in the real sandbox)."""
    return submit("str(6 * 7)") if MARK in text else submit("'unknown'")


def judge(text: str) -> str:
    answers = re.findall(r"\[\[ ## answer ## \]\]\n(.*?)\n", text)  # the system's first
    ok = bool(answers) and answers[-1].strip() == "42"
    return fields(reasoning="Compared.", correct=str(ok), safe="True", critique="Checked.")


def current_source(text: str) -> str:
    match = re.search(r"\[\[ ## current_source ## \]\]\n(.*?)\n\n\[\[ ## ", text, re.S)
    return fields(revised_source=match.group(1) if match else "")


def reflection_replies() -> dict[str, object]:
    return {
        "revised_source": current_source,
        "new_instruction": fields(new_instruction=f"{MARK}. Compute the value with Python."),
    }


@dataclass
class Models:
    root: object
    judge: object
    reflection: object

    def provider(self) -> StaticLmProvider:
        return StaticLmProvider(self.root, judge=self.judge, reflection=self.reflection)


def make_models() -> Models:
    return Models(
        root=scripted_lm(rules={"": serving}),
        judge=scripted_lm(rules={"": judge}),
        reflection=scripted_lm(rules=reflection_replies()),
    )


@pytest.fixture
def models() -> Models:
    return make_models()


#: The same three models as a ``FLEET_TEST_SCRIPT`` (fleet_lsp.testing) for a server or CLI
#: process: rules match in order, so the improved instruction's mark wins over the default.
SCRIPT: dict[str, object] = {
    "root": {"rules": {MARK: {"submit": "str(6 * 7)"}, "": {"submit": "'unknown'"}}},
    "judge": {
        "rules": {
            "[[ ## answer ## ]]\n42\n": {"verdict": True, "critique": "Checked."},
            "": {"verdict": False, "critique": "The answer is not 42."},
        }
    },
    "reflection": {
        "rules": {
            "new_instruction": {
                "fields": {"new_instruction": f"{MARK}. Compute the value with Python."}
            }
        }
    },
}


@pytest.fixture
async def opt_runtime(tmp_path: Path, models: Models) -> AsyncIterator[FleetRuntime]:
    env = {"FLEET_STATE_DIR": str(tmp_path / "state"), "FLEET_MLFLOW_DESTINATION": "off"}
    runtime = await FleetRuntime.open(
        load_config(environ=env, cwd=tmp_path), lm_provider=models.provider()
    )
    yield runtime
    await runtime.close()


async def add_examples(
    runtime: FleetRuntime,
    groups: dict[str, int],
    *,
    critical: tuple[str, ...] = (),
    replay: bool = True,
    status: str = "approved",
) -> list[str]:
    """Run one replay-captured Turn per example and label it in the store."""
    turn_ids = []
    for group, count in groups.items():
        for i in range(count):
            session_id = f"src-{group}-{i}-{uuid.uuid4().hex[:6]}"
            await runtime.new_session(session_id, mode="rlm")
            await runtime.write_file(session_id, "files/input.txt", f"{group} {i}".encode())
            result = await runtime.run_turn(
                TurnRequest(
                    session_id=session_id, task="What is six times seven?", record_replay=replay
                )
            )
            assert result.status == "completed", result.error
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


async def build_optimization_state(
    cwd: Path,
    groups: dict[str, int] | None = None,
    *,
    sessions: tuple[str, ...] = ("research-1",),
) -> dict[str, str]:
    """A state directory holding a curated dataset (default: 9 examples in 3 groups, ``crit``
    critical) and empty rlm Sessions to optimize, built in this process with the scripted
    models; returns the environment a server or CLI process needs to use it (MLflow off)."""
    env = {"FLEET_STATE_DIR": str(cwd / "state"), "FLEET_MLFLOW_DESTINATION": "off"}
    runtime = await FleetRuntime.open(
        load_config(environ=env, cwd=cwd), lm_provider=make_models().provider()
    )
    try:
        await add_examples(
            runtime, groups or {"alpha": 3, "beta": 3, "crit": 3}, critical=("crit",)
        )
        for session_id in sessions:
            await runtime.new_session(session_id, mode="rlm")
    finally:
        await runtime.close()
    return env
