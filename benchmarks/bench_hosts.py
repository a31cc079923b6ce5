"""Sharing a Session across hosts (issue 21): the blob store's cost, as same-run ratios.

    uv run python benchmarks/bench_hosts.py [--size-mib 64] [--rounds 3] [--turns 7]
        [--admin-url postgresql://postgres@127.0.0.1:5432/postgres]

Needs a PostgreSQL server (a database is created for the run and dropped after it). Measured, in
one process, on one database:

1. Attach throughput: ``FleetRuntime.attach`` of a ``--size-mib`` file with the PostgreSQL blob
   store (the bytes published in chunked rows in the attach's transaction) against the local
   directory (``storage.blob_backend = "local"``: the workspace is the store, nothing shared).
2. Read throughput: a second host (another state directory) materializing that file from the
   PostgreSQL blob store when it first reads the Session, against a local read-hash-write copy of
   the same file (what the local directory costs a host that already has it).
3. A Turn's overhead from the shared store for a 1 MB dataset: the median Turn (scripted model; a
   cell that reads the dataset and writes an artifact, run for real in the sandbox) with the
   PostgreSQL blob store against the same database with sharing off. Target: <= 1.2x.
   Also reported: the first Turn on another host (its copy materialized first) against a Turn on
   the host that has it.
4. Servers on one database: 1 and then 3 ``fleet-lsp serve`` processes (each its own state
   directory and host name, over stdio), each with 2 Sessions running ``--server-turns`` scripted
   quickstart Turns one after another (the Sessions run at once), while server 1 answers
   ``fleet/session/list`` in a loop: Turn throughput (Turns per second over all servers) and the
   list's p50/p99, with the 3-server figures as ratios to the 1-server ones.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import anyio
import psycopg
from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_lsp import QUICKSTART, SALES, RawClient, pct, quickstart_script

from fleet_core.api import FleetRuntime
from fleet_core.config import load_config
from fleet_core.engine.scripted_lm import SwitchableLms, action, scripted_lm, submit
from fleet_core.models import TurnRequest

CHUNK = 1 << 20
CELL = (
    "data = open('files/data.csv').read()\n"
    "rows = data.count('\\n')\n"
    "open('artifacts/rows.txt', 'w').write(str(rows))\n"
    "print(rows)"
)


def make_file(path: Path, size: int) -> None:
    row = b"2026-12-04,north,widget,12.50,3\n"
    with path.open("wb") as out:
        out.write(b"date,region,item,price,qty\n")
        while out.tell() < size:
            out.write(row)


def copy_hash(source: Path, target: Path) -> str:
    digest = hashlib.sha256()
    with source.open("rb") as src, target.open("wb") as dst:
        while chunk := src.read(CHUNK):
            digest.update(chunk)
            dst.write(chunk)
    return digest.hexdigest()


async def open_host(url: str, state: Path, sharing: bool, lms: Any = None) -> FleetRuntime:
    environ = {
        "FLEET_STATE_DIR": str(state),
        "FLEET_DATABASE_URL": url,
        "FLEET_MAX_FILE_BYTES": str(1 << 40),
        "FLEET_MLFLOW_DESTINATION": "off",
        "FLEET_STORAGE__BLOB_BACKEND": "postgresql" if sharing else "local",
    }
    config = load_config(environ=environ, cwd=state.parent)
    return await FleetRuntime.open(config, lm_provider=lms, trace_export="deferred")


async def throughput(url: str, root: Path, size_mib: int, rounds: int) -> dict[str, float]:
    source = root / "source.bin"
    make_file(source, size_mib * CHUNK)
    size = source.stat().st_size
    local = await open_host(url, root / "local" / "state", sharing=False)
    shared = await open_host(url, root / "a" / "state", sharing=True)
    attach_local: list[float] = []
    attach_shared: list[float] = []
    read_local: list[float] = []
    read_shared: list[float] = []
    copy_hash(source, root / "warm.bin")
    try:
        for index in range(rounds):
            for runtime, times in ((local, attach_local), (shared, attach_shared)):
                session = f"t{index}-{uuid.uuid4().hex[:6]}"
                await runtime.new_session(session)
                start = time.perf_counter()
                await runtime.attach(session, source)
                times.append(size / (time.perf_counter() - start))
                if runtime is shared:
                    await runtime.close_session(session)
                    reader = await open_host(url, root / f"b{index}" / "state", sharing=True)
                    try:
                        start = time.perf_counter()
                        await reader.list_workspace(session)  # materializes the copy
                        read_shared.append(size / (time.perf_counter() - start))
                    finally:
                        await reader.close()
            start = time.perf_counter()
            copy_hash(source, root / "copy.bin")
            read_local.append(size / (time.perf_counter() - start))
    finally:
        await local.close()
        await shared.close()
    return {
        "attach_local": statistics.median(attach_local),
        "attach_shared": statistics.median(attach_shared),
        "read_local": statistics.median(read_local),
        "read_shared": statistics.median(read_shared),
    }


async def timed_turn(runtime: FleetRuntime, lms: SwitchableLms, session: str) -> float:
    lms.root = scripted_lm([action(CELL), submit("open('artifacts/rows.txt').read()")])
    start = time.perf_counter()
    result = await runtime.run_turn(TurnRequest(session_id=session, task="count the rows"))
    elapsed = time.perf_counter() - start
    assert result.status == "completed", result.error
    return elapsed


async def turn_overhead(url: str, root: Path, turns: int) -> dict[str, float]:
    dataset = root / "data.csv"
    make_file(dataset, 1_000_000)
    lms = SwitchableLms()
    results: dict[str, list[float]] = {"local": [], "shared": []}
    hosts = {
        "local": await open_host(url, root / "tl" / "state", sharing=False, lms=lms),
        "shared": await open_host(url, root / "ts" / "state", sharing=True, lms=lms),
    }
    try:
        for name, runtime in hosts.items():
            await runtime.new_session(f"turns-{name}", mode="rlm")
            await runtime.attach(f"turns-{name}", dataset)
            await runtime.set_dataset(f"turns-{name}", "files/data.csv")
            await timed_turn(runtime, lms, f"turns-{name}")  # warm-up (sandbox, imports)
        for _ in range(turns):  # alternate, so load on the machine hits both alike
            for name, runtime in hosts.items():
                results[name].append(await timed_turn(runtime, lms, f"turns-{name}"))
        await hosts["shared"].close_session("turns-shared")
        other = await open_host(url, root / "tb" / "state", sharing=True, lms=lms)
        try:
            await other.load_session("turns-shared")  # the copy is materialized here
            other_first = await timed_turn(other, lms, "turns-shared")
        finally:
            await other.close()
    finally:
        for runtime in hosts.values():
            await runtime.close()
    return {
        "turn_local": statistics.median(results["local"]),
        "turn_shared": statistics.median(results["shared"]),
        "turn_other_host_first": other_first,
    }


def repeated(script: Path, times: int) -> Path:
    """The quickstart script with its root replies repeated: one process runs many Turns."""
    found = json.loads(script.read_text())
    found["root"]["rules"] = {key: value * times for key, value in found["root"]["rules"].items()}
    script.write_text(json.dumps(found))
    return script


async def one_server_session_turns(client: RawClient, session: str, turns: int) -> int:
    done = 0
    for _ in range(turns):
        result = await client.request("fleet/turn/run", {"sessionId": session, "task": QUICKSTART})
        if result["status"] != "completed":
            raise RuntimeError(f"a Turn on {session} {result['status']}: {result.get('error')}")
        done += 1
    return done


async def servers_on_one_database(
    url: str, root: Path, servers: int, turns: int, tag: str
) -> dict[str, float]:
    """Turn throughput over ``servers`` processes and server 1's ``fleet/session/list`` p99."""
    script = repeated(quickstart_script(root / f"quickstart-{tag}.json"), 2 * (turns + 1))
    clients = []
    for index in range(servers):
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("FLEET_")},
            "FLEET_STATE_DIR": str(root / f"srv-{tag}-{index}" / "state"),
            "FLEET_DATABASE_URL": url,
            "FLEET_TEST_SCRIPT": str(script),
            "FLEET_MLFLOW_DESTINATION": "off",
            "FLEET_HOST_NAME": f"bench-host-{index}",
        }
        client = await RawClient.spawn(sys.executable, "-m", "fleet_lsp", "serve", env=env)
        await client.initialize()
        clients.append(client)
    try:
        sessions = []
        for index, client in enumerate(clients):
            for n in range(2):
                session = f"{tag}-{index}-{n}"
                await client.request("fleet/session/new", {"sessionId": session, "mode": "rlm"})
                await client.request(
                    "fleet/context/attach", {"sessionId": session, "uri": SALES.as_uri()}
                )
                await one_server_session_turns(client, session, 1)  # warm: sandbox, imports
                sessions.append((client, session))
        latencies: list[float] = []
        running = True

        async def probe() -> None:
            while running:
                started = time.perf_counter()
                await clients[0].request("fleet/session/list", {})
                latencies.append(time.perf_counter() - started)
                await anyio.sleep(0.02)

        async with anyio.create_task_group() as group:
            group.start_soon(probe)
            started = time.perf_counter()
            counts = []

            async def run(client: RawClient, session: str) -> None:
                counts.append(await one_server_session_turns(client, session, turns))

            async with anyio.create_task_group() as turns_group:
                for client, session in sessions:
                    turns_group.start_soon(run, client, session)
            elapsed = time.perf_counter() - started
            running = False
    finally:
        for client in clients:
            await client.close()
    return {
        "turns_per_second": sum(counts) / elapsed,
        "turns": float(sum(counts)),
        "list_p50_ms": pct(latencies, 0.5) * 1e3,
        "list_p99_ms": pct(latencies, 0.99) * 1e3,
        "list_samples": float(len(latencies)),
    }


async def main(args: argparse.Namespace) -> None:
    name = f"fleet_bench_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    with psycopg.connect(args.admin_url, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    info = psycopg.conninfo.conninfo_to_dict(args.admin_url)
    url = (
        f"postgresql+psycopg://{info.get('user', 'postgres')}@{info.get('host', '127.0.0.1')}:"
        f"{info.get('port', 5432)}/{name}"
    )
    load = os.getloadavg()[0]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            speeds = await throughput(url, Path(tmp), args.size_mib, args.rounds)
            turns = await turn_overhead(url, Path(tmp), args.turns)
            fleets = {
                n: await servers_on_one_database(url, Path(tmp), n, args.server_turns, f"s{n}")
                for n in (1, 3)
            }
    finally:
        with psycopg.connect(args.admin_url, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
    mb = 1e6
    print(f"load average at start: {load:.2f} ({os.cpu_count()} cores)")
    print(f"attach {args.size_mib} MiB, median of {args.rounds}:")
    print(f"  local directory   {speeds['attach_local'] / mb:8.1f} MB/s")
    print(f"  PostgreSQL blobs  {speeds['attach_shared'] / mb:8.1f} MB/s")
    print(f"  ratio (shared/local) {speeds['attach_shared'] / speeds['attach_local']:.2f}")
    print("read (a host without the file):")
    print(f"  local copy        {speeds['read_local'] / mb:8.1f} MB/s")
    print(f"  PostgreSQL blobs  {speeds['read_shared'] / mb:8.1f} MB/s (materialized)")
    print(f"  ratio (shared/local) {speeds['read_shared'] / speeds['read_local']:.2f}")
    ratio = turns["turn_shared"] / turns["turn_local"]
    print(f"Turn with a 1 MB dataset, median of {args.turns}:")
    print(f"  sharing off       {turns['turn_local'] * 1000:8.1f} ms")
    print(f"  PostgreSQL blobs  {turns['turn_shared'] * 1000:8.1f} ms")
    print(f"  overhead ratio    {ratio:.3f} (target <= 1.2)")
    print(f"  first Turn on another host {turns['turn_other_host_first'] * 1000:8.1f} ms")
    print(f"servers on one database, 2 Sessions each, {args.server_turns} Turns per Session:")
    for n, found in fleets.items():
        print(
            f"  {n} server(s): {found['turns_per_second']:.2f} Turns/s"
            f" ({found['turns']:.0f} Turns);"
            f" session/list p50 {found['list_p50_ms']:.1f} ms, p99 {found['list_p99_ms']:.1f} ms"
            f" ({found['list_samples']:.0f} samples)"
        )
    one, three = fleets[1], fleets[3]
    print(
        f"  3/1 ratios: throughput {three['turns_per_second'] / one['turns_per_second']:.2f},"
        f" list p99 {three['list_p99_ms'] / one['list_p99_ms']:.2f}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mib", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--turns", type=int, default=15)
    parser.add_argument("--server-turns", type=int, default=4)
    parser.add_argument(
        "--admin-url",
        default=os.environ.get(
            "FLEET_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
        ),
    )
    anyio.run(main, parser.parse_args())
