"""A real ``mlflow server`` for tests: a loopback port, a given backend store, stoppable and
restartable on the same port, its access log kept (tests/observability/test_mlflow_server.py,
tests/cli/test_doctor_services.py)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from fleet_core.offline import offline_environ

START_SECONDS = 180  # a fresh MLflow database runs its migrations first
WARM_UP_SECONDS = 300


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class MlflowServer:
    """``mlflow server`` on a loopback port with a PostgreSQL backend store, stoppable and
    restartable on the same port; its log is kept for counting trace writes."""

    def __init__(self, backend_uri: str, root: Path) -> None:
        self.backend_uri, self.root = backend_uri, root
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.logs: list[Path] = []

    def start(self) -> None:
        log = self.root / f"mlflow-{len(self.logs)}.log"
        self.logs.append(log)
        mlflow = Path(sys.executable).parent / "mlflow"
        with log.open("wb") as out:
            self.proc = subprocess.Popen(
                [
                    str(mlflow), "server",
                    "--backend-store-uri", self.backend_uri,
                    "--default-artifact-root", (self.root / "artifacts").as_uri(),
                    "--host", "127.0.0.1", "--port", str(self.port), "--workers", "1",
                    "--uvicorn-opts", "--access-log",
                ],
                stdout=out, stderr=subprocess.STDOUT, cwd=self.root,
                # offline, as fleet-lsp itself runs: without the bundled LiteLLM cost map the
                # server blocks each trace write on a download the sandbox cannot make
                env=offline_environ({**os.environ, "MLFLOW_LOGGING_LEVEL": "WARNING"}),
                start_new_session=True,
            )  # fmt: skip
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, log.read_text(errors="replace")[-3000:]
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=2) as answer:
                    if answer.read().strip() == b"OK":
                        self._warm_up()
                        return
            except OSError:
                time.sleep(0.5)
        raise AssertionError(f"mlflow server did not start in {START_SECONDS} s")

    def _warm_up(self) -> None:
        """Write one trace to a separate experiment and wait for it: a fresh server's first
        OTLP span write loads its tracing stack and blocks its event loop for minutes on a
        loaded machine (measured: over 120 s, then 21 s, then 1.5 s per write). The tests
        measure fleet-lsp's exporters, not MLflow's cold start."""
        from fleet_core.observability.destination import MlflowDestination
        from fleet_core.observability.mlflow_backend import _mlflow_span
        from fleet_core.observability.records import TurnTraceStart
        from fleet_core.observability.sample_turn import scripted_turn_events, scripted_turn_result
        from fleet_core.observability.tracing import MlflowTracer

        names = {"runtime": "warm-up", "evaluation": "warm-up", "optimization": "warm-up"}
        tracer = MlflowTracer(MlflowDestination("server", self.url, names))  # type: ignore[arg-type]
        turn_id = f"warm-{len(self.logs)}"
        trace = tracer.start(
            TurnTraceStart(
                turn_id=turn_id, session_id="warm", task="x", mode="rlm", configuration_digest="c"
            )
        )
        for event in scripted_turn_events(turn_id, "warm"):
            trace.on_event(event)
        record = trace.finish(scripted_turn_result(turn_id, "warm"))
        assert record is not None
        saved = os.environ.get("MLFLOW_HTTP_REQUEST_TIMEOUT")
        os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] = "120"
        deadline = time.monotonic() + WARM_UP_SECONDS
        backend = tracer.backend
        spans = [_mlflow_span(record.trace_id, span) for span in record.spans]
        try:
            experiment_id = backend.experiment_id("runtime")
            _, tracing = backend._clients()
            while True:  # spans only (no trace creation, which trace_writes counts)
                try:
                    tracing.log_spans(experiment_id, spans)
                    return
                except Exception:  # the write that timed out still warms the server up
                    if time.monotonic() > deadline:
                        raise
        finally:
            if saved is None:
                os.environ.pop("MLFLOW_HTTP_REQUEST_TIMEOUT", None)
            else:
                os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] = saved
            tracer.close()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, 15)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                self.proc.wait(10)
        self.proc = None

    def log_text(self) -> str:
        return "".join(log.read_text(errors="replace") for log in self.logs)

    def trace_writes(self) -> int:
        """Trace creations the server logged (``POST .../mlflow/traces``), over every start."""
        return sum(
            line.count("POST /api/3.0/mlflow/traces ")
            for log in self.logs
            for line in log.read_text(errors="replace").splitlines()
        )
