"""A stand-in for a llama.cpp server built for another CPU: it records its start (as
fake_llama_server does) and dies of SIGILL while "loading the model", as the AVX-512 build of
llama-server does on a CPU without AVX-512 (its warm-up run executes an illegal instruction)."""

from __future__ import annotations

import os
import signal
import sys

from tests.localmodel.fake_llama_server import record


def main() -> int:
    record({"event": "start", "pid": os.getpid(), "argv": sys.argv[1:], "runtime": "sigill"})
    signal.signal(signal.SIGILL, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGILL)
    return 0  # never reached


if __name__ == "__main__":
    sys.exit(main())
