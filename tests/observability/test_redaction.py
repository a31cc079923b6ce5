from __future__ import annotations

import gzip
import logging
import uuid
from pathlib import Path

import pytest

from fleet_core.config import EffectiveConfig
from fleet_core.observability.errors import ReplayRefused
from fleet_core.observability.redaction import (
    REDACTED,
    Limits,
    RedactingFilter,
    Redactor,
    redact_event,
)
from fleet_core.observability.replay import capture_replay, encode_replay
from fleet_core.observability.testing import scripted_turn_events, scripted_turn_result
from fleet_core.observability.tracing import MlflowTracer, TurnTraceStart

from .conftest import CANARY


@pytest.mark.parametrize(
    "text",
    [
        "Authorization: Bearer abcdef123456789",
        "api_key=supersecretvalue1",
        '{"password": "hunter2hunter2"}',
        "key sk-proj-abcdefghijklmnopqrstuvwx in text",
        "postgresql+psycopg://fleet:pa55word@db:5432/fleet",
        "token: ghp_abcdefghijklmnopqrstuvwxyz0123",
    ],
)
def test_credential_shapes_are_redacted(text: str) -> None:
    out = Redactor.from_values(()).text(text)
    assert REDACTED in out
    for secret in (
        "abcdef123456789",
        "supersecretvalue1",
        "hunter2hunter2",
        "abcdefghijklmnopqrstuvwx",
        "pa55word",
        "ghp_abc",
    ):
        assert secret not in out


def test_usage_counts_are_not_redacted() -> None:
    red = Redactor.from_values(())
    assert red.value({"input_tokens": 10, "max_tokens": 5, "tokenUsage": {"total_tokens": 3}}) == {
        "input_tokens": 10,
        "max_tokens": 5,
        "tokenUsage": {"total_tokens": 3},
    }
    assert red.text("max_tokens=4000") == "max_tokens=4000"


def test_bounds() -> None:
    red = Redactor.from_values(())
    out = red.value(
        {"a": ["x" * 50] * 100, "deep": [[[[[["y"]]]]]]},
        Limits(max_string=10, max_items=5, max_depth=3),
    )
    assert len(out["a"]) == 6 and out["a"][0].startswith("x" * 10 + "... [truncated")
    assert "depth limit" in str(out["deep"])


def test_canary_appears_nowhere(
    tracer: MlflowTracer,
    obs_config: EffectiveConfig,
    mlflow_state: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert CANARY in obs_config.secrets.values()
    red = Redactor.from_config(obs_config)
    turn_id, session_id = uuid.uuid4().hex, "canary-s"
    leaky_file = f"files/{CANARY}.csv"
    # events: the canary in a code cell, its output, a tool input and an error
    events = scripted_turn_events(turn_id, session_id, extra_text=f" # {leaky_file} key={CANARY}")
    trace = tracer.start(
        TurnTraceStart(
            turn_id=turn_id,
            session_id=session_id,
            task=f"Read {leaky_file} with Bearer {CANARY}",
            mode="hybrid",
            configuration_digest=obs_config.digest(),
            workspace_manifest=f"{leaky_file} (3 bytes)",
            context_files={leaky_file: "0" * 64},
        )
    )
    for event in events:
        trace.on_event(event)
    trace.record(
        "tool_call_start", {"call_id": "x", "tool": "read", "inputs": {"path": leaky_file}}
    )
    result = scripted_turn_result(turn_id, session_id, answer=f"Done; the key is {CANARY}")
    assert trace.finish(result)
    # 1. the stored trace, read back through MLflow and as raw bytes of the whole local store
    raw = tracer.backend._get_trace(trace.trace_id)
    assert CANARY not in raw.to_json()
    for path in (mlflow_state / "mlflow").rglob("*"):
        if path.is_file():
            assert CANARY.encode() not in path.read_bytes(), path
    # 2. events as they are streamed/logged
    for event in events:
        assert CANARY not in redact_event(event, red).model_dump_json()
    # 3. log lines
    logger = logging.getLogger("fleet.test.canary")
    handler_filter = RedactingFilter(red)
    caplog.handler.addFilter(handler_filter)
    try:
        with caplog.at_level(logging.INFO, logger="fleet.test.canary"):
            logger.info("opening %s with key %s", leaky_file, CANARY)
            try:
                raise ValueError(f"bad key {CANARY}")
            except ValueError:
                logger.exception("failed")
    finally:
        caplog.handler.removeFilter(handler_filter)
    assert caplog.records and CANARY not in caplog.text
    # 4. replays: a secret-named file refuses capture; free text is redacted
    with pytest.raises(ReplayRefused):
        capture_replay(
            turn_id=turn_id,
            session_id=session_id,
            task="t",
            mode="hybrid",
            workspace_manifest="",
            files={leaky_file: b"a,b\n"},
            configuration=obs_config,
            redactor=red,
        )
    snapshot = capture_replay(
        turn_id=turn_id,
        session_id=session_id,
        task=f"use {CANARY}",
        mode="hybrid",
        workspace_manifest=f"{leaky_file}",
        files={"files/ok.csv": b"a\n"},
        memory_summary=f"remember {CANARY}",
        session_history=[{"task": CANARY}],
        configuration=obs_config,
        redactor=red,
    )
    _, blob = encode_replay(snapshot)
    assert CANARY.encode() not in gzip.decompress(blob)
