"""Attach throughput: ``FleetRuntime.attach`` versus a bare read-hash-write loop, same run.

    uv run python benchmarks/bench_attach.py [--size-mib 1024] [--rounds 3]

Both sides read the same file in 1 MiB blocks, hash it with sha256 and write it out; the result
is the ratio of their median throughputs (target: attach >= 0.8 of the bare loop).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import tempfile
import time
from pathlib import Path

import anyio

from fleet_core.api import FleetRuntime
from fleet_core.config import load_config

CHUNK = 1 << 20


def make_source(path: Path, size_mib: int) -> None:
    block = os.urandom(CHUNK)
    with open(path, "wb") as out:
        for index in range(size_mib):
            out.write(block[index % 251 :] + block[: index % 251])


def bare_loop(source: Path, target: Path) -> str:
    digest = hashlib.sha256()
    with open(source, "rb") as src, open(target, "wb") as dst:
        while chunk := src.read(CHUNK):
            digest.update(chunk)
            dst.write(chunk)
    return digest.hexdigest()


async def attach_once(runtime: FleetRuntime, source: Path) -> str:
    info = await runtime.attach("bench", source)
    return info.sha256


async def main(size_mib: int, rounds: int) -> None:
    with tempfile.TemporaryDirectory(dir=Path(__file__).parent) as tmp:
        root = Path(tmp)
        source = root / "source.bin"
        make_source(source, size_mib)
        environ = {"FLEET_STATE_DIR": str(root / "state"), "FLEET_MAX_FILE_BYTES": str(1 << 40)}
        config = load_config(environ=environ, cwd=root)
        runtime = await FleetRuntime.open(config)
        await runtime.new_session("bench")
        size = source.stat().st_size
        bare: list[float] = []
        fleet: list[float] = []
        bare_loop(source, root / "warm.bin")  # warm the page cache for both sides
        for _ in range(rounds):
            start = time.perf_counter()
            expected = bare_loop(source, root / "copy.bin")
            bare.append(size / (time.perf_counter() - start))
            (root / "copy.bin").unlink()
            start = time.perf_counter()
            got = await attach_once(runtime, source)
            fleet.append(size / (time.perf_counter() - start))
            assert got == expected, "attach computed a different digest"
        await runtime.close()
    bare_mbps = statistics.median(bare) / 1e6
    fleet_mbps = statistics.median(fleet) / 1e6
    print(f"file: {size_mib} MiB, rounds: {rounds}")
    print(f"bare loop : {bare_mbps:8.1f} MB/s (median)")
    print(f"attach    : {fleet_mbps:8.1f} MB/s (median)")
    print(f"ratio     : {fleet_mbps / bare_mbps:8.3f} (target >= 0.8)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    anyio.run(main, args.size_mib, args.rounds)
