from __future__ import annotations

import csv
import io
from pathlib import Path

from fleet_core.engine.scripted_lm import action, route, scripted_lm, submit
from fleet_core.models import TurnRequest

SALES = "region,revenue\nnorth,100\nsouth,250\nnorth,50.5\neast,10\nsouth,0.5\n"


async def test_quickstart_revenue_by_region(engine_runtime, lms, tmp_path: Path) -> None:
    runtime = engine_runtime
    session = await runtime.new_session("quick")
    source = tmp_path / "sales.csv"
    source.write_text(SALES)
    await runtime.attach(session.session_id, source)
    lms.root = scripted_lm(
        [
            route("rlm"),
            action(
                "import pandas as pd\n"
                "df = pd.read_csv('files/sales.csv')\n"
                "totals = df.groupby('region', as_index=False)['revenue'].sum()\n"
                "totals.to_csv('artifacts/revenue_by_region.csv', index=False)\n"
                "print(totals.to_string(index=False))"
            ),
            submit("totals.to_string(index=False)", note="groupby+sum on files/sales.csv"),
        ]
    )
    events = []
    result = await runtime.run_turn(
        TurnRequest(
            session_id="quick",
            task="Calculate revenue by region and save artifacts/revenue_by_region.csv.",
        ),
        on_event=events.append,
    )
    assert result.status == "completed", result.error
    assert result.route == "rlm"
    data = await runtime.read_file("quick", "artifacts/revenue_by_region.csv")
    rows = {r["region"]: float(r["revenue"]) for r in csv.DictReader(io.StringIO(data.decode()))}
    assert rows == {"east": 10.0, "north": 150.5, "south": 250.5}
    assert "150.5" in result.answer
    assert [a.path for a in result.artifacts] == ["artifacts/revenue_by_region.csv"]
    kinds = [e.kind for e in events]
    assert kinds[0] == "turn_started" and kinds[-1] == "turn_completed"
    assert "triage_decision" in kinds and "code_cell" in kinds and "cell_output" in kinds
    assert [e.seq for e in events] == sorted(e.seq for e in events)
    assert result.usage.model_calls == 3
    assert result.usage.calls_by_category == {"routing": 1, "generation": 2}
