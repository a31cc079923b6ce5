"""Transport hardening (issue 13): real server processes over stdio and TCP, raw frames.

Framing errors (a length over the cap, a negative, non-numeric or missing length) are answered
with a JSON-RPC error (``id: null``) and the connection is closed, so the process exits; a frame
that is well delimited but not JSON, not UTF-8 or not a request is answered with an error and
the server keeps serving. ``RawServer``/``Wire`` are shared with ``test_fuzz.py``.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import pytest

SERVE = [sys.executable, "-m", "fleet_lsp", "serve"]
TIMEOUT = float(os.environ.get("FLEET_TRANSPORT_TEST_TIMEOUT", "30"))
ServerMessage = dict[str, Any]


def frame(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def encode(message: Any) -> bytes:
    return frame(json.dumps(message).encode("utf-8"))


class Wire:
    """One raw JSON-RPC connection: frames out, parsed messages in (a reader thread)."""

    def __init__(self, rfile: BinaryIO, wfile: BinaryIO) -> None:
        self._rfile = rfile
        self._wfile = wfile
        self._inbox: queue.Queue[ServerMessage | None] = queue.Queue()
        self.eof = threading.Event()
        self.garbage: list[bytes] = []  # anything the server wrote that is not a JSON frame
        self._ids = iter(range(1, 1 << 30))
        threading.Thread(target=self._read, daemon=True).start()

    # sending ---------------------------------------------------------------------------------

    def send_raw(self, data: bytes) -> bool:
        """Write bytes; False when the server has closed its end."""
        try:
            self._wfile.write(data)
            self._wfile.flush()
        except (BrokenPipeError, ConnectionResetError, ValueError, OSError):
            return False
        return True

    def send(self, message: Any) -> bool:
        return self.send_raw(encode(message))

    def notify(self, method: str, params: Any = None) -> bool:
        return self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def request(self, method: str, params: Any = None, *, timeout: float = TIMEOUT) -> Any:
        """Send a request and return its response (the whole message: result or error)."""
        msg_id = next(self._ids)
        self.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        return self.response(msg_id, timeout=timeout)

    # receiving -------------------------------------------------------------------------------

    def response(self, msg_id: Any, *, timeout: float = TIMEOUT) -> ServerMessage:
        """The response to ``msg_id`` (notifications and server requests are skipped)."""
        deadline = time.monotonic() + timeout
        while True:
            message = self.next_message(deadline - time.monotonic())
            if message is None:
                raise AssertionError(f"connection closed before the response to {msg_id!r}")
            if "method" in message:
                self._answer_server_request(message)
                continue
            if message.get("id") == msg_id:
                return message
            raise AssertionError(f"unexpected response while waiting for {msg_id!r}: {message}")

    def next_message(self, timeout: float = TIMEOUT) -> ServerMessage | None:
        """The next message, None at end of stream; AssertionError when nothing comes."""
        try:
            return self._inbox.get(timeout=max(timeout, 0.01))
        except queue.Empty:
            raise AssertionError(f"no message from the server within {timeout:.1f}s") from None

    def next_response(self, timeout: float = TIMEOUT) -> ServerMessage | None:
        """The next response (notifications skipped), None at end of stream."""
        deadline = time.monotonic() + timeout
        while True:
            message = self.next_message(deadline - time.monotonic())
            if message is None or "method" not in message:
                return message
            self._answer_server_request(message)

    def closed_within(self, timeout: float) -> bool:
        """True when the server closes the stream within ``timeout`` (messages are dropped)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if self._inbox.get(timeout=0.1) is None:
                    return True
            except queue.Empty:
                continue
        return False

    def _answer_server_request(self, message: ServerMessage) -> None:
        if "id" in message:  # e.g. window/workDoneProgress/create: accept it
            self.send({"jsonrpc": "2.0", "id": message["id"], "result": None})

    def _read(self) -> None:
        try:
            while (body := self._read_frame()) is not None:
                try:
                    self._inbox.put(json.loads(body))
                except ValueError:
                    self.garbage.append(body)
        except (OSError, ValueError) as exc:
            self.garbage.append(repr(exc).encode())
        finally:
            self.eof.set()
            self._inbox.put(None)

    def _read_frame(self) -> bytes | None:
        length = None
        while True:
            line = self._rfile.readline()
            if not line:
                return None
            if line in (b"\r\n", b"\n"):
                break
            name, _, value = line.decode("ascii").partition(":")
            if name.strip().lower() == "content-length":
                length = int(value.strip())
        if length is None:
            self.garbage.append(b"a frame without Content-Length")
            return None
        body = self._rfile.read(length)
        return body if len(body) == length else None

    # lifecycle -------------------------------------------------------------------------------

    def initialize(self) -> ServerMessage:
        response = self.request(
            "initialize",
            {
                "processId": None,
                "rootUri": None,
                "capabilities": {},
                "initializationOptions": {"fleet": {"client": "raw-test"}},
            },
        )
        assert "result" in response, response
        self.notify("initialized", {})
        return response


class RawServer:
    """``fleet-lsp serve`` (stdio or TCP) in ``tmp``: cwd and FLEET_STATE_DIR inside it."""

    def __init__(
        self,
        tmp: Path,
        *,
        tcp: bool = False,
        env: dict[str, str] | None = None,
        command: list[str] | None = None,
    ) -> None:
        self.tmp = tmp
        self.port = free_port() if tcp else None
        self.stderr_path = tmp / f"stderr-{time.monotonic_ns()}.log"
        args = [*SERVE, "--tcp", f"127.0.0.1:{self.port}"] if tcp else (command or SERVE)
        environment = {
            **os.environ,
            "FLEET_STATE_DIR": str(tmp / ".fleet"),
            "PYTHONUNBUFFERED": "1",
            **(env or {}),
        }
        for name in [n for n in environment if n.startswith(("FLEET_LM_", "FLEET_CONFIG"))]:
            environment.pop(name)  # no model endpoint: a Turn answers ModelUnavailable
        environment.pop("FLEET_TEST_SCRIPT", None)
        self._stderr = self.stderr_path.open("wb")
        self.proc = subprocess.Popen(
            args,
            cwd=tmp,
            env=environment,
            stdin=subprocess.DEVNULL if tcp else subprocess.PIPE,
            stdout=subprocess.DEVNULL if tcp else subprocess.PIPE,
            stderr=self._stderr,
        )
        self._sockets: list[socket.socket] = []
        self.wire = self.connect() if tcp else Wire(self.proc.stdout, self.proc.stdin)  # type: ignore[arg-type]

    def connect(self, timeout: float = TIMEOUT) -> Wire:
        """A new TCP connection (retried while the server starts)."""
        assert self.port is not None
        deadline = time.monotonic() + timeout
        while True:
            try:
                sock = socket.create_connection(("127.0.0.1", self.port), timeout=5)
                break
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise AssertionError(f"server not listening: {self.stderr()}") from None
                time.sleep(0.1)
        sock.settimeout(None)
        self._sockets.append(sock)
        return Wire(sock.makefile("rb"), sock.makefile("wb"))

    def stderr(self) -> str:
        self._stderr.flush()
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    def wait(self, timeout: float = TIMEOUT) -> int | None:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def exit(self) -> int | None:
        """``shutdown`` then ``exit``; the exit code (None: the process did not end)."""
        if self.proc.poll() is None:
            self.wire.request("shutdown")
            self.wire.notify("exit")
        return self.wait()

    def disconnect(self) -> None:
        """Close every TCP connection of this test."""
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def close(self) -> None:
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.close()
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        self._stderr.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def raw_server(tmp: Path, **kwargs: Any) -> Iterator[RawServer]:
    server = RawServer(tmp, **kwargs)
    try:
        yield server
    finally:
        server.close()


def error_of(message: ServerMessage | None) -> dict[str, Any]:
    assert message is not None, "the server closed the stream without answering"
    assert "error" in message, message
    error = message["error"]
    assert isinstance(error.get("message"), str) and error["message"].strip(), error
    assert "traceback" not in json.dumps(error).lower(), error
    return dict(error)


def assert_alive(wire: Wire) -> None:
    """The server answers a real request after whatever came before."""
    response = wire.request("fleet/session/list", {})
    assert "result" in response, response
    assert isinstance(response["result"]["sessions"], list)


def assert_clean_stderr(server: RawServer) -> None:
    text = server.stderr()
    assert "Traceback" not in text, text
    assert "MemoryError" not in text, text


# ---------------------------------------------------------------------------------------------
# framing errors: an error, then a clean close (the process exits)
# ---------------------------------------------------------------------------------------------


def test_huge_content_length_is_refused_without_a_crash(tmp_path: Path) -> None:
    with raw_server(tmp_path) as server:
        server.wire.initialize()
        server.wire.send_raw(b"Content-Length: 99999999999\r\n\r\n{}")
        error = error_of(server.wire.next_response())
        assert error["code"] == -32600
        assert error["data"]["kind"] == "MessageTooLarge"
        assert "server.max_message_bytes" in error["message"]
        assert server.wire.closed_within(TIMEOUT)
        assert server.wait() is not None
        assert_clean_stderr(server)


def test_the_cap_is_a_setting(tmp_path: Path) -> None:
    env = {"FLEET_SERVER__MAX_MESSAGE_BYTES": "65536"}
    with raw_server(tmp_path, env=env) as server:
        server.wire.initialize()
        assert_alive(server.wire)  # the runtime (and its configuration) is loaded by now
        big = {"jsonrpc": "2.0", "id": 99, "method": "fleet/session/list", "params": {}}
        big["params"] = {"pad": "x" * 70_000}
        server.wire.send(big)
        error = error_of(server.wire.next_response())
        assert error["data"]["kind"] == "MessageTooLarge"
        assert error["data"]["limit"] == 65536
        assert server.wire.closed_within(TIMEOUT)
        assert server.wait() is not None


BAD_HEADERS = {
    "negative": b"Content-Length: -5\r\n\r\n",
    "non-numeric": b"Content-Length: abc\r\n\r\n",
    "float": b"Content-Length: 1e3\r\n\r\n",
    "missing": b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n",
    "no header at all": b"",
    "two lengths": b"Content-Length: 2\r\nContent-Length: 3\r\n\r\n",
}


@pytest.mark.parametrize("case", sorted(BAD_HEADERS))
def test_a_malformed_length_is_answered_then_closed(tmp_path: Path, case: str) -> None:
    with raw_server(tmp_path) as server:
        server.wire.initialize()
        body = json.dumps({"jsonrpc": "2.0", "id": 5, "method": "fleet/session/list"})
        server.wire.send_raw(BAD_HEADERS[case] + body.encode() + b"\r\n")
        server.wire.send(  # what a desynced server used to swallow
            {"jsonrpc": "2.0", "id": 6, "method": "shutdown"}
        )
        error = error_of(server.wire.next_response())
        assert error["code"] == -32700
        assert error["data"]["kind"] == "FrameError"
        assert "Content-Length" in error["message"]
        assert server.wire.closed_within(TIMEOUT)
        assert server.wait() is not None
        assert_clean_stderr(server)


def test_a_length_shorter_than_the_body_cannot_hang_the_server(tmp_path: Path) -> None:
    with raw_server(tmp_path) as server:
        server.wire.initialize()
        body = json.dumps({"jsonrpc": "2.0", "id": 5, "method": "fleet/session/list"}).encode()
        server.wire.send_raw(b"Content-Length: 10\r\n\r\n" + body)
        server.wire.send({"jsonrpc": "2.0", "id": 6, "method": "shutdown"})
        assert error_of(server.wire.next_response())["code"] == -32700  # the cut body
        assert error_of(server.wire.next_response())["data"]["kind"] == "FrameError"
        assert server.wire.closed_within(TIMEOUT)
        assert server.wait() is not None


STALL_SERVER = """
import sys
from fleet_lsp.server import configure_logging, create_server

configure_logging()
server = create_server()
server.frame_stall_seconds = 1.0
server.start_io()
sys.exit(server.exit_code)
"""


def test_a_length_longer_than_what_follows_cannot_hang_the_server(tmp_path: Path) -> None:
    """The next messages (shutdown included) vanish into the body; a stalled frame ends."""
    with raw_server(tmp_path, command=[sys.executable, "-c", STALL_SERVER]) as server:
        server.wire.initialize()
        server.wire.send_raw(b"Content-Length: 500\r\n\r\n{")
        server.wire.send({"jsonrpc": "2.0", "id": 6, "method": "shutdown"})
        error = error_of(server.wire.next_response())
        assert error["data"]["kind"] == "FrameError"
        assert "stopped short" in error["message"]
        assert server.wire.closed_within(TIMEOUT)
        assert server.wait() is not None
        assert_clean_stderr(server)


# ---------------------------------------------------------------------------------------------
# bad messages in good frames: an error, and the server keeps serving
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RawServer]:
    with raw_server(tmp_path_factory.mktemp("served")) as server:
        server.wire.initialize()
        yield server
        assert server.exit() == 0
        assert_clean_stderr(server)


@pytest.mark.parametrize(
    "body",
    [b"not json", b"{", b"", b"   ", b'{"jsonrpc": "2.0", "id": 1, "method": }', b"\x00\x01"],
    ids=["text", "brace", "empty", "blank", "broken", "binary"],
)
def test_non_json_is_a_parse_error(served: RawServer, body: bytes) -> None:
    served.wire.send_raw(frame(body))
    response = served.wire.next_response()
    error = error_of(response)
    assert error["code"] == -32700
    assert response is not None and response["id"] is None
    assert_alive(served.wire)


def test_invalid_utf8_is_a_parse_error_with_the_id(served: RawServer) -> None:
    body = (
        b'{"jsonrpc": "2.0", "id": 4242, "method": "fleet/session/list", "params": {"x": "\xff"}}'
    )
    served.wire.send_raw(frame(body))
    response = served.wire.next_response()
    error = error_of(response)
    assert error["code"] == -32700
    assert "UTF-8" in error["message"]
    assert response is not None and response["id"] == 4242
    served.wire.send_raw(frame(b"\xff\xfe\x00garbage"))
    response = served.wire.next_response()
    assert error_of(response)["code"] == -32700
    assert response is not None and response["id"] is None
    assert_alive(served.wire)


@pytest.mark.parametrize(
    ("message", "msg_id"),
    [
        ([1, 2, 3], None),
        (42, None),
        ({"id": 7, "method": "fleet/session/list"}, 7),
        ({"jsonrpc": "1.0", "id": 8, "method": "fleet/session/list"}, 8),
        ({"jsonrpc": "2.0", "id": 9, "method": 5}, 9),
        ({"jsonrpc": "2.0", "id": {"a": 1}, "method": "fleet/session/list"}, None),
        ({"jsonrpc": "2.0", "id": 1.5, "method": "fleet/session/list"}, None),
        ({"jsonrpc": "2.0", "id": True, "method": "fleet/session/list"}, None),
        ({"jsonrpc": "2.0"}, None),
    ],
    ids=[
        "batch",
        "number",
        "no-jsonrpc",
        "old-jsonrpc",
        "method-type",
        "id-object",
        "id-float",
        "id-bool",
        "empty-envelope",
    ],
)
def test_an_invalid_request_is_answered(served: RawServer, message: Any, msg_id: Any) -> None:
    served.wire.send(message)
    response = served.wire.next_response()
    error = error_of(response)
    assert error["code"] == -32600
    assert response is not None and response["id"] == msg_id
    assert_alive(served.wire)


def test_invalid_lsp_params_are_answered(served: RawServer) -> None:
    response = served.wire.request("workspace/executeCommand", {"command": 5, "arguments": "x"})
    error = error_of(response)
    assert error["code"] == -32602
    response = served.wire.request("textDocument/hover", {"textDocument": 1})
    assert error_of(response)["code"] in (-32601, -32602)
    assert_alive(served.wire)


def test_deep_nesting_is_refused(served: RawServer) -> None:
    for depth in (200, 5000, 100_000):
        nested = "[" * depth + "]" * depth
        body = '{"jsonrpc": "2.0", "id": 77, "method": "fleet/debug/info", "params": {"x": %s}}'
        served.wire.send_raw(frame((body % nested).encode()))
        response = served.wire.next_response()
        error = error_of(response)
        assert error["code"] in (-32700, -32600), error
        assert "nest" in error["message"]
    assert_alive(served.wire)


FAULTY_SERVER = """
import sys
from fleet_lsp.server import configure_logging, create_server

async def planted(server, params):
    raise RuntimeError("planted fault")

configure_logging()
server = create_server()
server.handlers["fleet/session/list"] = planted
server.start_io()
sys.exit(server.exit_code)
"""


def test_no_traceback_in_error_data(tmp_path: Path) -> None:
    """An unexpected exception in a handler is an internal error with a readable message."""
    command = [sys.executable, "-c", FAULTY_SERVER]
    with raw_server(tmp_path, command=command) as server:
        server.wire.initialize()
        error = error_of(server.wire.request("fleet/session/list", {}))
        assert error["code"] == -32603
        assert error["data"] == {"kind": "InternalError"}
        assert "planted fault" in error["message"]
        assert "the server log has the details" in error["message"]
        command_error = error_of(
            server.wire.request(
                "workspace/executeCommand", {"command": "fleet.listSessions", "arguments": [{}]}
            )
        )
        assert command_error["data"] == {"kind": "InternalError"}
        assert "result" in server.wire.request("fleet/debug/info", {})
        assert server.exit() == 0
        assert "planted fault" in server.stderr()  # the details are in the log


NOISY_SERVER = """
import asyncio, os, subprocess, sys
from fleet_lsp.server import configure_logging, create_server

def children():
    # a child that writes to the stdout it inherits, then reads the stdin it inherits
    return subprocess.run(
        ["sh", "-c", "printf child-noise; head -c 1 > /dev/null"], timeout=5
    ).returncode

async def noisy(server, params):
    print("print-noise", end="", flush=True)  # what a library's progress bar does
    os.write(1, b"fd-noise")  # and a C extension
    await asyncio.to_thread(children)
    return {"sessions": []}

configure_logging()
server = create_server()
server.handlers["fleet/session/list"] = noisy
server.start_io()
sys.exit(server.exit_code)
"""


def test_writes_to_stdout_do_not_reach_the_protocol_stream(tmp_path: Path) -> None:
    """Over stdio, stdout is the protocol's alone: ``print``, a raw write to fd 1 and a child
    process's output land in the log (stderr), not between frames (where the client lost the
    frame they landed in: issue 11's unanswered requests during an optimization), and a child
    reading stdin gets end of file instead of the client's next message."""
    command = [sys.executable, "-c", NOISY_SERVER]
    with raw_server(tmp_path, command=command) as server:
        server.wire.initialize()
        for _ in range(3):
            assert server.wire.request("fleet/session/list", {})["result"] == {"sessions": []}
            assert "result" in server.wire.request("fleet/debug/info", {})
        assert server.wire.garbage == []
        assert server.exit() == 0
        log = server.stderr()
        assert log.count("print-noise") == log.count("fd-noise") == 3
        assert log.count("child-noise") == 3


def test_lone_surrogates_are_refused(served: RawServer) -> None:
    """JSON may escape a lone surrogate, which no file name or database can hold."""
    body = (
        '{"jsonrpc": "2.0", "id": 31, "method": "fleet/context/attach", '
        '"params": {"sessionId": "s", "text": "x", "as": "files/\\ud800.txt"}}'
    )
    served.wire.send_raw(frame(body.encode()))
    response = served.wire.next_response()
    error = error_of(response)
    assert error["code"] == -32700
    assert "surrogate" in error["message"]
    assert response is not None and response["id"] == 31
    assert_alive(served.wire)


# ---------------------------------------------------------------------------------------------
# lifecycle: before initialize, after shutdown, exit
# ---------------------------------------------------------------------------------------------


def test_requests_before_initialize_are_refused(tmp_path: Path) -> None:
    with raw_server(tmp_path) as server:
        response = server.wire.request("fleet/session/list", {})
        error = error_of(response)
        assert error["code"] == -32002
        server.wire.notify("initialized", {})  # a notification before initialize is dropped
        server.wire.initialize()
        again = server.wire.request("initialize", {"processId": None, "capabilities": {}})
        assert error_of(again)["code"] == -32600
        assert_alive(server.wire)
        assert server.exit() == 0


def test_exit_before_initialize_ends_the_process(tmp_path: Path) -> None:
    with raw_server(tmp_path) as server:
        server.wire.notify("exit")
        assert server.wait() == 1
        assert_clean_stderr(server)


def test_requests_after_shutdown_are_refused(tmp_path: Path) -> None:
    with raw_server(tmp_path) as server:
        server.wire.initialize()
        assert_alive(server.wire)
        assert server.wire.request("shutdown")["result"] is None
        response = server.wire.request("fleet/session/list", {})
        error = error_of(response)
        assert error["code"] == -32600
        assert "shut" in error["message"]
        server.wire.notify("exit")
        assert server.wait() == 0
        assert_clean_stderr(server)


def test_end_of_input_ends_the_process(tmp_path: Path) -> None:
    with raw_server(tmp_path) as server:
        server.wire.initialize()
        assert_alive(server.wire)
        assert server.proc.stdin is not None
        server.proc.stdin.close()
        assert server.wait() is not None


# ---------------------------------------------------------------------------------------------
# TCP: one client at a time, traffic only at debug level
# ---------------------------------------------------------------------------------------------


def test_tcp_refuses_a_second_client_and_keeps_the_first(tmp_path: Path) -> None:
    with raw_server(tmp_path, tcp=True) as server:
        server.wire.initialize()
        assert_alive(server.wire)
        second = server.connect()
        error = error_of(second.next_response())
        assert error["data"]["kind"] == "ServerBusy"
        assert "one client" in error["message"]
        assert second.closed_within(TIMEOUT)
        third = server.connect()  # and again, after the second one went away
        assert error_of(third.next_response())["data"]["kind"] == "ServerBusy"
        assert third.closed_within(TIMEOUT)
        assert_alive(server.wire)
        assert server.proc.poll() is None
        assert server.exit() == 0
        assert_clean_stderr(server)


def test_tcp_ends_when_its_client_disconnects(tmp_path: Path) -> None:
    with raw_server(tmp_path, tcp=True) as server:
        server.wire.initialize()
        assert_alive(server.wire)
        server.disconnect()
        assert server.wait() is not None
        assert_clean_stderr(server)


def test_tcp_framing_errors_close_only_that_connection(tmp_path: Path) -> None:
    with raw_server(tmp_path, tcp=True) as server:
        server.wire.initialize()
        server.wire.send_raw(b"Content-Length: 99999999999\r\n\r\n")
        assert error_of(server.wire.next_response())["data"]["kind"] == "MessageTooLarge"
        assert server.wire.closed_within(TIMEOUT)
        assert server.wait() is not None
        assert_clean_stderr(server)


MARKER = "artifact-text-7f3a9c"


@pytest.mark.parametrize("tcp", [False, True], ids=["stdio", "tcp"])
def test_no_traffic_is_logged_at_info(tmp_path: Path, tcp: bool) -> None:
    with raw_server(tmp_path, tcp=tcp) as server:
        server.wire.initialize()
        server.wire.request("fleet/session/new", {"sessionId": "logs"})
        attach = {"sessionId": "logs", "text": MARKER, "as": f"files/{MARKER}.txt"}
        assert "result" in server.wire.request("fleet/context/attach", attach)
        listed = server.wire.request("fleet/workspace/list", {"sessionId": "logs"})
        assert MARKER in json.dumps(listed)
        assert server.exit() == 0
        text = server.stderr()
        assert MARKER not in text, text
        assert "Sending data" not in text, text
        if tcp:
            assert "listening on 127.0.0.1" in text  # INFO is on, just not traffic
