"""An optimization run's candidate follows the Session the moment the run ends (issue 21): two
runtimes with their own state directories ("host A" and "host B") on one PostgreSQL database;
A runs GEPA with the scripted models (real sandbox rollouts) and commits nothing else, and B's
``optimization.status`` lists A's candidate and can read its report at once."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import psycopg
import pytest

from fleet_core.api import FleetRuntime
from fleet_core.config import EffectiveConfig, load_config
from fleet_core.engine.lm import StaticLmProvider
from fleet_core.optimization.scripted_examples import add_examples, scripted_models

pytestmark = pytest.mark.postgres


def _config(url: str, state: Path) -> EffectiveConfig:
    environ = {
        "FLEET_STATE_DIR": str(state),
        "FLEET_DATABASE_URL": url,
        "FLEET_MLFLOW_DESTINATION": "off",
    }
    return load_config(environ=environ, cwd=state.parent)


@pytest.fixture
async def hosts(
    postgres_database: str, tmp_path: Path
) -> AsyncIterator[tuple[FleetRuntime, FleetRuntime]]:
    with psycopg.connect(postgres_database.replace("+psycopg", ""), autocommit=True) as conn:
        conn.execute("DROP SCHEMA public CASCADE")
        conn.execute("CREATE SCHEMA public")
    root, judge, reflection = scripted_models()
    provider = StaticLmProvider(root, judge=judge, reflection=reflection)
    opened = [
        await FleetRuntime.open(
            _config(postgres_database, tmp_path / name / "state"), lm_provider=provider
        )
        for name in ("a", "b")
    ]
    yield opened[0], opened[1]
    for runtime in opened:
        await runtime.close()


async def test_a_finished_runs_candidate_is_listed_on_another_host_at_once(
    hosts: tuple[FleetRuntime, FleetRuntime],
) -> None:
    a, b = hosts
    await add_examples(a, {"alpha": 3, "beta": 3, "crit": 3}, critical=("crit",))
    await a.new_session("research-1", mode="rlm")

    run = await a.optimization.run("research-1", max_metric_calls=4)

    status = await b.optimization.status("research-1")  # A committed nothing after the run
    assert [c.version for c in status.candidates] == [run.version]
    assert status.candidates[0].candidate_digest == run.candidate_digest
    report = await b.optimization.report("research-1", run.version)
    assert report == run.report_path.read_text()
