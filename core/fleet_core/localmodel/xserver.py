"""The llama.cpp server inside the ``xllamacpp`` wheel, run as a process with ``llama-server``'s
flags: ``python -P -m fleet_core.localmodel.xserver --model F --host 127.0.0.1 --port N ...``.

``xllamacpp`` (Xorbits; prebuilt abi3 wheels for glibc 2.17, AVX2) embeds llama.cpp's own C++
HTTP server: :class:`xllamacpp.Server` loads the model and listens on its own threads, and this
process only keeps it alive until SIGTERM. It takes the same flags as the upstream binary (the
subset :mod:`fleet_core.localmodel.runtime` passes), and, like ``llama-server``, its API key from
``LLAMA_API_KEY`` (never an argv); the variable is removed from this process's environment once
read. Standard library plus ``xllamacpp``; nothing of fleet_core is imported.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading


def parse(args: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="fleet_core.localmodel.xserver")
    parser.add_argument("-m", "--model", required=True)
    parser.add_argument("-a", "--alias", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("-c", "--ctx-size", type=int, default=8192)
    parser.add_argument("-t", "--threads", type=int, default=2)
    parser.add_argument("-tb", "--threads-batch", type=int, default=2)
    parser.add_argument("-np", "--parallel", type=int, default=1)
    parser.add_argument("--cache-ram", type=int, default=512)  # MiB of host prompt cache
    parser.add_argument("--repeat-penalty", type=float, default=1.0)
    parser.add_argument("--slot-save-path", default="")
    parser.add_argument("--metrics", action="store_true")
    parser.add_argument("--slots", action="store_true")
    parser.add_argument("--no-webui", action="store_true")
    return parser.parse_args(args)


def main(args: list[str] | None = None) -> int:
    ns = parse(args)
    api_key = os.environ.pop("LLAMA_API_KEY", "")
    # the wheel's native module, only here (untyped where the local-model extra is installed)
    import xllamacpp  # type: ignore[import-not-found,import-untyped,unused-ignore]

    params = xllamacpp.CommonParams()
    params.model.path = ns.model
    params.model_alias = {ns.alias} if isinstance(params.model_alias, set) else ns.alias
    params.hostnames = [ns.host]
    params.port = ns.port
    params.n_ctx = ns.ctx_size
    params.n_parallel = ns.parallel
    params.cpuparams.n_threads = ns.threads
    params.cpuparams_batch.n_threads = ns.threads_batch
    params.cache_ram_mib = ns.cache_ram
    params.sampling.penalty_repeat = ns.repeat_penalty
    params.endpoint_metrics = ns.metrics
    params.endpoint_slots = ns.slots
    if ns.slot_save_path:  # a folder: llama.cpp appends the file name to it, as its CLI does
        params.slot_save_path = ns.slot_save_path.rstrip("/") + "/"
    if api_key:
        params.api_keys = [api_key]
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    server = xllamacpp.Server(params)  # returns once the model is loaded and the port listens
    print(f"xserver: listening at {server.listening_address}", file=sys.stderr, flush=True)
    stop.wait()
    sys.stderr.flush()
    os._exit(0)  # the native server's threads end with the process


if __name__ == "__main__":
    sys.exit(main())
