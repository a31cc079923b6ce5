"""The server's JSON-RPC transport over stdio and TCP, in place of pygls' reader loop.

pygls 2.1.1 reads a frame with ``readexactly(Content-Length)`` whatever the length says (one
``Content-Length: 99999999999`` is a MemoryError), skips header lines it cannot parse (a wrong,
negative or missing length desyncs the stream for good), and only logs a body that is not JSON.
This module reads frames with bounds and answers every problem:

- A frame whose header is malformed (no, a negative, a non-numeric or a second
  ``Content-Length``; a line that is not ``Name: value``; a header over 8 KiB) is answered with
  -32700 (``data.kind`` ``FrameError``), a frame over the cap (``server.max_message_bytes``)
  with -32600 (``MessageTooLarge``); then the connection is closed, because where the next
  message starts is unknown. Over stdio that ends the process.
- A well-delimited body that is not UTF-8 or not JSON (or holds a lone surrogate, or nests
  deeper than :data:`MAX_NESTING`) is answered with -32700, and one that is not a JSON-RPC
  message with -32600, with the request's id when it can be read; the server keeps serving.
- Params a pygls/lsprotocol type cannot take are answered with -32602 (pygls dropped them).

Over TCP the server serves one client: a second connection is answered with -32600
(``ServerBusy``) and closed, and the server ends when its client disconnects, as over stdio.
Lifecycle rules (before ``initialize``, after ``shutdown``) live in the protocol class
(:class:`fleet_lsp.server.FleetProtocol`); handlers are untouched. Traffic is logged at DEBUG
only.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import logging
import os
import re
import sys
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from functools import partial
from typing import Any, BinaryIO, NoReturn, Protocol

from lsprotocol.types import ResponseError
from pygls.exceptions import JsonRpcException
from pygls.protocol import JsonRPCProtocol

from fleet_lsp.protocol import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    PARSE_ERROR,
    SERVER_BUSY,
)

log = logging.getLogger(__name__)

DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024
MAX_HEADER_BYTES = 8 * 1024
MAX_HEADER_LINES = 16
MAX_NESTING = 128
CHUNK_BYTES = 64 * 1024
#: Inside a frame (header or body), the sender may pause this long; then the frame is an error.
FRAME_STALL_SECONDS = 30.0
#: After the message loop ends, the process has this long to finish (running Turns, worker
#: threads) before it is ended hard: ``exit`` must end it.
EXIT_GRACE_SECONDS = 10.0
#: A refused TCP client: how long (and how much) its input is drained so it reads the reason.
REFUSE_DRAIN_SECONDS = 2.0
REFUSE_DRAIN_BYTES = 1024 * 1024

_TOKEN = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
Limit = Callable[[], int]


# ---------------------------------------------------------------------------------------------
# errors
# ---------------------------------------------------------------------------------------------


@dataclass
class TransportError(Exception):
    """A message answered with a JSON-RPC error; ``fatal`` closes the connection after it."""

    code: int
    kind: str
    message: str
    msg_id: int | str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    fatal: bool = False

    def __str__(self) -> str:
        return self.message

    def response(self) -> ResponseError:
        return ResponseError(
            code=self.code, message=self.message, data={"kind": self.kind, **self.details}
        )


def frame_error(message: str) -> TransportError:
    return TransportError(PARSE_ERROR, "FrameError", message, fatal=True)


def too_large(size: int, limit: int) -> TransportError:
    return TransportError(
        INVALID_REQUEST,
        "MessageTooLarge",
        f"the message is {size} bytes, over the limit of {limit} bytes "
        "(server.max_message_bytes); the connection is closed",
        details={"size": size, "limit": limit},
        fatal=True,
    )


def send_error(protocol: JsonRPCProtocol, error: TransportError) -> None:
    """Answer through pygls' sender; an id that cannot be read is answered as ``null``."""
    if error.msg_id is not None:
        protocol._send_response(error.msg_id, error=error.response())
        return
    # pygls' converter leaves out a null id; JSON-RPC wants "id": null
    reply = {"code": error.code, "message": error.message, "data": error.response().data}
    protocol._send_data({"jsonrpc": "2.0", "id": None, "error": reply})


# ---------------------------------------------------------------------------------------------
# byte sources and the frame reader
# ---------------------------------------------------------------------------------------------


class ChunkSource(Protocol):
    async def read(self) -> bytes:
        """The next bytes; ``b""`` at end of stream."""
        ...


class StreamSource:
    """A TCP connection's reader."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    async def read(self) -> bytes:
        try:
            return await self._reader.read(CHUNK_BYTES)
        except (ConnectionError, OSError):
            return b""


class ThreadSource:
    """A blocking binary stream (stdin) read by a daemon thread, with bounded read-ahead.

    The thread is a daemon so a read blocked on stdin never keeps the process alive (pygls'
    executor thread did, which is one reason ``exit`` did not end it)."""

    def __init__(self, stream: BinaryIO, read_ahead: int = 8) -> None:
        self._stream = stream
        self._queue: asyncio.Queue[bytes] | None = None
        self._slots = threading.Semaphore(read_ahead)

    async def read(self) -> bytes:
        if self._queue is None:
            self._queue = asyncio.Queue()
            loop = asyncio.get_running_loop()
            threading.Thread(
                target=self._pump, args=(loop, self._queue), name="fleet-stdin", daemon=True
            ).start()
        chunk = await self._queue.get()
        self._slots.release()
        return chunk

    def _pump(self, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[bytes]) -> None:
        read = self._reader()
        while True:
            self._slots.acquire()  # at most read_ahead chunks wait for the loop
            try:
                chunk = read(CHUNK_BYTES)
            except (OSError, ValueError):
                chunk = b""
            try:
                loop.call_soon_threadsafe(queue.put_nowait, chunk)
            except RuntimeError:  # the loop is closed: the server is ending
                return
            if not chunk:
                return

    def _reader(self) -> Callable[[int], bytes]:
        """``os.read`` on the file descriptor: a daemon thread blocked inside a buffered
        reader holds its lock, and the interpreter aborts when it flushes stdin at exit."""
        try:
            fd = self._stream.fileno()
        except (OSError, ValueError, AttributeError):
            return getattr(self._stream, "read1", self._stream.read)
        return partial(os.read, fd)


class FrameReader:
    """LSP base-protocol frames (``Content-Length`` headers, then the body), bounded."""

    def __init__(
        self, source: ChunkSource, limit: Limit, stall: float | None = FRAME_STALL_SECONDS
    ) -> None:
        self._source = source
        self._limit = limit
        self._stall = stall
        self._buffer = bytearray()
        self._eof = False
        self._in_frame = False

    async def next_frame(self) -> bytes | None:
        """The next body; None at end of stream; :class:`TransportError` (fatal) otherwise."""
        self._in_frame = False
        length = await self._headers()
        if length is None:
            return None
        return await self._exactly(length)

    async def _headers(self) -> int | None:
        length: int | None = None
        lines = 0
        while True:
            line = await self._line()
            if line is None:
                return None
            text = line.rstrip(b"\r\n")
            if not text:
                if lines == 0:
                    continue  # blank lines between messages are harmless
                if length is None:
                    raise frame_error("a message header without Content-Length")
                return length
            lines += 1
            self._in_frame = True
            if lines > MAX_HEADER_LINES:
                raise frame_error(f"a message header with more than {MAX_HEADER_LINES} lines")
            length = self._header(text, length)

    def _header(self, text: bytes, length: int | None) -> int | None:
        name, sep, value = text.partition(b":")
        if not sep or not _TOKEN.fullmatch(name):
            raise frame_error(
                f"a malformed header line {_show(text)}; expected 'Content-Length: <bytes>'"
            )
        if name.lower() != b"content-length":
            return length  # Content-Type (UTF-8 is the only encoding) and unknown headers
        value = value.strip()
        if length is not None:
            raise frame_error("a message header with more than one Content-Length")
        if not value.isdigit():
            raise frame_error(
                f"Content-Length must be a non-negative integer of bytes, got {_show(value)}"
            )
        size, limit = int(value), self._limit()
        if size > limit:
            raise too_large(size, limit)
        return size

    async def _line(self) -> bytes | None:
        start = 0
        while True:
            index = self._buffer.find(b"\n", start)
            if index >= 0:
                if index > MAX_HEADER_BYTES:
                    break
                line = bytes(self._buffer[: index + 1])
                del self._buffer[: index + 1]
                return line
            if len(self._buffer) > MAX_HEADER_BYTES:
                break
            start = len(self._buffer)
            if not await self._fill():
                return None
        raise frame_error(f"a message header line longer than {MAX_HEADER_BYTES} bytes")

    async def _exactly(self, size: int) -> bytes | None:
        while len(self._buffer) < size:
            if not await self._fill():
                return None
        body = bytes(self._buffer[:size])
        del self._buffer[:size]
        return body

    async def _fill(self) -> bool:
        """More bytes; inside a frame, a sender that stops for ``stall`` seconds is an error
        (a Content-Length longer than what follows would otherwise swallow the next messages,
        ``shutdown`` and ``exit`` included, and hang both sides)."""
        if self._eof:
            return False
        inside = self._in_frame or bool(self._buffer.strip())
        try:
            chunk = await asyncio.wait_for(self._source.read(), self._stall if inside else None)
        except TimeoutError:
            raise frame_error(
                f"the message stopped short of its Content-Length for {self._stall:g} seconds"
            ) from None
        if not chunk:
            self._eof = True
            return False
        self._buffer += chunk
        return True


def _show(value: bytes, limit: int = 60) -> str:
    text = value[:limit].decode("ascii", "backslashreplace")
    return repr(text + ("..." if len(value) > limit else ""))


# ---------------------------------------------------------------------------------------------
# messages
# ---------------------------------------------------------------------------------------------


def decode(body: bytes) -> dict[str, Any]:
    """A body as a JSON-RPC message object, or :class:`TransportError` (with the id if known)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TransportError(
            PARSE_ERROR,
            "ParseError",
            f"the message is not valid UTF-8 (byte {exc.start} of {len(body)})",
            msg_id=_salvage_id(body),
        ) from None
    try:
        data = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise TransportError(PARSE_ERROR, "ParseError", _too_deep()) from None
    except ValueError as exc:
        raise TransportError(
            PARSE_ERROR, "ParseError", f"the message is not valid JSON: {exc}"
        ) from None
    return check_envelope(data)


def check_envelope(data: Any) -> dict[str, Any]:
    """JSON-RPC 2.0 shape: an object with a valid id, ``jsonrpc: "2.0"``, a method or a reply."""
    if not isinstance(data, dict):
        batch = " (batches are not supported)" if isinstance(data, list) else ""
        raise _invalid(f"a message must be a JSON object{batch}", None)
    raw_id = data.get("id")
    msg_id = raw_id if _valid_id(raw_id) else None
    if "id" in data and raw_id is not None and msg_id is None:
        raise _invalid("'id' must be an integer or a string", None)
    if data.get("jsonrpc") != "2.0":
        raise _invalid("'jsonrpc' must be \"2.0\"", msg_id)
    if "method" in data:
        if not isinstance(data["method"], str) or not data["method"]:
            raise _invalid("'method' must be a non-empty string", msg_id)
        if "id" in data and msg_id is None:
            raise _invalid("a request's 'id' must be an integer or a string", None)
    elif "id" not in data or ("result" not in data and "error" not in data):
        raise _invalid(
            "a message needs a 'method' (a request or notification) or an 'id' with a "
            "'result' or an 'error' (a response)",
            msg_id,
        )
    problem = _value_problem(data)
    if problem is not None:
        code = INVALID_REQUEST if problem == _too_deep() else PARSE_ERROR
        kind = "InvalidRequest" if code == INVALID_REQUEST else "ParseError"
        raise TransportError(code, kind, problem, msg_id=msg_id)
    return data


def is_request(data: dict[str, Any]) -> bool:
    return "method" in data and "id" in data


def _invalid(message: str, msg_id: int | str | None) -> TransportError:
    return TransportError(INVALID_REQUEST, "InvalidRequest", message, msg_id=msg_id)


def _valid_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _too_deep() -> str:
    return f"the message nests deeper than {MAX_NESTING} levels"


def _value_problem(data: Any) -> str | None:
    """Nesting over :data:`MAX_NESTING`, or a lone surrogate (``"\\ud800"``: valid JSON, but
    not Unicode that a file name, a database or UTF-8 output can hold)."""
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_NESTING:
            return _too_deep()
        if isinstance(value, dict):
            stack.extend((key, depth) for key in value)
            stack.extend((item, depth + 1) for item in value.values())
        elif isinstance(value, list):
            stack.extend((item, depth + 1) for item in value)
        elif isinstance(value, str) and not value.isascii() and _has_surrogate(value):
            return (
                "the message holds a lone UTF-16 surrogate escape (such as \\ud800), "
                "which is not valid Unicode"
            )
    return None


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _salvage_id(body: bytes) -> int | str | None:
    """The id of a message that is not valid UTF-8, when the rest of it parses."""
    try:
        data = json.loads(body.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        return None
    value = data.get("id") if isinstance(data, dict) else None
    return value if _valid_id(value) else None


def dispatch(protocol: JsonRPCProtocol, body: bytes) -> None:
    """Decode, validate and hand one body to pygls; answer what cannot be handed over."""
    try:
        data = decode(body)
    except TransportError as exc:
        log.debug("refused a message: %s", exc.message)
        send_error(protocol, exc)
        return
    log.debug("received %s (%d bytes)", data.get("method") or "a response", len(body))
    try:
        message = protocol.structure_message(data)
    except JsonRpcException as exc:
        _refuse_fields(protocol, data, exc)
        return
    try:
        protocol.handle_message(message)
    except (SystemExit, KeyboardInterrupt, ConnectionError):
        raise
    except Exception:  # pygls answers handler errors itself; this is a fault in pygls
        log.exception("cannot handle %s", data.get("method") or "a response")
        if is_request(data):
            error = TransportError(INTERNAL_ERROR, "InternalError", "internal error", data["id"])
            send_error(protocol, error)


def _refuse_fields(protocol: JsonRPCProtocol, data: dict[str, Any], exc: JsonRpcException) -> None:
    if is_request(data):
        response = exc.to_response_error()
        protocol._send_response(data["id"], error=response)
    else:
        log.warning("ignored a message with invalid fields: %s", exc.message)


# ---------------------------------------------------------------------------------------------
# writers
# ---------------------------------------------------------------------------------------------


class StdoutWriter:
    """pygls' writer interface over stdout; a closed pipe ends the connection quietly."""

    def __init__(self, stream: BinaryIO, on_broken: Callable[[], object]) -> None:
        self._stream = stream
        self._on_broken = on_broken
        self._broken = False

    def write(self, data: bytes) -> None:
        if self._broken:
            return
        try:
            self._stream.write(data)
            self._stream.flush()
        except (OSError, ValueError):
            self._broken = True
            log.debug("the client's end of stdout is closed")
            self._on_broken()

    def close(self) -> None:
        self._broken = True
        with contextlib.suppress(OSError, ValueError):
            self._stream.close()


class SocketWriter:
    """pygls' writer interface over a TCP connection; writes after a close are dropped."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    def write(self, data: bytes) -> None:
        if not self._writer.is_closing():
            self._writer.write(data)

    def close(self) -> None:
        self._writer.close()


# ---------------------------------------------------------------------------------------------
# serving
# ---------------------------------------------------------------------------------------------


async def serve_connection(protocol: JsonRPCProtocol, reader: FrameReader) -> int:
    """Read and dispatch frames until end of stream, a fatal frame error or ``exit``; the exit
    code (``exit`` after ``shutdown`` 0, before it 1; end of stream 0; a framing error 1)."""
    try:
        while (body := await reader.next_frame()) is not None:
            dispatch(protocol, body)
    except TransportError as exc:
        log.warning("closing the connection: %s", exc.message)
        send_error(protocol, exc)
        return 1
    except SystemExit as exc:  # the 'exit' notification (pygls calls sys.exit)
        return exc.code if isinstance(exc.code, int) else 1
    return 0


def claim_stdio() -> tuple[BinaryIO, BinaryIO]:
    """The process's stdin and stdout for the protocol alone: private duplicates of fd 0 and
    fd 1 (not inherited by child processes), then fd 1 goes to stderr and fd 0 reads
    ``/dev/null``.

    Anything else that writes to stdout (``print``, a library's progress bar such as the tqdm
    bars DSPy's evaluator writes to ``sys.stdout`` during an optimization, a C extension, a
    child process) would otherwise put bytes between the protocol's frames: the client loses
    the frame they land in (the answer to a request) or the connection. Now it reaches the log.
    A child process that reads stdin cannot take the client's messages either."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        sys.stdout.flush()
    protocol_in = os.dup(0)
    protocol_out = os.dup(1)
    os.dup2(2, 1)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
    finally:
        os.close(null)
    return open(protocol_in, "rb", buffering=0), open(protocol_out, "wb")


def serve_stdio(
    protocol: JsonRPCProtocol,
    stdin: BinaryIO,
    stdout: BinaryIO,
    limit: Limit,
    *,
    stall: float | None = FRAME_STALL_SECONDS,
    exit_grace: float | None = EXIT_GRACE_SECONDS,
) -> int:
    """Serve one client over stdin/stdout until it ends; the exit code."""

    async def main() -> int:
        loop = asyncio.get_running_loop()
        broken = asyncio.Event()
        protocol.set_writer(StdoutWriter(stdout, partial(loop.call_soon_threadsafe, broken.set)))
        reader = FrameReader(ThreadSource(stdin), limit, stall)
        serving = asyncio.ensure_future(serve_connection(protocol, reader))
        gone = asyncio.ensure_future(broken.wait())
        await asyncio.wait({serving, gone}, return_when=asyncio.FIRST_COMPLETED)
        gone.cancel()
        code = serving.result() if serving.done() else 1
        serving.cancel()
        _arm_exit_watchdog(code, exit_grace)
        return code

    return _run(main())


def serve_tcp(
    protocol: JsonRPCProtocol,
    host: str,
    port: int,
    limit: Limit,
    *,
    stall: float | None = FRAME_STALL_SECONDS,
    exit_grace: float | None = EXIT_GRACE_SECONDS,
) -> int:
    """Serve one client over TCP; refuse others while it is connected; end when it leaves."""

    async def main() -> int:
        done: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        busy = False

        async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            nonlocal busy
            if busy:
                await refuse(writer, reader)
                return
            busy = True
            log.info("client connected from %s", _peer(writer))
            protocol.set_writer(SocketWriter(writer))
            frames = FrameReader(StreamSource(reader), limit, stall)
            code = await serve_connection(protocol, frames)
            log.info("client %s disconnected", _peer(writer))
            writer.close()
            if not done.done():
                done.set_result(code)

        listener = await asyncio.start_server(on_connect, host, port)
        names = ", ".join(_address(sock.getsockname()) for sock in listener.sockets)
        log.info("fleet-lsp listening on %s (one client)", names)
        async with listener:
            code = await done
            listener.close()
        _arm_exit_watchdog(code, exit_grace)
        return code

    return _run(main())


async def refuse(writer: asyncio.StreamWriter, reader: asyncio.StreamReader) -> None:
    """Answer a second TCP client with one error (id null) and close its connection."""
    log.warning("refused a second client from %s: one client is connected", _peer(writer))
    error = TransportError(
        SERVER_BUSY,
        "ServerBusy",
        "fleet-lsp serves one client per TCP server and another client is connected; "
        "start another server for this client (fleet-lsp serve --tcp HOST:PORT)",
    )
    reply = {"code": error.code, "message": error.message, "data": {"kind": error.kind}}
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": reply}).encode("utf-8")
    try:
        writer.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        await asyncio.wait_for(writer.drain(), REFUSE_DRAIN_SECONDS)
        if writer.can_write_eof():
            writer.write_eof()
        await asyncio.wait_for(_drain_input(reader), REFUSE_DRAIN_SECONDS)
    except (ConnectionError, OSError, TimeoutError):
        pass
    except asyncio.CancelledError:
        pass  # the server is ending: asyncio's stream callback would log a cancelled task
    finally:
        writer.close()


async def _drain_input(reader: asyncio.StreamReader) -> None:
    """Read what the refused client sent (closing with unread input would reset the
    connection before it read the reason)."""
    total = 0
    while total < REFUSE_DRAIN_BYTES and (chunk := await reader.read(CHUNK_BYTES)):
        total += len(chunk)


def _run(main: Coroutine[Any, Any, int]) -> int:
    try:
        return asyncio.run(main)
    except KeyboardInterrupt:
        return 130


def _arm_exit_watchdog(code: int, grace: float | None) -> None:
    """End the process ``grace`` seconds from now unless it has ended by itself: threads still
    running a Turn must not keep it alive after the client is gone."""
    if grace is None:
        return
    timer = threading.Timer(grace, os._exit, args=(code,))
    timer.daemon = True
    timer.start()


def finish_process(code: int, grace: float = EXIT_GRACE_SECONDS) -> NoReturn:
    """End a serving process with ``code``: its exit callbacks (log flushing, libraries'
    cleanups) get ``grace`` seconds on a daemon thread, then the process ends without the
    interpreter's finalization.

    A plain ``sys.exit`` finalizes the interpreter, and there a callback or a lazy import can
    wait forever on a lock held by a daemon thread that finalization has frozen (a Turn's
    worker stopped inside an import holds that module's lock), while the watchdog's own daemon
    thread is frozen too: ``exit`` then never ended the process (seen once in CI)."""
    cleanup = threading.Thread(target=atexit._run_exitfuncs, name="fleet-exit", daemon=True)
    cleanup.start()
    cleanup.join(grace)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stream.flush()
    os._exit(code)


def _peer(writer: asyncio.StreamWriter) -> str:
    peer = writer.get_extra_info("peername")
    return _address(peer) if peer else "an unknown address"


def _address(name: Any) -> str:
    if isinstance(name, tuple) and len(name) >= 2:
        return f"{name[0]}:{name[1]}"
    return str(name)
