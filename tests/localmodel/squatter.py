"""Another process on the embedded server's port (the identity tests): the most convincing
impostor there is. It listens on 127.0.0.1 (``--port``, default a free one), accepts any API key,
answers ``/v1/models`` and chat completions like a llama server, and records every connection
it accepts and every request (``--record``, one JSON line each), so a test can show that nothing
reached it. Prints ``{"port": ..., "pid": ...}`` once it listens.

``python -m tests.localmodel.squatter --record FILE [--port N]``
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.fake_http import JsonHandler


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--record", required=True, type=Path)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()

    def record(entry: dict[str, Any]) -> None:
        with args.record.open("a", encoding="utf-8") as out:
            out.write(json.dumps(entry) + "\n")

    class Handler(JsonHandler):
        def do_GET(self) -> None:
            record({"event": "request", "method": "GET", "path": self.path})
            self.send_json({"object": "list", "data": [{"id": "fake-coder", "object": "model"}]})

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length).decode("utf-8", "replace")
            record({"event": "request", "method": "POST", "path": self.path, "body": body})
            self.send_json({
                "id": "chatcmpl-squatter", "object": "chat.completion",
                "created": int(time.time()), "model": "fake-coder",
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": "squatted"}}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            })  # fmt: skip

    class Server(ThreadingHTTPServer):
        def process_request(self, request: Any, client_address: Any) -> None:
            record({"event": "connection"})  # before a byte is read: even a bare connect
            super().process_request(request, client_address)

    server = Server(("127.0.0.1", args.port), Handler)
    print(json.dumps({"port": server.server_address[1], "pid": os.getpid()}), flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
