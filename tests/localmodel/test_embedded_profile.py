"""The small-model profile is selected automatically for the embedded model, and its
llama.cpp-only request fields reach the embedded server (the stand-in records each request);
with a configured endpoint the default profile runs. docs/engine.md#the-small-model-profile."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping
from pathlib import Path

import pytest

from fleet_core.api import FleetRuntime
from fleet_core.api.optimization import CacheFreeModels
from fleet_core.config import load_config
from fleet_core.engine.lm import Role, SelectedLmProvider, StaticLmProvider, select_models
from fleet_core.localmodel.supervisor import LocalModel
from fleet_core.models import TurnRequest, TurnResult

SALES = "region,revenue\nnorth,100\nsouth,250\nnorth,50.5\n"
TASK = "Calculate revenue by region and save artifacts/revenue_by_region.csv."
PROGRAM = (
    "import os\nimport pandas as pd\n"
    "t = pd.read_csv('files/sales.csv').groupby('region', as_index=False)['revenue'].sum()\n"
    "os.makedirs('artifacts', exist_ok=True)\n"
    "t.to_csv('artifacts/revenue_by_region.csv', index=False)\n"
    "print(t.to_string(index=False))"
)


def _posts(record: Path) -> list[dict]:
    lines = (
        [json.loads(line) for line in record.read_text().splitlines()] if record.exists() else []
    )
    return [
        e["body"] for e in lines if e["event"] == "request" and e["path"] == "/v1/chat/completions"
    ]


async def _quickstart_turn(
    tmp_path: Path, environ: Mapping[str, str], local_model: LocalModel, session: str
) -> tuple[FleetRuntime, TurnResult]:
    """Open a runtime, attach the sales data as the dataset and run the quickstart Turn; the
    caller closes the runtime."""
    config = load_config(environ=dict(environ), cwd=tmp_path)
    runtime = await FleetRuntime.open(config, local_model=local_model)
    try:
        await runtime.new_session(session)
        source = tmp_path / "sales.csv"
        source.write_text(SALES)
        await runtime.attach(session, source)
        await runtime.set_dataset(session, "files/sales.csv")
        return runtime, await runtime.run_turn(TurnRequest(session_id=session, task=TASK))
    except BaseException:
        await runtime.close()
        raise


async def test_the_embedded_model_runs_the_quickstart_with_the_small_profile(
    tmp_path: Path, local_model: LocalModel, record: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_LLAMA_REPLY", f"```python\n{PROGRAM}\n```")
    environ = {"FLEET_STATE_DIR": str(tmp_path / "state"), "FLEET_MLFLOW_DESTINATION": "off"}
    assert load_config(environ=environ, cwd=tmp_path).settings.engine.profile == "auto"
    runtime, result = await _quickstart_turn(tmp_path, environ, local_model, "q")
    try:
        assert result.status == "completed", result.error
        assert result.route == "flex"
        assert result.usage.calls_by_category == {"generation": 1}  # no triage: small profile
        data = await runtime.read_file("q", "artifacts/revenue_by_region.csv")
        rows = {
            r["region"]: float(r["revenue"]) for r in csv.DictReader(io.StringIO(data.decode()))
        }
        assert rows == {"north": 150.5, "south": 250.0}
        assert "150.5" in result.answer
    finally:
        await runtime.close()
    (body,) = _posts(record)
    assert body["repeat_penalty"] == 1.1 and "grammar" not in body  # grammar: opt-in
    assert body["max_tokens"] == 300


async def test_a_configured_endpoint_keeps_the_default_profile(
    tmp_path: Path, local_model: LocalModel, record: Path
) -> None:
    environ = {
        "FLEET_STATE_DIR": str(tmp_path / "state"),
        "FLEET_MLFLOW_DESTINATION": "off",
        "FLEET_LM_API_BASE": "http://127.0.0.1:9/v1",  # nothing listens: calls fail fast
        "FLEET_LM_MODEL": "hosted-model",
        "FLEET_LM_API_KEY": "sk-test-key",
        "FLEET_LLM__NUM_RETRIES": "0",
    }
    runtime, result = await _quickstart_turn(tmp_path, environ, local_model, "h")
    try:
        # the default profile triages even with a dataset (the small one would not)
        assert result.usage.calls_by_category.get("routing") == 1
    finally:
        await runtime.close()
    assert not _posts(record)  # the embedded server never started


def test_wrapping_providers_keep_the_embedded_answer() -> None:
    """A Session's model selection and the optimizer's cache-free copies wrap the provider;
    both once hid that the root runs on the embedded model (so GEPA's rollouts and such
    Sessions ran the default profile on it)."""

    class Embedded(StaticLmProvider):
        def uses_embedded(self, role: Role) -> bool:
            return role == "root"

    selected = select_models(Embedded(object()), {"sub": "another-model"})
    assert isinstance(selected, SelectedLmProvider)
    assert selected.uses_embedded("root") and not selected.uses_embedded("sub")
    cache_free = CacheFreeModels(Embedded(object()))
    assert cache_free.uses_embedded("root") and not cache_free.uses_embedded("sub")
