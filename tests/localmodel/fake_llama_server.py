"""A stand-in for ``python -m llama_cpp.server`` in the supervisor's tests: the same flags, the
same ``/v1/models`` and ``/v1/chat/completions`` shapes, no model. The supervisor starts it
through its real code path (``[local_model] server_module = "tests.localmodel.fake_llama_server"``).

Like the real server (``ServerSettings.api_key``, read from ``API_KEY`` when no ``--api_key`` is
given), it answers only ``Authorization: Bearer <API_KEY>`` when ``API_KEY`` is set, and 401
``{"detail": "Invalid API key"}`` otherwise.

Environment: ``FAKE_LLAMA_RECORD`` (a file: one JSON line for the start and per request, with
``auth``: whether it carried the key; the key itself is never recorded),
``FAKE_LLAMA_START_DELAY`` (seconds before it listens), ``FAKE_LLAMA_REPLY`` (the chat answer),
``FAKE_LLAMA_REPLY_DELAY`` (seconds each chat answer takes), ``FAKE_LLAMA_OPEN`` (answer
everyone: a runtime that does not take ``API_KEY`` from its environment),
``FAKE_LLAMA_FAIL_CHATS`` (how many chat requests, the first ones, get a 503).
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
    parser.add_argument("--api_key")  # as the real one has; the supervisor never passes it
    for flag in ("--port", "--n_ctx", "--n_threads", "--n_threads_batch"):
        parser.add_argument(flag, type=int, required=True)
    args = parser.parse_args()
    if not Path(args.model).is_file():
        print(f"model file {args.model} not found", file=sys.stderr)
        return 1
    if args.logits_all != "false":
        print("refusing: logits_all must be false (all-logits buffers)", file=sys.stderr)
        return 3
    api_key = args.api_key or os.environ.get("API_KEY") or None
    if os.environ.get("FAKE_LLAMA_OPEN"):
        api_key = None
    record({"event": "start", "pid": os.getpid(), "argv": sys.argv[1:], "keyed": bool(api_key)})
    time.sleep(float(os.environ.get("FAKE_LLAMA_START_DELAY", "0")))
    alias = args.model_alias
    failures = [int(os.environ.get("FAKE_LLAMA_FAIL_CHATS", "0"))]

    class Handler(JsonHandler):
        def authorized(self) -> bool:
            header = self.headers.get("authorization") or ""
            return api_key is None or header == f"Bearer {api_key}"

        def refuse(self) -> None:
            self.send_json({"detail": "Invalid API key"}, 401)

        def do_GET(self) -> None:
            auth = self.authorized()
            record({"event": "request", "method": "GET", "path": self.path, "auth": auth})
            if not auth:
                self.refuse()
            elif self.path == "/v1/models":
                self.send_json({"object": "list", "data": [{"id": alias, "object": "model"}]})
            else:
                self.send_json({"error": "not found"}, 404)

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            auth = self.authorized()
            entry = {"event": "request", "method": "POST", "path": self.path, "body": body}
            record({**entry, "auth": auth})
            if not auth:
                self.refuse()
                return
            if self.path != "/v1/chat/completions":
                self.send_json({"error": "not found"}, 404)
                return
            if failures[0] > 0:
                failures[0] -= 1
                self.send_json({"error": {"message": "busy", "type": "server_error"}}, 503)
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
