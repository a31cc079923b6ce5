"""engine/jev.py against local servers: what it sends, the answers it accepts, and the errors it
raises for answers it cannot use (each naming the host, never the key or the body)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from fleet_core.config import load_config
from fleet_core.engine.jev import (
    MAX_RESPONSE_BYTES,
    ChoiceQuestion,
    JevClient,
    JevError,
    jev_client,
)
from tests.fake_http import JsonHandler, serving
from tests.fake_jev import KEY, fake_jev

QUESTION = {"item-0": ChoiceQuestion("Which?", {"a": "the first", "b": None})}


def _client(url: str, timeout: float = 5.0) -> JevClient:
    return JevClient(base_url=url, model="jev-latest", timeout_seconds=timeout, _api_key=KEY)


def test_a_decision_sends_the_questions_and_reads_the_answer() -> None:
    with fake_jev(policy=lambda item, labels: "b") as fake:
        answers = _client(fake.url).decide({"items": ["x"]}, QUESTION)
    [request] = fake.requests
    assert request["path"] == "/v1/systemone"
    assert request["body"]["questions"]["item-0"] == {
        "type": "choice",
        "instructions": "Which?",
        "criteria": {"a": "the first", "b": None},
    }
    answer = answers.answers["item-0"]
    assert (answer.choice, answer.confidence, answer.probabilities) == (
        "b",
        0.9,
        {"b": 0.9, "a": 0.1},
    )
    assert (answers.model, answers.input_tokens, answers.output_tokens) == ("jev-fake-1", 7, 1)
    assert KEY not in repr(_client(fake.url))  # the key is not in the client's repr


def _serving(body: Any, status: int = 200):
    class Handler(JsonHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            if isinstance(body, bytes):
                self.send_response(status)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            else:
                self.send_json(body, status)

    return serving(Handler)


ANSWER = {"type": "choice", "choice": "a", "confidence": 0.8, "probabilities": {"a": 0.8}}


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({"answers": {"item-0": {**ANSWER, "choice": "zzz"}}}, 200, "a label it was not offered"),
        ({"answers": {}}, 200, "did not answer question 'item-0'"),
        ({"model": "m"}, 200, "without 'answers'"),
        (b"<html>not json</html>", 200, "not JSON"),
        (b"[" * 200_000 + b"]" * 200_000, 200, "not JSON"),  # nested past the parser's depth
        ({"detail": f"bad key {KEY}"}, 500, "answered HTTP 500"),
        ({"detail": "no"}, 403, "refused the key (HTTP 403)"),
    ],
)
def test_unusable_answers_are_clear_errors_without_the_key(
    body: Any, status: int, message: str
) -> None:
    with _serving(body, status) as server:
        url = f"http://127.0.0.1:{server.server_port}"
        with pytest.raises(JevError) as caught:
            _client(url).decide({"items": ["x"]}, QUESTION)
    assert message in caught.value.message and "127.0.0.1" in caught.value.message
    assert KEY not in caught.value.message and "html" not in caught.value.message


def test_answers_drop_probabilities_of_labels_not_offered_and_non_numbers() -> None:
    raw = {**ANSWER, "probabilities": {"a": 0.8, "b": "x", "evil": 0.2}, "confidence": "high"}
    with _serving({"model": "m", "answers": {"item-0": raw}}) as server:
        answers = _client(f"http://127.0.0.1:{server.server_port}").decide({}, QUESTION)
    answer = answers.answers["item-0"]
    assert answer.probabilities == {"a": 0.8} and answer.confidence is None
    assert answers.input_tokens is None


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://jev.example.com", "must use https"),
        ("https://user:pw@jev.example.com", "contains credentials"),
        ("ftp://jev.example.com", "not an http(s) URL"),
    ],
)
def test_the_base_url_is_checked_when_a_key_is_set(tmp_path: Path, url: str, message: str) -> None:
    config = load_config(
        environ={"FLEET_JEV_API_KEY": KEY, "FLEET_JEV_BASE_URL": url}, cwd=tmp_path
    )
    with pytest.raises(JevError, match=re.escape(message)):
        jev_client(config)


def test_no_key_means_no_client_and_the_key_is_a_secret(tmp_path: Path) -> None:
    assert jev_client(load_config(environ={}, cwd=tmp_path)) is None
    config = load_config(environ={"FLEET_JEV_API_KEY": KEY}, cwd=tmp_path)
    client = jev_client(config)
    assert client is not None and client.base_url == "https://api.typesafe.ai"
    assert config.secret_status()["FLEET_JEV_API_KEY"] is True
    assert KEY in config.secrets.values()  # so the redactor scrubs it everywhere
    assert KEY not in json.dumps(config.settings.model_dump(mode="json"))


def test_probabilities_that_are_not_a_mapping_are_dropped_not_a_crash() -> None:
    raw = {**ANSWER, "probabilities": [0.8, 0.2]}
    with _serving({"model": "m", "answers": {"item-0": raw}}) as server:
        answers = _client(f"http://127.0.0.1:{server.server_port}").decide({}, QUESTION)
    answer = answers.answers["item-0"]
    assert (answer.choice, answer.probabilities, answer.confidence) == ("a", {}, 0.8)


def test_an_oversized_answer_is_refused_at_the_bound_without_reading_the_rest() -> None:
    class Handler(JsonHandler):
        def do_POST(self) -> None:
            self.send_response(200)
            self.send_header("content-length", str(50_000_000))  # promised, never all sent
            self.end_headers()
            try:
                self.wfile.write(b" " * (MAX_RESPONSE_BYTES + 65_536))
                time.sleep(10)  # a reader that wanted the whole body would wait here
            except (BrokenPipeError, ConnectionResetError):
                return

    with serving(Handler) as server:
        started = time.monotonic()
        with pytest.raises(JevError) as caught:
            _client(f"http://127.0.0.1:{server.server_port}", timeout=5).decide({}, QUESTION)
    assert f"larger than {MAX_RESPONSE_BYTES:,} bytes" in caught.value.message
    assert time.monotonic() - started < 4
