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
from fleet_core.observability.sample_turn import scripted_turn_events, scripted_turn_result
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
    tracer.export(trace.finish(result))
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


async def test_canary_appears_nowhere_end_to_end(
    obs_config: EffectiveConfig,
    mlflow_state: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A real Turn with the canary as FLEET_LM_API_KEY and in a workspace file name: the stored
    trace, every event, log records, the replay and the store rows never contain it."""
    from sqlalchemy import select

    from fleet_core.api import FleetRuntime
    from fleet_core.engine.scripted_lm import action, scripted_lm, submit
    from fleet_core.models import TurnRequest
    from fleet_core.store import schema

    class Lms:
        root: object = None

        def check(self, *roles: str) -> None:
            return None

        def lm(self, role: str) -> object:
            return self.root

        def uses_embedded(self, role: str) -> bool:
            return False

    def raising(text: str) -> str:
        raise RuntimeError(f"provider rejected api_key {CANARY}")

    caplog.set_level(logging.DEBUG, logger="fleet_core")
    lms = Lms()
    runtime = await FleetRuntime.open(obs_config, lm_provider=lms)
    events: list = []
    try:
        sid = (await runtime.new_session(mode="rlm")).session_id
        await runtime.write_file(sid, f"files/{CANARY}.csv", b"a,b\n1,2\n")
        # 1. recordReplay with the secret in a file name: refused before the Turn is claimed
        with pytest.raises(ReplayRefused, match=r"file name .* contains a configured secret"):
            await runtime.run_turn(TurnRequest(session_id=sid, task="t", record_replay=True))
        assert await runtime.history(sid) == []
        # 2. a Turn whose code, output, error and answer carry the canary
        lms.root = scripted_lm(
            [
                action(f"import os\nnames = os.listdir('files')\nprint(names, 'key={CANARY}')"),
                action(f"raise ValueError('bad key {CANARY}')"),
                submit("str(names)", note=f"the files were {CANARY}.csv"),
            ]
        )
        done = await runtime.run_turn(
            TurnRequest(session_id=sid, task="List the files"), on_event=events.append
        )
        assert done.status == "completed", done.error
        assert "[redacted]" in done.answer and CANARY not in done.model_dump_json()
        # 3. a Turn that fails with the canary in the provider's error
        lms.root = scripted_lm([raising])
        failed = await runtime.run_turn(
            TurnRequest(session_id=sid, task="fail please"), on_event=events.append
        )
        assert failed.status == "failed" and failed.error is not None
        assert CANARY not in failed.error.message
        # 4. a replay-captured Turn once the file is renamed (history and notes carry the
        #    earlier, redacted answers)
        await runtime.delete_file(sid, f"files/{CANARY}.csv")
        await runtime.write_file(sid, "files/renamed.csv", b"a,b\n1,2\n")
        lms.root = scripted_lm([submit(f"'done {CANARY}'")])
        replayed = await runtime.run_turn(
            TurnRequest(session_id=sid, task="again", record_replay=True),
            on_event=events.append,
        )
        assert replayed.status == "completed", replayed.error
        _, blob = await runtime._run(runtime.store.get_replay, replayed.turn_id)
        assert CANARY.encode() not in gzip.decompress(blob)
        # the stored traces, as MLflow returns them and as bytes of the whole local store
        for result in (done, failed, replayed):
            assert result.trace_id
            await runtime.traces.flush()
            view = await runtime._run(runtime.tracer.load_trace, result.trace_id)
            assert view.turn_id == result.turn_id
            raw = runtime.tracer.backend._get_trace(result.trace_id)  # type: ignore[attr-defined]
            assert CANARY not in raw.to_json()
        for path in (mlflow_state / "mlflow").rglob("*"):
            if path.is_file():
                assert CANARY.encode() not in path.read_bytes(), path
        # every event passed to on_event
        assert events and any(e.kind == "code_cell" for e in events)
        for event in events:
            assert CANARY not in event.model_dump_json(), event.kind
        # every store row
        with runtime.store.engine.connect() as conn:
            for table in schema.metadata.sorted_tables:
                for row in conn.execute(select(table)).mappings():
                    assert CANARY not in repr(dict(row)), table.name
    finally:
        await runtime.close()
    # log records (the Turn failure above is logged with its traceback)
    assert any("Turn failed" in r.getMessage() for r in caplog.records)
    for record in caplog.records:
        assert CANARY not in record.getMessage() and CANARY not in (record.exc_text or "")
    assert CANARY not in caplog.text


# ---------------------------------------------------------------------------------------------
# issue 9: a redacted value keeps its format
# ---------------------------------------------------------------------------------------------


def test_a_redacted_json_answer_still_parses() -> None:
    """The answer that came back as ``{"passwd": [redacted]}``: the key-name rule (``passwd``)
    replaced the quoted value with a bare ``[redacted]``; it now keeps the quotes."""
    import json

    red = Redactor.from_values(())
    answer = '{"passwd": "BLOCKED:FileNotFoundError"}'
    out = red.text(answer)
    assert json.loads(out) == {"passwd": REDACTED}
    nested = {
        "user": "ann",
        "password": "hunter2hunter2",
        "db": {"api_key": "s3cr3t-value", "port": 5432, "token": 12345678},
        "escaped": {"secret": 'a "quoted" hunter2hunter2 \\\\ value'},
        "token_count": 3,
        "password_hint": None,
    }
    for text in (json.dumps(nested), json.dumps(nested, indent=2), json.dumps([nested])):
        out = red.text(text)
        parsed = json.loads(out)  # still JSON
        for secret in ("hunter2hunter2", "s3cr3t-value", "12345678", "quoted"):
            assert secret not in out
        first = parsed[0] if isinstance(parsed, list) else parsed
        assert first["user"] == "ann" and first["db"]["port"] == 5432
        assert first["password"] == first["db"]["api_key"] == first["db"]["token"] == REDACTED
        assert first["token_count"] == 3 and first["password_hint"] is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{'password': 'hunter2hunter2'}", "{'password': '[redacted]'}"),  # Python repr
        ('password: "hunter2hunter2"\nuser: ann', 'password: "[redacted]"\nuser: ann'),  # YAML
        ("PASSWORD='hunter2hunter2'", "PASSWORD='[redacted]'"),  # .env / shell
        ("api_key=hunter2hunter2&user=ann", "api_key=[redacted]&user=ann"),  # query string
        ('{"password": ""}', '{"password": ""}'),  # nothing to hide
    ],
)
def test_a_redacted_value_keeps_its_quoting(text: str, expected: str) -> None:
    assert Redactor.from_values(()).text(text) == expected


def test_redacted_yaml_and_dotenv_still_parse() -> None:
    import io

    import yaml
    from dotenv import dotenv_values

    red = Redactor.from_values(())
    parsed = yaml.safe_load(red.text('user: ann\npassword: "hunter2hunter2"\nport: 5432\n'))
    assert parsed == {"user": "ann", "password": REDACTED, "port": 5432}
    env = dotenv_values(stream=io.StringIO(red.text('API_KEY="sk-x-hunter2"\nUSER=ann\n')))
    assert env == {"API_KEY": REDACTED, "USER": "ann"}


def test_chained_log_filters_each_redact_the_exception_text(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The process-wide filter (installed by a Turn, without this secret) may see a record first
    and turn its exception into text; the handler's own filter must still redact its secret."""
    logger = logging.getLogger("fleet.test.chained")
    first, second = (
        RedactingFilter(Redactor.from_values(["other-secret"])),
        RedactingFilter(Redactor.from_values([CANARY])),
    )
    logger.addFilter(first)
    caplog.handler.addFilter(second)
    try:
        with caplog.at_level(logging.INFO, logger="fleet.test.chained"):
            try:
                raise ValueError(f"bad key {CANARY} and other-secret")
            except ValueError:
                logger.exception("failed", stack_info=True)
    finally:
        logger.removeFilter(first)
        caplog.handler.removeFilter(second)
    assert caplog.records and "ValueError" in caplog.text
    assert CANARY not in caplog.text and "other-secret" not in caplog.text


def test_redaction_stays_linear_on_long_unbroken_text() -> None:
    """A long base64 or minified string in cell output must not stall a Turn: the time for 4x
    the text stays far from the 16x a quadratic pattern costs (a ratio in one run)."""
    import time

    redactor = Redactor.from_values(["sk-configured-secret-1234"])

    def seconds(text: str) -> float:
        best = float("inf")
        for _ in range(3):
            started = time.perf_counter()
            redactor.text(text, None)
            best = min(best, time.perf_counter() - started)
        return best

    for unit in ("a", "aB3/+=", "x_"):
        short, long = unit * (5_000 // len(unit)), unit * (20_000 // len(unit))
        ratio = seconds(long) / max(seconds(short), 1e-6)
        assert ratio < 8, f"{unit!r}: 4x the text took {ratio:.1f}x the time"
    assert redactor.text('{"passwd": "hunter2"}', None) == '{"passwd": "[redacted]"}'
