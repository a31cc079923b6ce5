"""Load (issue 13): one real server (stdio, scripted models), N Sessions running M rounds of the
quickstart Turn (code in the sandbox, two child agents each) in parallel, while a client hammers
``fleet/session/list``, ``fleet/session/history``, ``fleet/artifact/list`` and
``fleet/artifact/read`` on the same connection. Checked: every Turn completes, nothing deadlocks
(every round and the whole run have timeouts), the read requests never fail, no sandbox process
or cgroup remains after the Turns, the server's thread count (``/proc/<pid>/status``) is back to
its first round's once idle, and its RSS grows by less than 1.5 MB per Turn over the last rounds
(past the lazy imports of the first ones). The p50/p99 of each read request are printed.

CI: 3 Sessions x 4 Turns, tracing off. Long (``FLEET_LONG_TESTS=1``): 8 Sessions x 10 Turns with
local MLflow tracing on (the default destination), as ``fleet-lsp serve`` runs.
"""

from __future__ import annotations

import json
import random
import threading
import time
from concurrent.futures import wait
from pathlib import Path
from typing import Any

import pytest

from tests.lsp.test_turns import QUICKSTART
from tests.reliability.support import (
    SALES,
    SCRIPT,
    RpcError,
    Server,
    Timings,
    descendants,
    sandbox_cgroups,
    server_env,
    wait_until,
)

IDLE_SECONDS = 30.0
STEADY_ROUNDS = 2  # the RSS slope is taken over the last rounds
RSS_PER_TURN_MB = 1.5
READS = (
    "fleet/session/list",
    "fleet/session/history",
    "fleet/artifact/list",
    "fleet/artifact/read",
)


class Hammer(threading.Thread):
    """One client issuing read requests back to back (one at a time) until stopped."""

    def __init__(self, server: Server, sessions: list[str], seed: int) -> None:
        super().__init__(name="hammer", daemon=True)
        self.server, self.sessions = server, sessions
        self.rng = random.Random(seed)
        self.timings = Timings()
        self.errors: list[str] = []
        self.stop = threading.Event()
        self.uris: dict[str, list[str]] = {}

    def _call(self, method: str, params: dict[str, Any]) -> Any:
        started = time.perf_counter()
        try:
            result = self.server.request(method, params, timeout=60)
        except RpcError as exc:
            self.errors.append(str(exc))
            return None
        self.timings.add(method, time.perf_counter() - started)
        return result

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                session = self.rng.choice(self.sessions)
                self._call("fleet/session/list", {})
                self._call("fleet/session/history", {"sessionId": session, "limit": 50})
                listed = self._call("fleet/artifact/list", {"sessionId": session})
                if listed and listed["artifacts"]:
                    self.uris[session] = [a["uri"] for a in listed["artifacts"]]
                if self.uris.get(session):
                    uri = self.rng.choice(self.uris[session])
                    self._call("fleet/artifact/read", {"uri": uri})
        except Exception as exc:  # the server went away or a request timed out: reported
            self.errors.append(repr(exc))


def _sandboxes(server: Server) -> list[str]:
    return [f"{p.pid} {p.cmdline[:100]}" for p in descendants(server.pid)]


def load(
    tmp_path: Path, sessions: int, turns: int, *, tracing: str, budget: float
) -> dict[str, Any]:
    deadline = time.monotonic() + budget
    state = tmp_path / "state"
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT), encoding="utf-8")
    env = server_env(state, script, FLEET_MLFLOW_DESTINATION=tracing)
    server = Server(env, tmp_path, tmp_path / "server.log")
    try:
        server.initialize()
        ids = [f"load-{n}" for n in range(sessions)]
        for session in ids:
            server.request("fleet/session/new", {"sessionId": session})
            server.request("fleet/context/attach", {"sessionId": session, "uri": SALES.as_uri()})
        hammer = Hammer(server, ids, seed=sessions * 1000 + turns)
        hammer.start()
        rounds: list[dict[str, Any]] = []
        turn_seconds: list[float] = []
        completed = 0
        for n in range(turns):
            started = time.monotonic()
            futures = [
                server.send("fleet/turn/run", {"sessionId": s, "task": QUICKSTART}) for s in ids
            ]
            done, pending = wait(futures, timeout=max(1.0, deadline - time.monotonic()))
            assert not pending, f"round {n}: {len(pending)} Turns still running: deadlock?"
            for future in done:
                result = future.result()
                assert result["status"] == "completed", result
                assert len([a for a in result["artifacts"] if a["agentId"] != "root"]) == 2
                turn_seconds.append(result["durationSeconds"])
                completed += 1
            status = server.status()
            rounds.append(
                {
                    "round": n + 1,
                    "seconds": round(time.monotonic() - started, 2),
                    "threads": status["Threads"],
                    "rss_mb": round(status["VmRSS"] / 1024, 1),
                }
            )
            print(f"  round {n + 1}: {rounds[-1]}")
        hammer.stop.set()
        hammer.join(60)
        assert not hammer.is_alive(), "the read client is stuck"

        # after the Turns: no sandbox process or cgroup remains, nothing is running
        assert wait_until(lambda: not _sandboxes(server), 15), _sandboxes(server)
        assert sandbox_cgroups(server.pid) == []
        info = server.request("fleet/debug/info", {})
        assert info["runningTurns"] == [] and info["progressTokens"] == 0, info
        history = [
            server.request("fleet/session/history", {"sessionId": s, "limit": 1000})["turns"]
            for s in ids
        ]
        assert all(len(h) == turns and {t["status"] for t in h} == {"completed"} for h in history)
        final = server.status()

        # threads: once quiet, the server has no more threads than after the first round (none
        # leaked per Turn or request). anyio retires a worker thread idle for 10 s when the next
        # job is handed out, so a cheap request on each poll lets it prune
        def quiet() -> bool:
            server.request("fleet/session/list", {})
            return bool(server.status()["Threads"] <= rounds[0]["threads"])

        idle = wait_until(quiet, IDLE_SECONDS, 1.0)
        idle_threads = server.status()["Threads"]
        assert idle, f"{idle_threads} threads {IDLE_SECONDS} s after the load: {rounds}"
    finally:  # stdin left open after exit: the server must still end cleanly (not abort)
        code = server.shutdown(close_stdin=False)
    assert code == 0, (tmp_path / "server.log").read_text()[-600:]

    turn_seconds.sort()
    summary = {
        "sessions": sessions,
        "turns_per_session": turns,
        "turns_completed": completed,
        "tracing": tracing,
        "reads": hammer.timings.summary(),
        "read_errors": hammer.errors,
        "turn_p50_s": turn_seconds[len(turn_seconds) // 2],
        "turn_max_s": turn_seconds[-1],
        "rounds": rounds,
        "final": {"threads": final["Threads"], "rss_mb": round(final["VmRSS"] / 1024, 1)},
        "peak_rss_mb": round(final["VmHWM"] / 1024, 1),
    }
    print("load summary:", json.dumps(summary))
    assert completed == sessions * turns
    assert hammer.errors == []
    assert set(hammer.timings.samples) == set(READS), hammer.timings.samples.keys()
    # memory: past the warm-up (lazy imports: dspy, litellm's cost map, and with tracing mlflow
    # and its store, ~300 MB over the first ~25 s), the last rounds grow by less than
    # RSS_PER_TURN_MB per Turn (measured: ~0.5 MB, part of it the scripted model's request log)
    tail = rounds[-STEADY_ROUNDS - 1 :]
    per_turn = (tail[-1]["rss_mb"] - tail[0]["rss_mb"]) / ((len(tail) - 1) * sessions)
    print(f"steady RSS growth: {per_turn:.2f} MB per Turn; idle threads: {idle_threads}")
    summary["steady_rss_mb_per_turn"] = round(per_turn, 2)
    summary["idle_threads"] = idle_threads
    assert per_turn <= RSS_PER_TURN_MB, rounds
    return summary


def test_sessions_under_load_complete_and_leak_nothing(tmp_path: Path) -> None:
    load(tmp_path, sessions=3, turns=4, tracing="off", budget=240)


@pytest.mark.long
def test_8_sessions_x_10_turns_with_children(tmp_path: Path) -> None:
    load(tmp_path, sessions=8, turns=10, tracing="local", budget=1200)


async def test_a_turn_leaves_nothing_in_dspys_call_history(tmp_path: Path) -> None:
    """dspy records every LM call (prompt, messages, response) in a process-wide list and in
    each LM's own ``history``, up to 10,000 entries each. A server's LMs live as long as it
    does, so with real prompts (manifest, Session history, every REPL step) that is gigabytes
    kept for nothing: Fleet never reads it. A Turn must record none."""
    from dspy.clients.base_lm import GLOBAL_HISTORY

    from fleet_core.api import FleetRuntime
    from fleet_core.api.scripted import scripted_provider
    from fleet_core.config import load_config
    from fleet_core.models import TurnRequest

    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT), encoding="utf-8")
    environ = {"FLEET_STATE_DIR": str(tmp_path / "state"), "FLEET_MLFLOW_DESTINATION": "off"}
    provider = scripted_provider(script)
    runtime = await FleetRuntime.open(
        load_config(environ=environ, cwd=tmp_path), lm_provider=provider
    )
    try:
        session = await runtime.new_session()
        await runtime.attach(session.session_id, SALES)
        before = len(GLOBAL_HISTORY)
        result = await runtime.run_turn(TurnRequest(session_id=session.session_id, task=QUICKSTART))
        assert result.status == "completed", result.error
        assert result.usage.model_calls >= 4
        assert len(GLOBAL_HISTORY) == before
        assert provider.lm("root").history == [] and provider.lm("sub").history == []
    finally:
        await runtime.close()
