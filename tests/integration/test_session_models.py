"""Issue 10: a Session's model selection through FleetRuntime, on both databases: stored as
Session selections (source ``session``), surviving a restart, refusing endpoints and keys, and
used by the next Turn's model calls (the scripted engine sees the id; the trace names it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet_core.api import FleetRuntime
from fleet_core.config import EffectiveConfig, load_config
from fleet_core.engine.lm import StaticLmProvider
from fleet_core.engine.scripted_lm import scripted_lm, submit, submit_model
from fleet_core.errors import InvalidInput
from fleet_core.models import TurnRequest

KEY = "sk-test-0123456789abcdef0123456789abcdef"


def _config(environ: dict[str, str], tmp_path: Path, **extra: str) -> EffectiveConfig:
    return load_config(environ={**environ, "FLEET_LM_API_KEY": KEY, **extra}, cwd=tmp_path)


async def test_a_selection_survives_a_restart_and_is_reported_with_source_session(
    fleet_environ: dict[str, str], tmp_path: Path
) -> None:
    config = _config(fleet_environ, tmp_path, FLEET_MLFLOW_DESTINATION="off")
    first = await FleetRuntime.open(config)
    try:
        await first.new_session("pick", mode="rlm")
        chosen = await first.set_models("pick", root="gpt-4o-mini", sub="llama-3.1-8b")
        assert chosen.wire() == {"sessionId": "pick", "root": "gpt-4o-mini", "sub": "llama-3.1-8b"}
    finally:
        await first.close()

    second = await FleetRuntime.open(config)
    try:
        await second.load_session("pick")
        assert (await second.session_models("pick")).wire() == {
            "sessionId": "pick",
            "root": "gpt-4o-mini",
            "sub": "llama-3.1-8b",
        }
        effective = await second.effective_config("pick")
        assert effective.settings.llm.root.model == "gpt-4o-mini"
        assert effective.settings.llm.sub.model == "llama-3.1-8b"
        assert effective.sources["llm.root.model"] == "session"
        assert effective.sources["llm.sub.model"] == "session"
        # null clears one role: the configuration's model applies to it again
        cleared = await second.set_models("pick", root="gpt-4o-mini", sub=None)
        assert cleared.wire() == {"sessionId": "pick", "root": "gpt-4o-mini", "sub": None}
        effective = await second.effective_config("pick")
        assert effective.settings.llm.sub.model is None
        assert "llm.sub.model" not in effective.sources
        assert (await second.describe_session("pick")).mode == "rlm"  # other selections kept
    finally:
        await second.close()


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("https://api.example.com/v1", "endpoint URL"),
        ("http://127.0.0.1:8000", "endpoint URL"),
        (KEY, "API key"),
        ("sk-abc", "API key"),
        ("a" * 40, "API key"),
        ("gpt 4o", "not a model id"),
        ("", "not a model id"),
        ("x" * 201, "not a model id"),
    ],
)
async def test_only_model_ids_are_selectable_and_the_message_never_repeats_the_value(
    fleet_environ: dict[str, str], tmp_path: Path, value: str, says: str
) -> None:
    runtime = await FleetRuntime.open(_config(fleet_environ, tmp_path))
    try:
        await runtime.new_session("guard")
        with pytest.raises(InvalidInput) as refused:
            await runtime.set_models("guard", root=value)
        assert says in refused.value.message
        assert "'root'" in refused.value.message
        if value:
            assert value not in refused.value.message
        assert (await runtime.session_models("guard")).root is None  # nothing stored
    finally:
        await runtime.close()


async def test_a_key_configured_under_another_name_is_refused_too(
    fleet_environ: dict[str, str], tmp_path: Path
) -> None:
    secret = "plainsecretvalue"  # no key-like shape, but it is a configured secret
    config = _config(fleet_environ, tmp_path, FLEET_LM_SUB_API_KEY=secret)
    runtime = await FleetRuntime.open(config)
    try:
        await runtime.new_session("guard2")
        with pytest.raises(InvalidInput, match="API key") as refused:
            await runtime.set_models("guard2", sub=f"x-{secret}")
        assert secret not in refused.value.message
    finally:
        await runtime.close()


async def test_the_next_turn_calls_the_selected_model_and_its_trace_names_it(
    fleet_environ: dict[str, str], tmp_path: Path
) -> None:
    config = _config(fleet_environ, tmp_path)  # tracing on (local); traces stay queued
    first = await FleetRuntime.open(config)
    try:
        await first.new_session("use", mode="rlm")
        await first.set_models("use", root="gpt-x-large", sub="gpt-x-small")
    finally:
        await first.close()

    root = scripted_lm(rules={"MODELQ": submit_model()})  # every call
    sub = scripted_lm([submit("'unused'")])
    second = await FleetRuntime.open(
        config, lm_provider=StaticLmProvider(root, sub), trace_export="deferred"
    )
    try:
        await second.load_session("use")
        result = await second.run_turn(TurnRequest(session_id="use", task="MODELQ which model?"))
        assert result.status == "completed", result.error
        assert result.answer == "openai/gpt-x-large"  # the scripted model saw the selection
        assert root.engine_script.models == ["openai/gpt-x-large"]
        assert result.trace_id is not None
        record = await second.traces.pending(result.trace_id)
        assert record is not None
        called = {s.attributes.get("model") for s in record.spans if s.name == "lm.call"}
        assert called == {"openai/gpt-x-large"}
        [turn_span] = [s for s in record.spans if s.parent_id is None]
        settings = turn_span.attributes["fleet.model_settings"]
        assert settings["root"]["model"] == "gpt-x-large"
        assert settings["sub"]["model"] == "gpt-x-small"

        # cleared: the next Turn is back on the provider's own model
        await second.set_models("use")
        root.engine_script.models.clear()
        again = await second.run_turn(TurnRequest(session_id="use", task="MODELQ and now?"))
        assert again.status == "completed", again.error
        assert root.engine_script.models == ["openai/scripted"]
        assert again.answer == "openai/scripted"
    finally:
        await second.close()
