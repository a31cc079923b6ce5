"""A scripted model behind a real OpenAI-compatible endpoint on loopback.

Unlike ``FLEET_TEST_SCRIPT`` (a custom dspy engine), this drives the product's real model path:
the configured ``dspy.LM("openai/<model>")`` on the lm15 engine, HTTP to ``api_base``, usage and
cost estimation. Tests that check what a Turn reaches on the network, or what DSPy prints around
a real model call, use it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from fleet_core.engine.scripted_lm import action, route, submit
from tests.fake_http import JsonHandler, serving

#: The Turn the endpoint plays: triage picks rlm, one cell runs in the sandbox, then SUBMIT.
RLM_TURN = [
    route("rlm"),
    action("value = 6 * 7\nprint(value)"),
    submit("str(value)", note="multiplied in the sandbox"),
]
FALLBACK = "[[ ## answer ## ]]\n42\n\n[[ ## completed ## ]]"


class ScriptedModels(JsonHandler):
    """``POST <base>/chat/completions``: the next scripted reply (``server.replies``)."""

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length", "0"))
        body = json.loads(self.rfile.read(length) or b"{}")
        if not self.path.endswith("/chat/completions"):
            self.send_json({"error": {"message": f"no route {self.path}"}}, 404)
            return
        with self.server.lock:  # type: ignore[attr-defined]
            replies: list[str] = self.server.replies  # type: ignore[attr-defined]
            text = replies.pop(0) if replies else FALLBACK
            self.server.calls += 1  # type: ignore[attr-defined]
        self.send_json(
            {
                "id": "chatcmpl-scripted",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            }
        )


@contextmanager
def scripted_models(replies: list[str] | None = None) -> Iterator[Any]:
    """The endpoint on 127.0.0.1 (a free port); ``server.api_base`` is its ``/v1`` URL."""
    with serving(ScriptedModels) as server:
        server.lock = threading.Lock()  # type: ignore[attr-defined]
        server.replies = list(RLM_TURN if replies is None else replies)  # type: ignore[attr-defined]
        server.calls = 0  # type: ignore[attr-defined]
        server.api_base = f"http://127.0.0.1:{server.server_port}/v1"  # type: ignore[attr-defined]
        yield server


def model_env(server: Any) -> dict[str, str]:
    """The environment that configures every role on ``server`` (no retries: fail fast)."""
    return {
        "FLEET_LM_API_BASE": server.api_base,
        "FLEET_LM_MODEL": "scripted-model",
        "FLEET_LM_API_KEY": "sk-scripted-not-secret",
        "FLEET_LLM__NUM_RETRIES": "0",
    }
