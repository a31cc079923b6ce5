"""The Jev key (issue 10) never leaves for anywhere but Jev's Authorization header: a Turn that
Jev triages and preloads for, sandbox code that dumps its environment and calls
``jev_decide_batched``, a Jev server that echoes the key in its error body (the fallback path),
a recorded replay and a queued trace; then every event, result, store row (replays and the
trace export queue decoded), file under the state dir and log record is scanned: zero hits."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from fleet_core.api import FleetRuntime
from fleet_core.config import load_config
from fleet_core.engine.scripted_lm import SwitchableLms, action, fields, scripted_lm, submit
from fleet_core.events import TurnEvent
from fleet_core.models import TurnRequest
from tests.fake_jev import KEY, fake_jev
from tests.reliability.test_secrets import _decoded, _file_hits, _store_hits

DECIDE = """
import os
env = repr(dict(os.environ)) + open('/proc/self/environ', 'rb').read().decode('latin-1')
r = jev_decide_batched(['apple', 'pear'], 'Does it start with a vowel?', ['yes', 'no'])
print(r, len(env), 'FLEET_JEV' in env)
"""


def jev_hits(text: str | bytes) -> bool:
    return KEY.encode() in (text.encode() if isinstance(text, str) else text)


@pytest.mark.parametrize("jev_mode", ["ok", "echo"])
async def test_the_jev_key_reaches_no_event_result_store_file_or_log(
    fleet_environ: dict[str, str],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    jev_mode: str,
) -> None:
    caplog.set_level(logging.DEBUG)
    with fake_jev(mode=jev_mode, route="rlm") as fake:
        monkeypatch.setenv("FLEET_JEV_API_KEY", KEY)
        monkeypatch.setenv("FLEET_JEV_BASE_URL", fake.url)
        config = load_config(environ={**os.environ, **fleet_environ}, cwd=tmp_path)
        assert KEY in config.secrets.values()  # the redactor knows it
        lms = SwitchableLms()
        lms.sub = scripted_lm(
            rules={
                "least expensive route": fields(route="rlm"),
                "Does it start with a vowel?": fields(decision="yes"),
            }
        )
        lms.root = scripted_lm([action(DECIDE), submit("str(r)")])
        runtime = await FleetRuntime.open(config, lm_provider=lms, trace_export="deferred")
        events: list[TurnEvent] = []
        try:
            sid = (await runtime.new_session()).session_id
            done = await runtime.run_turn(
                TurnRequest(session_id=sid, task="classify fruit", record_replay=True),
                on_event=events.append,
            )
            assert done.status == "completed", done.error
            backend = "jev" if jev_mode == "ok" else "generative"
            assert f"'backend': '{backend}'" in done.answer
            if jev_mode == "echo":  # the server echoed the key; Fleet's error never does
                errors = [e.payload.get("error") for e in events if e.kind == "jev_decision"]
                assert errors and all("answered HTTP 500" in e for e in errors if e)
            outputs = [
                e.payload.get("output") or ""
                for e in events
                if e.kind == "cell_output" and e.payload["phase"] == "task"
            ]
            assert any(o.rstrip().endswith("False") for o in outputs), outputs  # no FLEET_JEV_*
            assert [e.kind for e in events if jev_hits(e.model_dump_json())] == []
            # the queued trace records the decisions on its root span (and no key)
            trace = await runtime.traces.pending(events[-1].payload["traceId"])
            assert trace is not None
            [root] = [span for span in trace.spans if span.parent_id is None]
            batches = root.attributes["fleet.jev_decisions"]
            answered = [(b["category"], b["backend"]) for b in batches if b["ok"]]
            if jev_mode == "ok":
                assert answered == [
                    ("routing", "jev"),
                    ("skill_selection", "jev"),
                    ("other_decisions", "jev"),
                ]
            else:  # every Jev call failed; the sandbox's batch fell back to the sub LM
                assert answered == [("other_decisions", "generative")]
                assert len([b for b in batches if not b["ok"]]) == 3
            if jev_mode == "ok":
                assert len(root.attributes["fleet.skill_selection"]["decisions"]) == 3
            assert not jev_hits(repr(trace))
            assert not jev_hits(done.model_dump_json())
            rows, _ = _store_hits(runtime)
            assert rows.get("fleet_trace_exports", 0) >= 1
            from sqlalchemy import select

            from fleet_core.store import schema

            with runtime.store.engine.connect() as conn:
                leaked = [
                    table.name
                    for table in schema.metadata.sorted_tables
                    for row in conn.execute(select(table)).mappings()
                    if any(jev_hits(_decoded(v)) for v in row.values())
                ]
            assert leaked == []
        finally:
            await runtime.close()
    assert fake.requests and all(
        r["headers"]["authorization"] == f"Bearer {KEY}" for r in fake.requests
    )  # the one place the key goes
    assert [p for p in _file_hits(config.state_dir) if KEY in p] == []
    for path in config.state_dir.rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert not jev_hits(_decoded(path.read_bytes())), path
    assert not jev_hits(caplog.text)
    assert not any(jev_hits(r.exc_text or "") for r in caplog.records)
