"""A local fake of the TypeSafe Jev API (``POST /v1/systemone``, ``GET /v1/models``) for tests.

It checks what the real API requires (a Bearer key, a model, a state, choice questions with
criteria) and answers every question with a label a policy picks, with probabilities and a
confidence. ``mode`` makes it fail: ``"500"`` answers HTTP 500, ``"slow"`` sleeps past a client's
timeout, ``"401"`` refuses the key, ``"echo"`` answers HTTP 500 with the key in its body.
Every request is recorded (path, headers, body).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from tests.fake_http import JsonHandler, serving

KEY = "jev-test-key-3f9a1c7e"  # what the fake accepts; tests look for it in every output
Policy = Callable[[str, dict[str, Any]], str]  # (item text, labels) -> label


def default_policy(item: str, labels: dict[str, Any]) -> str:
    if "relevant" in labels:
        return "relevant" if "jev-relevant" in item else "not_relevant"
    if "yes" in labels:
        return "yes" if item[:1].lower() in "aeiou" else "no"
    return next(iter(labels))


@dataclass
class FakeJev:
    url: str = ""
    mode: str = "ok"
    route: str = "direct"
    policy: Policy = default_policy
    slow_seconds: float = 3.0
    requests: list[dict[str, Any]] = field(default_factory=list)

    def systemone_calls(self) -> list[dict[str, Any]]:
        return [r["body"] for r in self.requests if r["path"] == "/v1/systemone"]


def _answer(fake: FakeJev, body: dict[str, Any]) -> dict[str, Any]:
    state = body["state"]
    answers = {}
    for name, question in body["questions"].items():
        assert question["type"] == "choice" and question["criteria"], question
        labels = question["criteria"]
        index = int(name.removeprefix("item-"))
        item = state["items"][index]
        label = fake.route if "rlm" in labels and "flex" in labels else fake.policy(item, labels)
        others = [x for x in labels if x != label]
        probs = {label: 0.9, **{x: round(0.1 / max(1, len(others)), 4) for x in others}}
        answers[name] = {
            "type": "choice",
            "choice": label,
            "confidence": 0.9,
            "probabilities": probs,
        }
    return {
        "model": "jev-fake-1",
        "answers": answers,
        "usage": {"input_tokens": 7 * len(answers), "output_tokens": len(answers)},
    }


@contextmanager
def fake_jev(**options: Any) -> Iterator[FakeJev]:
    fake = FakeJev(**options)

    class Handler(JsonHandler):
        def _record(self, body: Any) -> None:
            headers = {k.lower(): v for k, v in self.headers.items()}
            fake.requests.append({"path": self.path, "headers": headers, "body": body})

        def _authorized(self) -> bool:
            if fake.mode == "401" or self.headers.get("authorization") != f"Bearer {KEY}":
                self.send_json({"detail": "invalid key"}, 401)
                return False
            return True

        def do_GET(self) -> None:
            self._record(None)
            if not self._authorized():
                return
            if fake.mode == "500":
                self.send_json({"detail": "boom"}, 500)
                return
            self.send_json({"models": [{"name": "jev-latest", "description": "fake",
                                        "release_date": "2026-09-01"}]})  # fmt: skip

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            self._record(body)
            if not self._authorized():
                return
            if fake.mode == "500":
                self.send_json({"detail": "internal error"}, 500)
                return
            if fake.mode == "echo":  # a hostile or buggy server repeating the request's key
                echoed = self.headers.get("authorization")
                self.send_json({"detail": f"cannot serve {echoed}", "key": echoed}, 500)
                return
            if fake.mode == "slow":
                time.sleep(fake.slow_seconds)
            assert body.get("model") and "state" in body and body.get("questions"), body
            try:
                self.send_json(_answer(fake, body))
            except (BrokenPipeError, ConnectionResetError):  # a client that timed out
                return

    with serving(Handler) as server:
        fake.url = f"http://127.0.0.1:{server.server_address[1]}"
        yield fake
