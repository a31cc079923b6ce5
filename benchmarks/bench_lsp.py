"""Language-server benchmarks, each against a baseline measured in the same run.

1. ``initialize``: spawn-to-response time of ``fleet-lsp serve`` versus a bare pygls server (same
   Python, no fleet imports), alternating, median of N. Target: ratio ≤ 1.2.
2. The first Turn after server start: a fresh server and state dir per round, ``fleet/turn/run``
   of a scripted quickstart (pandas in the real sandbox) with local MLflow tracing on versus
   the same with tracing off, alternating, median of N. Target: ratio ≤ 1.2.
3. Responsiveness: ``fleet/session/list`` latency while a Turn with 4 child agents runs (scripted
   models, real sandboxes) versus a ``bench/ping`` on a bare pygls server. Target: p99 ≤ 5× the
   bare p99.
4. CLI wall time: ``fleet-lsp --help`` and ``fleet-lsp config show`` versus ``python -c pass``.
   Target: ≤ 1 s each.

Run: ``uv run python benchmarks/bench_lsp.py [--rounds 7] [--requests 200] [--only NAME]``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
BARE_SERVER = """
from pygls.lsp.server import LanguageServer
server = LanguageServer("bare", "0")

@server.feature("bench/ping")
async def ping(params):
    return {}

server.start_io()
"""


class RawClient:
    """A minimal JSON-RPC client over a subprocess' stdio (no pygls on the client side)."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.ids = itertools.count(1)
        self.pending: dict[int, asyncio.Future[Any]] = {}
        self.progress: list[tuple[Any, dict[str, Any]]] = []
        self.reader = asyncio.ensure_future(self._read())

    @classmethod
    async def spawn(cls, *argv: str, env: dict[str, str] | None = None) -> RawClient:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env=env,
            cwd=REPO,
        )
        return cls(proc)

    def _write(self, message: dict[str, Any]) -> None:
        body = json.dumps(message).encode()
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    async def request(self, method: str, params: Any = None) -> Any:
        msg_id = next(self.ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.pending[msg_id] = future
        self._write({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        return await future

    def notify(self, method: str, params: Any = None) -> None:
        self._write({"jsonrpc": "2.0", "method": method, "params": params})

    async def _read(self) -> None:
        stream = self.proc.stdout
        assert stream is not None
        while True:
            length = 0
            while True:
                line = await stream.readline()
                if not line:
                    return
                if line in (b"\r\n", b"\n"):
                    break
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            message = json.loads(await stream.readexactly(length))
            if "method" in message and "id" in message:  # server -> client request
                self._write({"jsonrpc": "2.0", "id": message["id"], "result": None})
            elif "method" in message:
                if message["method"] == "$/progress":
                    self.progress.append((message["params"]["token"], message["params"]["value"]))
            else:
                future = self.pending.pop(message["id"], None)
                if future is not None and not future.done():
                    if "error" in message:
                        future.set_exception(RuntimeError(message["error"]["message"]))
                    else:
                        future.set_result(message.get("result"))

    async def initialize(self) -> Any:
        result = await self.request(
            "initialize",
            {
                "processId": os.getpid(),
                "rootUri": REPO.as_uri(),
                "capabilities": {"window": {"workDoneProgress": True}},
                "initializationOptions": {"fleet": {"protocolVersion": 1}},
            },
        )
        self.notify("initialized", {})
        return result

    async def close(self) -> None:
        try:
            await asyncio.wait_for(self.request("shutdown"), 10)
            self.notify("exit")
            await asyncio.wait_for(self.proc.wait(), 10)
        except Exception:
            self.proc.kill()
        self.reader.cancel()


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def bench_initialize(rounds: int, env: dict[str, str], bare: Path) -> dict[str, float]:
    fleet_cmd = [sys.executable, "-m", "fleet_lsp", "serve"]
    bare_cmd = [sys.executable, str(bare)]
    times: dict[str, list[float]] = {"bare": [], "fleet": []}
    for _ in range(rounds + 1):  # the first round warms the page cache and is dropped
        for name, cmd in (("bare", bare_cmd), ("fleet", fleet_cmd)):
            started = time.perf_counter()
            client = await RawClient.spawn(*cmd, env=env)
            await client.initialize()
            times[name].append(time.perf_counter() - started)
            await client.close()
    bare_med = statistics.median(times["bare"][1:])
    fleet_med = statistics.median(times["fleet"][1:])
    return {"bare_s": bare_med, "fleet_s": fleet_med, "ratio": fleet_med / bare_med}


QUICKSTART = "Calculate revenue by region and save artifacts/revenue_by_region.csv."
SALES = REPO / "fleet_lsp" / "examples" / "sales.csv"


def quickstart_script(path: Path) -> Path:
    """The quickstart answered by scripted models: triage routes to rlm, one pandas cell."""
    from fleet_core.engine.scripted_lm import action, route, submit

    code = (
        "import pandas as pd\n"
        "df = pd.read_csv('files/sales.csv')\n"
        "totals = df.groupby('region', as_index=False)['revenue'].sum()\n"
        "totals.to_csv('artifacts/revenue_by_region.csv', index=False)\n"
        "print(totals.to_string(index=False))"
    )
    script = {
        "root": {"rules": {"revenue by region": [action(code), submit("'see the artifact'")]}},
        "sub": {"rules": {"[[ ## route ## ]]": route("rlm")}},
    }
    path.write_text(json.dumps(script))
    return path


async def first_turn_seconds(env: dict[str, str]) -> float:
    client = await RawClient.spawn(sys.executable, "-m", "fleet_lsp", "serve", env=env)
    try:
        await client.initialize()
        await client.request("fleet/session/new", {"sessionId": "first"})
        await client.request("fleet/context/attach", {"sessionId": "first", "uri": SALES.as_uri()})
        started = time.perf_counter()
        result = await client.request("fleet/turn/run", {"sessionId": "first", "task": QUICKSTART})
        elapsed = time.perf_counter() - started
        if result["status"] != "completed":
            raise RuntimeError(f"the quickstart Turn {result['status']}: {result.get('error')}")
        return elapsed
    finally:
        await client.close()


async def bench_first_turn(rounds: int, env: dict[str, str], root: Path) -> dict[str, float]:
    script = quickstart_script(root / "quickstart.json")
    times: dict[str, list[float]] = {"off": [], "local": []}
    for n in range(rounds):
        for destination in ("off", "local"):
            state = root / f"first-{destination}-{n}"
            run_env = {
                **env,
                "FLEET_STATE_DIR": str(state),
                "FLEET_TEST_SCRIPT": str(script),
                "FLEET_MLFLOW_DESTINATION": destination,
            }
            times[destination].append(await first_turn_seconds(run_env))
    off, local = statistics.median(times["off"]), statistics.median(times["local"])
    return {"off_s": off, "local_s": local, "ratio": local / off}


def turn_script(path: Path) -> Path:
    from fleet_core.engine.scripted_lm import action, submit

    slow_child = action(
        "import time\nfor i in range(60):\n    time.sleep(0.1)\n    print(i)\n"
        "open('artifacts/done.txt', 'w').write('ok')"
    )
    script = {
        "root": {
            "rules": {
                "FOUR CHILDREN": [
                    action(
                        "r = spawn_agents(subtasks=['CHILD a', 'CHILD b', 'CHILD c', 'CHILD d'])\n"
                        "print(r)"
                    ),
                    submit("'done'"),
                ]
            }
        },
        "sub": {"rules": {"CHILD": [slow_child] * 4 + [action("SUBMIT(findings='ok')")] * 4}},
    }
    path.write_text(json.dumps(script))
    return path


async def bench_responsiveness(requests: int, env: dict[str, str], bare: Path) -> dict[str, Any]:
    bare_client = await RawClient.spawn(sys.executable, str(bare), env=env)
    await bare_client.initialize()
    ping: list[float] = []
    for _ in range(requests):
        started = time.perf_counter()
        await bare_client.request("bench/ping", {})
        ping.append(time.perf_counter() - started)
    await bare_client.close()

    fleet = await RawClient.spawn(sys.executable, "-m", "fleet_lsp", "serve", env=env)
    await fleet.initialize()
    await fleet.request("fleet/session/new", {"sessionId": "bench", "mode": "rlm"})
    for _ in range(20):  # warm the runtime
        await fleet.request("fleet/session/list", {})
    turn = asyncio.ensure_future(
        fleet.request(
            "fleet/turn/run",
            {"sessionId": "bench", "task": "FOUR CHILDREN", "workDoneToken": "bench"},
        )
    )
    deadline = time.monotonic() + 120
    while sum(1 for t, v in fleet.progress if "/agent/" in str(t) and v["kind"] == "begin") < 4:
        if turn.done() or time.monotonic() > deadline:
            raise RuntimeError(f"children did not start: {turn.result() if turn.done() else ''}")
        await asyncio.sleep(0.05)
    latencies: list[float] = []
    while len(latencies) < requests and not turn.done():
        started = time.perf_counter()
        await fleet.request("fleet/session/list", {})
        latencies.append(time.perf_counter() - started)
        await asyncio.sleep(0.01)
    result = await asyncio.wait_for(turn, 180)
    children = len({t for t, _ in fleet.progress if "/agent/" in str(t)})
    await fleet.close()
    return {
        "ping_p50_ms": pct(ping, 0.5) * 1e3,
        "ping_p99_ms": pct(ping, 0.99) * 1e3,
        "list_p50_ms": pct(latencies, 0.5) * 1e3,
        "list_p99_ms": pct(latencies, 0.99) * 1e3,
        "samples": len(latencies),
        "children": children,
        "turn_status": result["status"],
    }


def bench_cli(rounds: int, env: dict[str, str]) -> dict[str, float]:
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "fleet-lsp --help": [sys.executable, "-m", "fleet_lsp", "--help"],
        "fleet-lsp config show": [sys.executable, "-m", "fleet_lsp", "config", "show"],
    }
    found: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(rounds + 1):
        for name, cmd in commands.items():
            started = time.perf_counter()
            subprocess.run(cmd, env=env, cwd=REPO, capture_output=True, check=True)
            found[name].append(time.perf_counter() - started)
    return {name: statistics.median(values[1:]) for name, values in found.items()}


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--only", choices=["initialize", "first-turn", "responsiveness", "cli"])
    args = parser.parse_args()
    wanted = {args.only} if args.only else {"initialize", "first-turn", "responsiveness", "cli"}
    with tempfile.TemporaryDirectory(prefix="fleet-bench-lsp-") as tmp:
        root = Path(tmp)
        bare = root / "bare_server.py"
        bare.write_text(BARE_SERVER)
        env = {**os.environ, "FLEET_STATE_DIR": str(root / "state")}
        if "initialize" in wanted:
            init = await bench_initialize(args.rounds, env, bare)
            print(
                f"initialize: bare pygls {init['bare_s'] * 1e3:.0f} ms, fleet-lsp "
                f"{init['fleet_s'] * 1e3:.0f} ms, ratio {init['ratio']:.2f} (target <= 1.2)"
            )
        if "first-turn" in wanted:
            first = await bench_first_turn(max(3, args.rounds // 2), env, root)
            print(
                f"first Turn after start: tracing off {first['off_s']:.2f} s, local MLflow "
                f"{first['local_s']:.2f} s, ratio {first['ratio']:.2f} (target <= 1.2)"
            )
        if "responsiveness" in wanted:
            env_turn = {**env, "FLEET_TEST_SCRIPT": str(turn_script(root / "script.json"))}
            resp = await bench_responsiveness(args.requests, env_turn, bare)
            print(
                f"responsiveness ({resp['children']} children running, {resp['samples']} "
                f"samples, turn {resp['turn_status']}): bare ping p50 {resp['ping_p50_ms']:.2f}"
                f" ms / p99 {resp['ping_p99_ms']:.2f} ms; fleet/session/list p50 "
                f"{resp['list_p50_ms']:.2f} ms / p99 {resp['list_p99_ms']:.2f} ms; p99 ratio "
                f"{resp['list_p99_ms'] / resp['ping_p99_ms']:.1f} (target <= 5)"
            )
        if "cli" in wanted:
            cli = bench_cli(max(3, args.rounds // 2), env)
            for name, seconds in cli.items():
                suffix = "" if "python" in name else " (<= 1 s)"
                print(f"cli: {name}: {seconds * 1e3:.0f} ms{suffix}")


if __name__ == "__main__":
    asyncio.run(main())
