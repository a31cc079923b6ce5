"""A stand-in for llama.cpp's server (``llama-server``, or xllamacpp's through
``fleet_core.localmodel.xserver``) in the supervisor's tests: the same flags, the same
``/v1/models``, ``/v1/chat/completions`` (with llama.cpp's ``timings``), ``/metrics`` (its
cumulative counters) and ``/slots/0?action=save|restore`` shapes, no model. The supervisor
starts it through its real code path (``[local_model] server_module =
"tests.localmodel.fake_llama_server"``).

Like the real server (``--api-key``, or ``LLAMA_API_KEY`` when the flag is not given), it answers
only ``Authorization: Bearer <LLAMA_API_KEY>`` when the key is set, and 401 otherwise. Slot saves
write a small file named by the request into ``--slot-save-path``; a restore of a missing file
is a 400, as in llama.cpp.

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
    for flag in ("--model", "--alias", "--host"):
        parser.add_argument(flag, required=True)
    parser.add_argument("--api-key")  # as the real one has; the supervisor never passes it
    for flag in ("--port", "--ctx-size", "--threads", "--threads-batch", "--parallel"):
        parser.add_argument(flag, type=int, required=True)
    parser.add_argument("--cache-ram", type=int, required=True)
    parser.add_argument("--repeat-penalty", type=float, required=True)
    parser.add_argument("--slot-save-path")
    for flag in ("--metrics", "--slots", "--no-webui"):
        parser.add_argument(flag, action="store_true")
    args = parser.parse_args()
    if not Path(args.model).is_file():
        print(f"model file {args.model} not found", file=sys.stderr)
        return 1
    if args.parallel != 1:
        print("refusing: one slot (--parallel 1)", file=sys.stderr)
        return 3
    api_key = args.api_key or os.environ.get("LLAMA_API_KEY") or None
    if os.environ.get("FAKE_LLAMA_OPEN"):
        api_key = None
    record({"event": "start", "pid": os.getpid(), "argv": sys.argv[1:], "keyed": bool(api_key)})
    time.sleep(float(os.environ.get("FAKE_LLAMA_START_DELAY", "0")))
    alias = args.alias
    slots = Path(args.slot_save_path) if args.slot_save_path else None
    failures = [int(os.environ.get("FAKE_LLAMA_FAIL_CHATS", "0"))]
    chats = [0]  # completions answered: each "took" 400 ms of prompt and 250 ms of generation

    class Handler(JsonHandler):
        def authorized(self) -> bool:
            header = self.headers.get("authorization") or ""
            return api_key is None or header == f"Bearer {api_key}"

        def refuse(self) -> None:
            self.send_json({"error": {"message": "Invalid API Key", "code": 401}}, 401)

        def do_GET(self) -> None:
            auth = self.authorized()
            record({"event": "request", "method": "GET", "path": self.path, "auth": auth})
            if not auth:
                self.refuse()
            elif self.path == "/v1/models":
                self.send_json({"object": "list", "data": [{"id": alias, "object": "model"}]})
            elif self.path == "/metrics":
                text = (
                    f"llamacpp:prompt_tokens_total {8 * chats[0]}\n"
                    f"llamacpp:prompt_seconds_total {0.4 * chats[0]}\n"
                    f"llamacpp:tokens_predicted_total {5 * chats[0]}\n"
                    f"llamacpp:tokens_predicted_seconds_total {0.25 * chats[0]}\n"
                ).encode()
                self.send_response(200)
                self.send_header("content-type", "text/plain")
                self.send_header("content-length", str(len(text)))
                self.end_headers()
                self.wfile.write(text)
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
            if self.path.startswith("/slots/0?action="):
                self.slot(self.path.rsplit("=", 1)[1], str(body.get("filename") or ""))
                return
            if self.path != "/v1/chat/completions":
                self.send_json({"error": "not found"}, 404)
                return
            if failures[0] > 0:
                failures[0] -= 1
                self.send_json({"error": {"message": "busy", "type": "server_error"}}, 503)
                return
            time.sleep(float(os.environ.get("FAKE_LLAMA_REPLY_DELAY", "0")))
            chats[0] += 1
            reply = os.environ.get(
                "FAKE_LLAMA_REPLY", "[[ ## answer ## ]]\n42\n\n[[ ## completed ## ]]"
            )
            self.send_json({
                "id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()),
                "model": alias,
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": reply}}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
                "timings": {"cache_n": 2, "prompt_n": 8, "prompt_ms": 400.0,
                            "predicted_n": 5, "predicted_ms": 250.0},
            })  # fmt: skip

        def slot(self, action: str, filename: str) -> None:
            if slots is None or not filename or "/" in filename:
                self.send_json({"error": {"message": "bad slot request", "code": 400}}, 400)
            elif action == "save":
                (slots / filename).write_bytes(b"fake kv state")
                self.send_json({"id_slot": 0, "filename": filename, "n_saved": 8,
                                "timings": {"save_ms": 1.5}})  # fmt: skip
            elif action == "restore" and (slots / filename).is_file():
                self.send_json({"id_slot": 0, "filename": filename, "n_restored": 8,
                                "timings": {"restore_ms": 0.5}})  # fmt: skip
            else:
                self.send_json({"error": {"message": "failed to restore", "code": 400}}, 400)

    server = ThreadingHTTPServer((args.host, args.port), Handler)
    try:
        server.serve_forever()
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
