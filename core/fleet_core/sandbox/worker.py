"""Fleet sandbox worker: a long-lived Python REPL speaking JSON lines.

STDLIB ONLY, no ``from __future__`` imports: this file runs inside any sandbox image (bwrap here,
Daytona elsewhere) as ``python -I worker.py``.

Protocol. At start the worker moves the protocol off fds 0/1: it keeps private duplicates of the
pipes it was given, points fd 0 at /dev/null and fds 1/2 at an anonymous capture file, and replaces
``sys.stdout``/``sys.stderr`` per cell with bounded buffers. So ``print`` and C-level writes can
never reach the protocol stream. Every frame is one JSON object on one line.

host -> worker
  {"type": "exec", "id", "nonce", "code", "variables", "tools": [names], "output_fields",
   "max_output_chars", "max_value_chars", "cpu_seconds"}
  {"type": "tool_result", "id", "call", "ok": true, "value"} | {..., "ok": false, "error"}
  {"type": "shutdown"}
worker -> host
  {"type": "ready", "pid", "python", "packages", "cwd"}
  {"type": "tool_call", "id", "nonce", "call", "tool", "args", "kwargs"}   (several may be open)
  {"type": "result", "id", "nonce", "stdout", "stderr", "stdout_truncated", "stderr_truncated",
   "value", "value_type", "error", "final", "duration"}

The trailing expression's value, when not None: a ``str`` is sent raw (``value_type`` "str", at
most ``max_value_chars`` characters, else the cell fails with ``ValueTooLarge``), anything else as
its repr (``value_type`` "repr", cut to ``max_output_chars`` plus a "... [truncated]" marker).

Started as ``python -I -B worker.py [--rlimits JSON]``: the rlimits are applied first, before the
ready frame and any cell; if they cannot be, the worker exits 71 without running anything. On
``shutdown`` it drops the namespace and ``os._exit``s (no interpreter finalization); with
``"linger": true`` (under bwrap) it answers ``{"type": "bye"}`` first and waits to be killed.

Generated code shares this process, so it *can* write frames of its own; the host validates
every frame (see ``fleet_core.sandbox.protocol``). The per-cell nonce only makes accidents and
naive forgeries fail early.
"""

import ast
import builtins
import importlib.util
import io
import itertools
import json
import linecache
import os
import queue
import signal
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from typing import Any

Frame = dict[str, Any]

PROBED_PACKAGES = (
    "numpy",
    "pandas",
    "scipy",
    "sympy",
    "polars",
    "pyarrow",
    "sklearn",
    "statsmodels",
    "matplotlib",
    "networkx",
    "mpmath",
)
MAX_SUBMIT_BYTES = 2_000_000
DEFAULT_MAX_VALUE_CHARS = 1_000_000
TRUNCATED_MARK = "... [truncated]"
PROTOCOL_LOST_EXIT = 70  # the protocol fds were closed under us: the host cannot know the outcome
RLIMITS_FAILED_EXIT = 71  # the host's rlimits could not be applied: refuse to run any code
CELL_FILENAME = "<cell-{}>"
LINGER_S = 10.0  # after ``bye`` the host kills the sandbox; exit on our own if it does not
PR_SET_PDEATHSIG = 1


class _Submit(BaseException):
    """Raised by SUBMIT to end the cell; a BaseException so ``except Exception`` does not eat it."""

    def __init__(self, payload: Frame) -> None:
        BaseException.__init__(self, "SUBMIT")
        self.payload = payload


class CpuTimeExceeded(Exception):
    """The cell used more CPU time than its budget (RLIMIT_CPU soft limit, SIGXCPU)."""


class ValueTooLarge(ValueError):
    """The cell's trailing ``str`` is longer than the host takes back raw."""


class BoundedText(io.TextIOBase):
    """A write-only text stream keeping the first ``limit`` characters."""

    def __init__(self, limit: int) -> None:
        io.TextIOBase.__init__(self)
        self._limit = limit
        self._parts: list[str] = []
        self._size = 0
        self._lock = threading.Lock()
        self.truncated = False

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError("write() argument must be str, not " + type(text).__name__)
        with self._lock:
            room = self._limit - self._size
            if len(text) > room:
                self.truncated = True
                text = text[: max(room, 0)]
            if text:
                self._parts.append(text)
                self._size += len(text)
        return len(text)

    def flush(self) -> None:
        pass

    def getvalue(self) -> str:
        with self._lock:
            return "".join(self._parts)


def to_jsonable(value: Any) -> Any:
    """``json.dumps`` default: numpy scalars/arrays, sets and tuples; anything else is refused."""
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    item = getattr(value, "item", None)
    if callable(item) and getattr(value, "shape", None) == ():
        return item()
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        return tolist()
    raise TypeError(
        "values sent to the host must be JSON-serializable, got " + type(value).__name__
    )


def dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=True, separators=(",", ":"), default=to_jsonable)


class Channel:
    """The protocol pipes: frames out under a lock, lines in from the reader thread."""

    def __init__(self, rfd: int, wfd: int) -> None:
        self._reader = os.fdopen(rfd, "rb", buffering=1 << 16)
        self._wfd = wfd
        self._lock = threading.Lock()

    def send(self, frame: Frame) -> None:
        data = (dumps(frame) + "\n").encode("ascii")
        view = memoryview(data)
        with self._lock:
            while view:
                written = os.write(self._wfd, view)
                view = view[written:]

    def lines(self) -> Iterator[bytes]:
        while True:
            line = self._reader.readline()
            if not line:
                return
            yield line


class ToolCalls:
    """Outstanding tool calls by call id; any thread may call, the reader thread answers."""

    def __init__(self, channel: Channel) -> None:
        self._channel = channel
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._pending: dict[Any, Frame] = {}
        self.active_exec: str | None = None
        self.active_nonce: str | None = None

    def call(
        self, exec_id: str, nonce: str, tool: str, args: tuple[Any, ...], kwargs: Frame
    ) -> Any:
        if exec_id != self.active_exec:
            raise RuntimeError("tool " + tool + " was called after its cell ended")
        call_id = next(self._ids)
        slot: Frame = {"event": threading.Event(), "exec": exec_id}
        with self._lock:
            self._pending[call_id] = slot
        try:
            self._channel.send(
                {
                    "type": "tool_call",
                    "id": exec_id,
                    "nonce": nonce,
                    "call": call_id,
                    "tool": tool,
                    "args": list(args),
                    "kwargs": kwargs,
                }
            )
            self._wait(slot, exec_id, call_id)
        finally:
            with self._lock:
                self._pending.pop(call_id, None)
            self._forget(exec_id, call_id)
        if slot.get("ok"):
            return slot.get("value")
        raise RuntimeError(slot.get("error") or ("tool " + tool + " failed"))

    def _wait(self, slot: Frame, exec_id: str, call_id: int) -> None:
        """Block until the reader thread (or ``end_cell``) answers the call."""
        slot["event"].wait()

    def _forget(self, exec_id: str, call_id: int) -> None:
        """After the call is answered or abandoned: drop whatever the transport kept for it."""

    def resolve(self, frame: Frame) -> None:
        with self._lock:
            slot = self._pending.get(frame.get("call"))
        if slot is None or slot["exec"] != frame.get("id"):
            return
        slot["ok"] = bool(frame.get("ok"))
        slot["value"] = frame.get("value")
        slot["error"] = frame.get("error")
        slot["event"].set()

    def end_cell(self, exec_id: str | None) -> None:
        self.active_exec = None
        with self._lock:
            slots = [s for s in self._pending.values() if s["exec"] == exec_id]
        for slot in slots:
            slot["ok"] = False
            slot["error"] = "the cell ended before the tool replied"
            slot["event"].set()


class Worker:
    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self.tools = ToolCalls(channel)
        self.inbox: queue.Queue[Frame] = queue.Queue()
        self.running = False
        self.submitted: Frame | None = None
        self.cells = itertools.count(1)
        self.capture_fd: int | None = None
        self.namespace: Frame = {"__name__": "__main__", "__builtins__": builtins}

    # -- start-up -------------------------------------------------------------------------------
    def install(self) -> None:
        self.capture_fd = _redirect_std_fds()
        signal.signal(signal.SIGINT, self._on_sigint)
        if hasattr(signal, "SIGXCPU"):
            signal.signal(signal.SIGXCPU, self._on_sigxcpu)
        reader = threading.Thread(target=self._read_loop, name="fleet-protocol", daemon=True)
        reader.start()

    def _on_sigint(self, signum: int, frame: Any) -> None:
        if self.running:
            raise KeyboardInterrupt

    def _on_sigxcpu(self, signum: int, frame: Any) -> None:
        if self.running:
            raise CpuTimeExceeded("CPU time budget for this cell exhausted")

    def _read_loop(self) -> None:
        try:
            for line in self.channel.lines():
                try:
                    frame = json.loads(line)
                except ValueError:
                    continue
                kind = frame.get("type") if isinstance(frame, dict) else None
                if kind == "tool_result":
                    self.tools.resolve(frame)
                elif kind == "exec":
                    self.inbox.put(frame)
                elif kind == "shutdown":
                    self.inbox.put(frame)
                    return  # the main thread exits; EOF after this is expected
        except (OSError, ValueError):
            os._exit(PROTOCOL_LOST_EXIT)
        os._exit(0)  # the host closed our input: it is gone or wants us gone

    def ready_frame(self) -> Frame:
        return {
            "type": "ready",
            "pid": os.getpid(),
            "python": sys.version.split()[0],
            "packages": {name: _importable(name) for name in PROBED_PACKAGES},
            "cwd": os.getcwd(),
        }

    # -- the loop -------------------------------------------------------------------------------
    def serve(self) -> None:
        self.channel.send(self.ready_frame())
        while True:
            try:
                frame = self.inbox.get()
                if frame.get("type") == "shutdown":
                    self.shutdown(linger=frame.get("linger") is True)
                self.channel.send(self.run_cell(frame))
            except (OSError, ValueError):
                os._exit(PROTOCOL_LOST_EXIT)
            except KeyboardInterrupt:
                continue  # a late interrupt that missed its cell

    def shutdown(self, *, linger: bool = False) -> None:
        """Exit now: drop the REPL namespace (user file objects flush and close as they are
        freed), then ``os._exit``. Skipping interpreter finalization saves several ms and
        never waits on threads user code left running. With ``linger`` (under bwrap) answer
        ``bye`` and wait to be killed instead: the host ends the pid namespace itself, so
        bwrap reaps its pid 1 and no process is left for the host's init to reap."""
        try:  # noqa: SIM105 - a user __del__ must not keep us alive
            self.namespace.clear()
        except BaseException:  # noqa: S110
            pass
        if linger:
            try:
                self.channel.send({"type": "bye"})
                time.sleep(LINGER_S)
            except BaseException:  # noqa: S110
                pass
        os._exit(0)

    def run_cell(self, frame: Frame) -> Frame:
        exec_id = frame.get("id")
        nonce = frame.get("nonce")
        limit = int(frame.get("max_output_chars") or 100_000)
        out, err = BoundedText(limit), BoundedText(limit)
        started = time.perf_counter()
        self.submitted = None
        self.tools.active_exec, self.tools.active_nonce = exec_id, nonce
        self._prepare_namespace(frame, str(exec_id), str(nonce))
        _set_cpu_budget(frame.get("cpu_seconds"))
        saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = out, err
        value: Any = None
        error: Frame | None = None
        try:
            try:
                value = self._run_code(frame.get("code") or "")
            except _Submit:
                pass
            except BaseException as exc:  # user code: every failure is data
                error = _describe(exc)  # (may run user code: __str__, __repr__)
        except KeyboardInterrupt as exc:  # the host's SIGINT landed while an error was handled:
            self.running = False  # it is this cell's interrupt, and its result is still sent
            error = _describe(exc)
        finally:
            self.running = False
            sys.stdout, sys.stderr = saved
            self.tools.end_cell(exec_id)
        final, error = self._final_payload(error)
        typed: Frame = {"value": None, "value_type": None}
        if error is None and final is None:
            typed, error = _typed_value(value, limit, frame.get("max_value_chars"))
        return {
            "type": "result",
            "id": exec_id,
            "nonce": nonce,
            "stdout": out.getvalue() + self._drain_fd_output(limit),
            "stderr": err.getvalue(),
            "stdout_truncated": out.truncated,
            "stderr_truncated": err.truncated,
            **typed,
            "error": error,
            "final": final,
            "duration": time.perf_counter() - started,
        }

    def _prepare_namespace(self, frame: Frame, exec_id: str, nonce: str) -> None:
        ns = self.namespace
        for name in frame.get("tools") or ():
            ns[name] = self._tool_stub(name, exec_id, nonce)
        ns["SUBMIT"] = self._submit_function(frame.get("output_fields"))
        variables = frame.get("variables") or {}
        ns.update(variables)

    def _run_code(self, code: str) -> Any:
        filename = CELL_FILENAME.format(next(self.cells))
        tree = ast.parse(code, filename, "exec")
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        last: ast.Expression | None = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body[-1].value)
            tree.body.pop()
        body = compile(tree, filename, "exec")
        tail = compile(last, filename, "eval") if last is not None else None
        self.running = True
        exec(body, self.namespace)  # noqa: S102 - this *is* the sandbox
        if tail is not None:
            return eval(tail, self.namespace)  # noqa: S307
        return None

    def _final_payload(self, error: Frame | None) -> tuple[Frame | None, Frame | None]:
        if self.submitted is None:
            return None, error
        try:
            size = len(dumps(self.submitted))
        except (TypeError, ValueError) as exc:
            return None, _describe(TypeError("SUBMIT: " + str(exc)))
        if size > MAX_SUBMIT_BYTES:
            message = f"SUBMIT payload is {size} bytes; the limit is {MAX_SUBMIT_BYTES}"
            return None, _describe(ValueError(message))
        return self.submitted, error

    def _tool_stub(self, name: str, exec_id: str, nonce: str) -> Any:
        tools = self.tools

        def call_tool(*args: Any, **kwargs: Any) -> Any:
            return tools.call(exec_id, nonce, name, args, kwargs)

        call_tool.__name__ = name
        call_tool.__qualname__ = name
        call_tool.__doc__ = "Host tool " + name + " (runs outside the sandbox)."
        return call_tool

    def _submit_function(self, output_fields: Any) -> Any:
        names = [f.get("name") for f in output_fields or () if isinstance(f, dict)]
        worker = self

        def SUBMIT(*args: Any, **kwargs: Any) -> None:
            worker.submitted = _submit_payload(names, args, kwargs)
            raise _Submit(worker.submitted)

        return SUBMIT

    def _drain_fd_output(self, limit: int) -> str:
        fd = self.capture_fd
        if fd is None:
            return ""
        try:
            size = os.fstat(fd).st_size
            if not size:
                return ""
            data = os.pread(fd, min(size, limit * 4), 0)
            os.ftruncate(fd, 0)
        except OSError:
            return ""
        return data.decode("utf-8", "replace")[:limit]


def _submit_payload(names: list[Any], args: tuple[Any, ...], kwargs: Frame) -> Frame:
    if not names:
        if args and not kwargs and len(args) == 1:
            return {"output": args[0]}
        if args:
            raise TypeError("SUBMIT takes keyword arguments (or a single value)")
        return dict(kwargs)
    if args and kwargs:
        raise TypeError("SUBMIT takes either positional or keyword arguments, not both")
    if args:
        if len(args) != len(names):
            raise TypeError("SUBMIT expects {} values: {}".format(len(names), ", ".join(names)))
        return dict(zip(names, args, strict=False))
    missing = [n for n in names if n not in kwargs]
    extra = [k for k in kwargs if k not in names]
    if missing or extra:
        raise TypeError(
            "SUBMIT expects exactly: {} (missing: {}; unexpected: {})".format(
                ", ".join(names), ", ".join(missing) or "none", ", ".join(extra) or "none"
            )
        )
    return dict(kwargs)


def _describe(exc: BaseException) -> Frame:
    error: Frame = {
        "type": type(exc).__name__,
        "message": str(exc),
        "traceback": "",
        "lineno": None,
    }
    if isinstance(exc, SyntaxError):
        error["lineno"] = exc.lineno
        error["traceback"] = "".join(traceback.format_exception_only(type(exc), exc))
        return error
    tb = exc.__traceback__
    while tb is not None and not tb.tb_frame.f_code.co_filename.startswith("<cell-"):
        tb = tb.tb_next
    lines = traceback.format_exception(type(exc), exc, tb)
    error["traceback"] = "".join(lines)[-20_000:]
    return error


def _typed_value(value: Any, limit: int, max_value: Any) -> tuple[Frame, Frame | None]:
    """The result frame's ``value``/``value_type`` for a cell's trailing expression, and the
    cell's error when a ``str`` is too long to come back raw."""
    if value is None:
        return {"value": None, "value_type": None}, None
    if not isinstance(value, str):
        return {"value": _bounded_repr(value, limit), "value_type": "repr"}, None
    value = str.__str__(value)  # the characters themselves, whatever a subclass's __str__ says
    most = int(max_value or DEFAULT_MAX_VALUE_CHARS)
    if len(value) <= most:
        return {"value": value, "value_type": "str"}, None
    message = (
        f"the cell's value is a str of {len(value)} characters; at most {most} come back. "
        "Print a slice of it, or write it to a file under artifacts/."
    )
    return {"value": None, "value_type": None}, _describe(ValueTooLarge(message))


def _bounded_repr(value: Any, limit: int) -> str:
    try:
        text = repr(value)
    except Exception as exc:  # a broken __repr__ is the user's; report it as the value
        text = f"<repr failed: {type(exc).__name__}: {exc}>"
    if len(text) > limit:
        return text[:limit] + TRUNCATED_MARK
    return text


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _set_cpu_budget(seconds: Any) -> None:
    """Before each cell: soft RLIMIT_CPU = CPU used so far + this cell's budget (<= hard)."""
    if not seconds:
        return
    try:
        import resource

        _soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
        usage = resource.getrusage(resource.RUSAGE_SELF)
        wanted = int(usage.ru_utime + usage.ru_stime) + int(seconds) + 1
        if hard != resource.RLIM_INFINITY:
            wanted = min(wanted, hard)
        resource.setrlimit(resource.RLIMIT_CPU, (wanted, hard))
    except (ImportError, ValueError, OSError):
        return


def _redirect_std_fds() -> int:
    """Point fd 0 at /dev/null and fds 1/2 at an anonymous append-only capture file."""
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    try:
        fd = os.open(
            "/tmp",  # noqa: S108 - the sandbox's private /tmp
            os.O_TMPFILE | os.O_RDWR | os.O_APPEND,
            0o600,
        )
    except (AttributeError, OSError):
        import tempfile

        handle = tempfile.TemporaryFile()  # noqa: SIM115
        fd = os.dup(handle.fileno())
        handle.close()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    return fd


# -- marker-line transport (interpreters that own stdout, e.g. Daytona's code interpreter) --------
MARKER = "\x1eFLEET "
REPLY_POLL_MIN_S = 0.005
REPLY_POLL_MAX_S = 0.05


class MarkerChannel(Channel):
    """Frames out as ``MARKER + json`` lines on the interpreter's current stdout.

    The stream is captured at the start of each call (the interpreter may swap ``sys.stdout`` per
    execution) before user code gets its own bounded buffers; every frame is one ``write``.
    """

    def __init__(self) -> None:  # no pipes: replies arrive as files
        self.stream: Any = None
        self._lock = threading.Lock()

    def send(self, frame: Frame) -> None:
        line = MARKER + dumps(frame) + "\n"
        with self._lock:
            stream: Any = self.stream if self.stream is not None else sys.__stdout__
            stream.write(line)
            stream.flush()

    def lines(self) -> Iterator[bytes]:
        return iter(())


class FileReplyToolCalls(ToolCalls):
    """Tool calls answered by reply files ``<reply_dir>/<exec_id>-<call>.json`` the host uploads.

    The calling thread polls its own file (5 ms, backing off to 50 ms) until the reply is there
    and parses, or the cell ends (``end_cell`` wakes it with an error).
    """

    def __init__(self, channel: Channel, reply_dir: str) -> None:
        ToolCalls.__init__(self, channel)
        self.reply_dir = reply_dir

    def _reply_path(self, exec_id: str, call_id: int) -> str:
        return os.path.join(self.reply_dir, f"{exec_id}-{call_id}.json")

    def _wait(self, slot: Frame, exec_id: str, call_id: int) -> None:
        path = self._reply_path(exec_id, call_id)
        delay = REPLY_POLL_MIN_S
        while not slot["event"].wait(delay):
            reply = _read_reply(path)
            if reply is not None and reply.get("call") == call_id:
                self.resolve(reply)
            delay = min(delay * 2, REPLY_POLL_MAX_S)

    def _forget(self, exec_id: str, call_id: int) -> None:
        try:  # noqa: SIM105 - no contextlib import in the worker
            os.unlink(self._reply_path(exec_id, call_id))
        except OSError:
            pass


def _read_reply(path: str) -> Any:
    """The parsed reply file, or None while it is absent or still being written."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
        reply = json.loads(data)
    except (OSError, ValueError):
        return None
    return reply if isinstance(reply, dict) else None


class MarkerRuntime:
    """The worker driven through a code interpreter: one ``run(frame_json)`` call per cell.

    ``boot()`` writes the ``ready`` frame (plus ``reply_dir``); ``run`` writes the cell's
    ``tool_call`` frames and its one ``result`` frame as marker lines. User code runs in the
    worker's own namespace, not the interpreter's globals. No fd is redirected: output written
    to fds 1/2 directly goes wherever the interpreter sends it.
    """

    def __init__(self, reply_dir: str = "") -> None:
        if not reply_dir:
            import tempfile

            reply_dir = tempfile.mkdtemp(prefix="fleet-rt-")
        os.makedirs(reply_dir, exist_ok=True)
        self.reply_dir = reply_dir
        self.channel = MarkerChannel()
        self.worker = Worker(self.channel)
        self.worker.tools = FileReplyToolCalls(self.channel, reply_dir)
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, self.worker._on_sigint)

    def boot(self) -> None:
        self.channel.stream = sys.stdout
        frame = self.worker.ready_frame()
        frame["reply_dir"] = self.reply_dir
        self.channel.send(frame)

    def run(self, text: str) -> None:
        frame = json.loads(text)
        self.channel.stream = sys.stdout
        self.channel.send(self.worker.run_cell(frame))


def apply_rlimits(spec: str) -> None:
    """Apply the host's resource limits, JSON ``{"RLIMIT_AS": [soft, hard], ...}``, to this
    process. A hard limit above the current one is clamped to it (never looser than asked).
    Raises if any limit cannot be set or does not read back as set."""
    import resource

    wanted = json.loads(spec)
    if not isinstance(wanted, dict):
        raise ValueError("--rlimits takes a JSON object")
    for name in sorted(wanted):
        if not name.startswith("RLIMIT_"):
            raise ValueError("unknown limit " + repr(name))
        which = getattr(resource, name)
        soft, hard = (int(x) for x in wanted[name])
        current_hard = resource.getrlimit(which)[1]
        if current_hard != resource.RLIM_INFINITY:
            hard = min(hard, current_hard)
        soft = min(soft, hard)
        resource.setrlimit(which, (soft, hard))
        if resource.getrlimit(which) != (soft, hard):
            raise OSError(name + " did not take effect")


def _apply_args(args: list[str]) -> None:
    """``--rlimits JSON``: applied before the protocol starts, so before any cell can run.
    If they cannot be applied the worker refuses to run (exit 71, reason on stderr)."""
    if not args:
        return
    try:
        if len(args) != 2 or args[0] != "--rlimits":
            raise ValueError("usage: worker.py [--rlimits JSON]")
        apply_rlimits(args[1])
    except Exception as exc:
        reason = f"{type(exc).__name__}: {exc}"
        message = f"fleet worker: cannot apply rlimits ({reason}); refusing to run\n"
        os.write(2, message.encode("utf-8", "replace"))
        os._exit(RLIMITS_FAILED_EXIT)


def _die_with_parent() -> None:
    """Ask the kernel to SIGKILL this worker when its parent ends (the host, when unisolated;
    bwrap's pid 1 otherwise). Best effort: stdlib ``ctypes`` on Linux only."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def main() -> None:
    _die_with_parent()
    _apply_args(sys.argv[1:])
    rfd, wfd = os.dup(0), os.dup(1)  # private, non-inheritable copies of the protocol pipes
    os.environ.setdefault("MPLBACKEND", "Agg")
    worker = Worker(Channel(rfd, wfd))
    worker.install()
    sys.stdout = BoundedText(10_000)
    sys.stderr = BoundedText(10_000)
    worker.serve()


if __name__ == "__main__":
    main()
