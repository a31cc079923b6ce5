"""A stand-in for ``python -m llama_cpp.server`` in the supervisor's tests: the same flags, the
same ``/v1/models`` and ``/v1/chat/completions`` shapes, no model. The supervisor starts it
through its real code path (``[local_model] server_module = "tests.localmodel.fake_llama_server"``).

Environment: ``FAKE_LLAMA_RECORD`` (a file: one JSON line for the start and per request),
``FAKE_LLAMA_START_DELAY`` (seconds before it listens), ``FAKE_LLAMA_REPLY`` (the chat answer),
``FAKE_LLAMA_REPLY_DELAY`` (seconds each chat answer takes).
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


def record(entry: dict[str, Any]) -> None:
    path = os.environ.get("FAKE_LLAMA_RECORD")
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps(entry) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser()
    for flag in ("--model", "--model_alias", "--host", "--logits_all"):
        parser.add_argument(flag, required=True)
    for flag in ("--port", "--n_ctx", "--n_threads", "--n_threads_batch"):
        parser.add_argument(flag, type=int, required=True)
    args = parser.parse_args()
    if not Path(args.model).is_file():
        print(f"model file {args.model} not found", file=sys.stderr)
        return 1
    if args.logits_all != "false":
        print("refusing: logits_all must be false (all-logits buffers)", file=sys.stderr)
        return 3
    record({"event": "start", "pid": os.getpid(), "argv": sys.argv[1:]})
    time.sleep(float(os.environ.get("FAKE_LLAMA_START_DELAY", "0")))
    alias = args.model_alias

    class Handler(JsonHandler):
        def do_GET(self) -> None:
            record({"event": "request", "method": "GET", "path": self.path})
            if self.path == "/v1/models":
                self.send_json({"object": "list", "data": [{"id": alias, "object": "model"}]})
            else:
                self.send_json({"error": "not found"}, 404)

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            record({"event": "request", "method": "POST", "path": self.path, "body": body})
            if self.path != "/v1/chat/completions":
                self.send_json({"error": "not found"}, 404)
                return
            time.sleep(float(os.environ.get("FAKE_LLAMA_REPLY_DELAY", "0")))
            reply = os.environ.get(
                "FAKE_LLAMA_REPLY", "[[ ## answer ## ]]\n42\n\n[[ ## completed ## ]]"
            )
            self.send_json({
                "id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()),
                "model": alias,
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": reply}}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            })  # fmt: skip

    server = ThreadingHTTPServer((args.host, args.port), Handler)
    try:
        server.serve_forever()
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
