"""The facade the faces stand on: Turn and trace lookup, tracing status, labels without a trace,
``reconfigure`` and doctor's model checks (SQLite and PostgreSQL)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet_core.api import FleetRuntime
from fleet_core.config import EffectiveConfig, load_config
from fleet_core.errors import ConfigError, TurnNotFound
from fleet_core.evaluation.labels import LabelUpdate
from fleet_core.observability.errors import TraceNotFound, TracingUnavailable
from fleet_core.store import TurnOutcome

OFF = {"FLEET_MLFLOW_DESTINATION": "off"}


def _finished_turn(runtime: FleetRuntime, session_id: str, trace_id: str | None) -> str:
    claim = runtime.store.claim_turn(session_id, "Sum revenue", None)
    runtime.store.finish_turn(
        claim.turn_id,
        TurnOutcome(
            status="completed",
            result={"turnId": claim.turn_id, "sessionId": session_id, "status": "completed"},
            answer="42",
            trace_id=trace_id,
        ),
    )
    return claim.turn_id


def _config(fleet_environ: dict[str, str], tmp_path: Path, **extra: str) -> EffectiveConfig:
    return load_config(environ=fleet_environ | OFF | extra, cwd=tmp_path)


async def test_turns_are_found_by_trace_id_or_turn_id(
    fleet_environ: dict[str, str], tmp_path: Path
) -> None:
    runtime = await FleetRuntime.open(_config(fleet_environ, tmp_path))
    try:
        await runtime.new_session("facade")
        traced = _finished_turn(runtime, "facade", "tr-facade1")
        untraced = _finished_turn(runtime, "facade", None)
        by_trace = await runtime.traces.find_turn("tr-facade1")
        assert by_trace is not None and by_trace.turn_id == traced
        by_turn_id = await runtime.traces.find_turn(untraced)  # no trace: its Turn id
        assert by_turn_id is not None and by_turn_id.turn_id == untraced
        assert await runtime.traces.find_turn("tr-nothing") is None
        assert await runtime.turn_session(traced) == "facade"
        assert (await runtime.turn_result(traced))["sessionId"] == "facade"
        assert (await runtime.get_turn(untraced)).answer == "42"
        with pytest.raises(TurnNotFound):
            await runtime.turn_session("turn_missing")
        # labels need an MLflow trace: a Turn without one says so, tracing off says why
        with pytest.raises(TraceNotFound, match="has no MLflow trace"):
            await runtime.traces.label(untraced, _update())
        with pytest.raises(TracingUnavailable, match="FLEET_MLFLOW_DESTINATION=local"):
            await runtime.traces.label(traced, _update())
        status = runtime.traces.status()
        assert not status.enabled and status.destination == "off"
        assert runtime.describe_storage().backend in ("sqlite", "postgresql")
    finally:
        await runtime.close()


def _update() -> LabelUpdate:
    return LabelUpdate(expected_values=["42"])


async def test_reconfigure_applies_new_settings_and_refuses_a_new_state_dir(
    fleet_environ: dict[str, str], tmp_path: Path
) -> None:
    config = _config(fleet_environ, tmp_path)
    runtime = await FleetRuntime.open(config)
    try:
        turns = runtime.turns
        before = turns.lms
        changed = _config(
            fleet_environ,
            tmp_path,
            FLEET_LM_MODEL="openai/other",
            FLEET_LM_API_BASE="http://127.0.0.1:9/v1",
            FLEET_LM_API_KEY="sk-test",
        )
        assert await runtime.reconfigure(changed) == []
        assert runtime.config is changed
        assert turns.lms is not before  # the configured models follow the new [llm]
        moved = _config(fleet_environ | {"FLEET_STATE_DIR": str(tmp_path / "elsewhere")}, tmp_path)
        with pytest.raises(ConfigError, match="restart"):
            await runtime.reconfigure(moved)
        assert runtime.config is changed
    finally:
        await runtime.close()


def test_model_checks_name_what_to_set_without_probing(tmp_path: Path) -> None:
    from fleet_core.api import diagnostics

    bare = load_config(  # no embedded model either, whether or not its extra is installed
        environ={"FLEET_STATE_DIR": str(tmp_path / "s"), "FLEET_LOCAL_MODEL__ENABLED": "false"},
        cwd=tmp_path,
    )
    (root, sub) = diagnostics.check_models(bare, ("root", "sub"), probe=False)
    assert not root.configured and not root.ok and "FLEET_LM_API_BASE" in root.fix
    assert not sub.configured
    configured = load_config(
        environ={
            "FLEET_STATE_DIR": str(tmp_path / "s"),
            "FLEET_LM_MODEL": "openai/m",
            "FLEET_LM_API_BASE": "http://127.0.0.1:9/v1",
            "FLEET_LM_API_KEY": "sk-test",
        },
        cwd=tmp_path,
    )
    (checked,) = diagnostics.check_models(configured, ("root",), probe=False)
    assert checked.ok and checked.model and checked.api_base == "http://127.0.0.1:9/v1"
    (probed,) = diagnostics.check_models(configured, ("root",))
    assert not probed.ok and probed.problem.startswith("unreachable")
