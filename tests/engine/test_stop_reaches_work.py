"""A Turn's stop (deadline or cancel) reaches the work already under way: a model call waiting on
a server that never answers, the embedded LM's retry backoff, and a cell whose start raced the
cancel."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import dspy
import pytest

from fleet_core.engine.control import TurnCancelled, TurnControl, TurnDeadlineExceeded
from fleet_core.engine.embedded_lm import EmbeddedLM
from fleet_core.engine.metering import MeteredLM
from fleet_core.engine.scripted_lm import action, scripted_lm, submit
from fleet_core.models import TurnRequest
from fleet_core.sandbox.interpreter import SandboxInterpreter
from tests.fake_http import JsonHandler, serving

HANG_SECONDS = 30.0  # how long the fake endpoint holds a request before it fails it


@pytest.fixture
def hanging_endpoint() -> Iterator[str]:
    """An OpenAI-style endpoint that accepts each request and answers nothing until the test
    ends (or ``HANG_SECONDS`` pass)."""
    release = threading.Event()

    class Hang(JsonHandler):
        def do_POST(self) -> None:
            release.wait(HANG_SECONDS)
            self.send_json({"error": {"message": "too late"}}, status=500)

    with serving(Hang) as server:
        yield f"http://127.0.0.1:{server.server_port}/v1"
        release.set()


def _hosted_lm(api_base: str) -> Any:
    return dspy.LM(
        "openai/hang-test",
        api_base=api_base,
        api_key="test-key",
        engine="lm15",
        cache=False,
        num_retries=0,
    )


def test_a_hanging_model_call_ends_at_the_turn_deadline(hanging_endpoint: str) -> None:
    control = TurnControl(max_units=5, timeout_seconds=2)
    lm = MeteredLM(_hosted_lm(hanging_endpoint), control, category="generation")
    started = time.monotonic()
    with pytest.raises(TurnDeadlineExceeded):
        lm("hello")
    elapsed = time.monotonic() - started
    assert 1.5 < elapsed < 4, elapsed  # the deadline, not the server's 30 s
    assert control.terminal == "deadline"
    assert control.stopped.is_set()  # the stop hooks ran at the deadline


def test_a_cancel_ends_a_hanging_model_call_at_once(hanging_endpoint: str) -> None:
    control = TurnControl(max_units=5, timeout_seconds=None)
    lm = MeteredLM(_hosted_lm(hanging_endpoint), control, category="generation")
    threading.Timer(0.5, control.cancel).start()
    started = time.monotonic()
    with pytest.raises(TurnCancelled):
        lm("hello")
    assert time.monotonic() - started < 3


def test_the_embedded_lms_retry_backoff_stops_at_a_cancel() -> None:
    requests: list[float] = []

    class Failing(JsonHandler):
        def do_POST(self) -> None:
            requests.append(time.monotonic())
            self.send_json({"error": {"message": "busy"}}, status=500)

    class SlowRetry(EmbeddedLM):  # the server's proof needs a supervised server: not here
        def _prove(self) -> None:
            return None

        def _retry(self, exc: Exception, attempt: int) -> float | None:
            return 30.0 if attempt == 0 else None  # one retry, after a long backoff

    control = TurnControl(max_units=5, timeout_seconds=None)
    backoff_ended = threading.Event()
    with serving(Failing) as server:
        lm = SlowRetry(
            "hosted_vllm/m",
            server=(server.server_port, None, None),
            api_base=f"http://127.0.0.1:{server.server_port}/v1",
            api_key="test-key",
            engine="lm15",
            cache=False,
            num_retries=1,
        )

        def call() -> Any:
            try:
                return lm("hello")
            finally:
                backoff_ended.set()

        threading.Timer(1.0, control.cancel).start()
        started = time.monotonic()
        with pytest.raises(TurnCancelled):
            control.interruptible(call)
        # the helper thread's backoff itself ended (not only the Turn's wait for it) ...
        assert backoff_ended.wait(3), "the retry backoff slept through the cancel"
        assert time.monotonic() - started < 4
        time.sleep(0.3)
    assert len(requests) == 1  # ... and no retry was sent after the cancel


async def test_a_turn_whose_model_hangs_ends_at_its_deadline(
    engine_runtime: Any, lms: Any, hanging_endpoint: str
) -> None:
    await engine_runtime.new_session("h", mode="rlm")
    lms.root = _hosted_lm(hanging_endpoint)
    events: list[Any] = []
    started = time.monotonic()
    result = await engine_runtime.run_turn(
        TurnRequest(session_id="h", task="hang", timeout_seconds=10), on_event=events.append
    )
    elapsed = time.monotonic() - started
    assert result.status == "failed" and result.error.kind == "TurnDeadlineExceeded"
    assert 9.5 < elapsed < 13, elapsed  # the 10 s deadline, not the endpoint's 30 s hang
    assert events[-1].kind == "turn_failed"
    ends = [e.data for e in events if e.kind == "lm_end"]
    assert ends and not ends[-1].ok and ends[-1].error_type == "TurnDeadlineExceeded"


async def test_a_cancel_just_before_the_cell_is_sent_stops_the_cell(
    engine_runtime: Any, lms: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cancel lands after the Turn's last check and before the sandbox has the cell: the
    interrupt finds no cell running, so it must be remembered and the cell must not run."""
    original = SandboxInterpreter._run

    def cancel_then_send(self: SandboxInterpreter, code: str, variables: dict[str, Any]) -> Any:
        if "time.sleep(60)" in code:
            # the TurnInterpreter's tool policy is its bound method: its control is the Turn's
            control = self.policy.__self__._control  # type: ignore[union-attr]
            control.cancel("cancelled just before the cell was sent")
        return original(self, code, variables)

    monkeypatch.setattr(SandboxInterpreter, "_run", cancel_then_send)
    await engine_runtime.new_session("r", mode="rlm")
    lms.root = scripted_lm([action("import time\ntime.sleep(60)\nprint('woke')"), submit("'x'")])
    events: list[Any] = []
    started = time.monotonic()
    result = await engine_runtime.run_turn(
        TurnRequest(session_id="r", task="sleep"), on_event=events.append
    )
    assert time.monotonic() - started < 10
    assert result.status == "cancelled" and result.error.kind == "TurnCancelled"
    [output] = [e.data for e in events if e.kind == "cell_output" and e.data.phase == "task"]
    assert not output.ok and output.outcome == "cancelled"
    assert "woke" not in (output.output or "")
