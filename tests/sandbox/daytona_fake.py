"""A small fake Daytona server for contract tests of ``DaytonaSandbox`` with the real SDK.

It implements the endpoints ``daytona`` (the pinned SDK) calls: the control plane (sandboxes,
snapshots), the per-sandbox toolbox (``process/execute``, interpreter contexts, the
``process/interpreter/execute`` websocket, files bulk-upload/bulk-download/delete/folder).

Code really runs: every interpreter context is a Python subprocess speaking the same JSON-lines
protocol as Daytona's own REPL worker (stdout/stderr/error/control chunks, persistent globals,
``redirect_stdout`` per execution, SIGINT -> KeyboardInterrupt). The websocket mirrors the daemon:
on an execution timeout it sends SIGINT, kills after a grace period and closes with 4008; if the
worker process dies it closes with 1001 ("worker process ended"); otherwise 1000. Faults can be
injected: drop the next execution's websocket with 1011 after the code ran, fail the next N
control-plane calls of a kind with a status, or create a sandbox and then answer 503.

Every sandbox is a directory; absolute sandbox paths are mapped under it (``/workspace/x`` ->
``<root>/workspace/x``), except paths already inside it (those the in-sandbox code reports).
The server runs on its own thread and event loop on a random loopback port.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import sys
import threading
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiohttp import WSCloseCode, web
from aiohttp.multipart import MultipartWriter

GRACE_S = 0.5

KERNEL = r"""
import io, json, os, signal, sys, traceback
from contextlib import redirect_stderr, redirect_stdout
G = {"__name__": "__main__", "__doc__": None, "__package__": None, "__builtins__": __builtins__}
OUT = sys.__stdout__
def emit(chunk):
    OUT.write(json.dumps(chunk) + "\n")
    OUT.flush()
class Emitter(io.TextIOBase):
    def __init__(self, kind):
        self.kind, self.parts = kind, []
    def writable(self):
        return True
    def write(self, data):
        if data:
            self.parts.append(data)
            if "\n" in data or sum(map(len, self.parts)) >= 1024:
                self.flush()
        return len(data)
    def flush(self):
        if self.parts:
            text = "".join(self.parts)
            self.parts.clear()
            emit({"type": self.kind, "text": text})
def on_int(signum, frame):
    raise KeyboardInterrupt("Execution interrupted")
signal.signal(signal.SIGINT, on_int)
while True:
    try:
        line = sys.stdin.readline()
        if not line:
            break
        msg = json.loads(line)
        out, err, control, error = Emitter("stdout"), Emitter("stderr"), "completed", None
        try:
            with redirect_stdout(out), redirect_stderr(err):
                exec(compile(msg.get("code", ""), "<string>", "exec"), G)
        except KeyboardInterrupt:
            control = "interrupted"
        except SystemExit:
            pass
        except Exception as exc:
            error = {"type": "error", "name": type(exc).__name__, "value": str(exc),
                     "traceback": traceback.format_exc()}
        finally:
            out.flush()
            err.flush()
            if error:
                emit(error)
            emit({"type": "control", "text": control})
    except KeyboardInterrupt:
        continue
"""


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


@dataclass
class Context:
    id: str
    cwd: Path
    proc: asyncio.subprocess.Process | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    created: str = field(default_factory=_now)


@dataclass
class FakeSandboxRecord:
    id: str
    root: Path
    body: dict[str, Any]
    state: str = "started"
    contexts: dict[str, Context] = field(default_factory=dict)
    executions: int = 0
    drop_next: int = 0

    def local(self, path: str) -> Path:
        """Map a sandbox path to the host directory that plays it."""
        if path.startswith(str(self.root) + os.sep) or path == str(self.root):
            return Path(path)
        if not path.startswith("/"):
            path = "/workspace/" + path
        resolved = (self.root / path.lstrip("/")).resolve()
        if resolved != self.root and self.root not in resolved.parents:
            raise web.HTTPBadRequest(text="path escapes the sandbox")
        return resolved


class FakeDaytona:
    """The server; ``url`` is the API url to give the SDK. Use ``start()``/``close()``."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.sandboxes: dict[str, FakeSandboxRecord] = {}
        self.snapshots: dict[str, dict[str, Any]] = {}
        self.calls: Counter[str] = Counter()
        self.faults: dict[str, list[int]] = {}
        self.create_then_fail = 0
        self.auth_header: str | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self.port = 0

    # -- control ----------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api"

    def start(self) -> FakeDaytona:
        ready = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            loop.run_until_complete(self._serve())
            ready.set()
            loop.run_forever()

        self._thread = threading.Thread(target=run, name="fake-daytona", daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    def close(self) -> None:
        if self._loop is None:
            return
        asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)

    def add_snapshot(self, name: str, *, state: str = "active", cpu: int = 2, mem: int = 4) -> None:
        self.snapshots[name] = {
            "id": f"snap-{uuid.uuid4().hex[:8]}",
            "organizationId": "org",
            "general": False,
            "name": name,
            "imageName": "python:3.11",
            "state": state,
            "size": 1.0,
            "entrypoint": None,
            "cpu": cpu,
            "gpu": 0,
            "mem": mem,
            "disk": 8,
            "errorReason": None,
            "createdAt": _now(),
            "updatedAt": _now(),
            "lastUsedAt": None,
            "sourceSandboxId": None,
        }

    def fail_next(self, kind: str, *statuses: int) -> None:
        """The next calls of ``kind`` (e.g. 'stop', 'start', 'delete', 'get', 'create') fail."""
        self.faults.setdefault(kind, []).extend(statuses)

    def drop_next_execution(self, sandbox_id: str) -> None:
        """Run the next execution, then drop its websocket with 1011 and no output."""
        self.sandboxes[sandbox_id].drop_next += 1

    def by_label(self, **labels: str) -> list[FakeSandboxRecord]:
        return [
            s
            for s in self.sandboxes.values()
            if s.state != "destroyed"
            and all(s.body["labels"].get(k) == v for k, v in labels.items())
        ]

    # -- server -----------------------------------------------------------------------------
    async def _serve(self) -> None:
        app = web.Application(client_max_size=1 << 30)
        app.router.add_route("*", "/api/{tail:.*}", self._control)
        app.router.add_route("*", "/toolbox/{sid}/{tail:.*}", self._toolbox)
        self._runner = web.AppRunner(app, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def _shutdown(self) -> None:
        for record in self.sandboxes.values():
            await self._kill_all(record)
        if self._runner is not None:
            await self._runner.cleanup()

    def _fault(self, kind: str) -> None:
        self.calls[kind] += 1
        pending = self.faults.get(kind)
        if pending:
            raise _http_error(pending.pop(0))

    # -- control plane ----------------------------------------------------------------------
    async def _control(self, request: web.Request) -> web.StreamResponse:
        if "Authorization" in request.headers:
            self.auth_header = request.headers["Authorization"]
        parts = [p for p in request.match_info["tail"].split("/") if p]
        method = request.method
        if parts[:1] == ["snapshots"] and len(parts) == 2 and method == "GET":
            self._fault("snapshot")
            snap = self.snapshots.get(parts[1])
            if snap is None:
                raise _http_error(404)
            return web.json_response(snap)
        if parts[:1] != ["sandbox"]:
            raise _http_error(404)
        if len(parts) == 1 and method == "POST":
            return await self._create(await request.json())
        if len(parts) == 1 and method == "GET":
            self._fault("list")
            wanted = json.loads(request.query.get("labels") or "{}")
            items = [self._dto(s) for s in self.by_label(**wanted)]
            return web.json_response({"items": items, "nextCursor": None})
        record = self.sandboxes.get(parts[1])
        if record is None or (record.state == "destroyed" and method != "GET"):
            raise _http_error(404)
        if len(parts) == 2 and method == "GET":
            self._fault("get")
            return web.json_response(self._dto(record))
        if len(parts) == 2 and method == "DELETE":
            self._fault("delete")
            await self._kill_all(record)
            record.state = "destroyed"
            shutil.rmtree(record.root, ignore_errors=True)
            return web.json_response(self._dto(record))
        if len(parts) == 3 and method == "POST" and parts[2] in ("start", "stop"):
            self._fault(parts[2])
            if parts[2] == "stop":
                await self._kill_all(record)
            record.state = "started" if parts[2] == "start" else "stopped"
            return web.json_response(self._dto(record))
        if len(parts) == 3 and parts[2] == "toolbox-proxy-url":
            return web.json_response({"url": self._toolbox_url()})
        raise _http_error(404)

    async def _create(self, body: dict[str, Any]) -> web.Response:
        self._fault("create")
        snapshot = body.get("snapshot")
        if snapshot and snapshot not in self.snapshots:
            raise _http_error(400)
        if body.get("linkedSandbox") and body.get("autoDeleteInterval") != 0:
            raise _http_error(400)
        sid = f"sbx-{uuid.uuid4().hex[:12]}"
        root = self.base / sid
        (root / "workspace").mkdir(parents=True)
        (root / "tmp").mkdir()
        record = FakeSandboxRecord(sid, root, body)
        self.sandboxes[sid] = record
        if self.create_then_fail:
            self.create_then_fail -= 1
            raise _http_error(503)
        return web.json_response(self._dto(record))

    def _toolbox_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/toolbox"

    def _dto(self, record: FakeSandboxRecord) -> dict[str, Any]:
        body = record.body
        return {
            "id": record.id,
            "organizationId": "org",
            "name": body.get("name") or record.id,
            "snapshot": body.get("snapshot"),
            "user": "daytona",
            "env": body.get("env") or {},
            "labels": body.get("labels") or {},
            "public": False,
            "networkBlockAll": bool(body.get("networkBlockAll")),
            "kvm": False,
            "target": body.get("target") or "us",
            "cpu": 1,
            "gpu": 0,
            "memory": 1,
            "disk": 3,
            "state": record.state,
            "autoStopInterval": body.get("autoStopInterval"),
            "autoDeleteInterval": body.get("autoDeleteInterval"),
            "linkedSandboxId": body.get("linkedSandbox"),
            "createdAt": _now(),
            "updatedAt": _now(),
            "toolboxProxyUrl": self._toolbox_url(),
        }

    # -- toolbox ----------------------------------------------------------------------------
    async def _toolbox(self, request: web.Request) -> web.StreamResponse:
        record = self.sandboxes.get(request.match_info["sid"])
        if record is None or record.state != "started":
            raise _http_error(404 if record is None else 409)
        tail = request.match_info["tail"].strip("/")
        method = request.method
        if tail == "process/interpreter/execute":
            return await self._execute_ws(record, request)
        if tail == "process/execute" and method == "POST":
            return await self._process_exec(record, await request.json())
        if tail == "process/interpreter/context" and method == "POST":
            body = await request.json()
            ctx = Context(uuid.uuid4().hex, record.local(body.get("cwd") or "/workspace"))
            ctx.cwd.mkdir(parents=True, exist_ok=True)
            record.contexts[ctx.id] = ctx
            return web.json_response(_ctx_json(ctx))
        if tail == "process/interpreter/context" and method == "GET":
            return web.json_response({"contexts": [_ctx_json(c) for c in record.contexts.values()]})
        if tail.startswith("process/interpreter/context/") and method == "DELETE":
            ctx = record.contexts.pop(tail.rsplit("/", 1)[1], None)
            if ctx is None:
                raise _http_error(404)
            await _kill(ctx)
            return web.json_response({"message": "deleted"})
        if tail == "files/bulk-upload" and method == "POST":
            return await self._upload(record, request)
        if tail == "files/bulk-download" and method == "POST":
            return await self._download(record, request)
        if tail == "files/folder" and method == "POST":
            record.local(request.query["path"]).mkdir(parents=True, exist_ok=True)
            return web.json_response({})
        if tail == "files" and method == "DELETE":
            target = record.local(request.query["path"])
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            elif target.exists() or target.is_symlink():
                target.unlink()
            else:
                raise _http_error(404)
            return web.json_response({})
        raise _http_error(404)

    async def _process_exec(self, record: FakeSandboxRecord, body: dict[str, Any]) -> web.Response:
        self.calls["exec"] += 1
        cwd = record.local(body.get("cwd") or "/workspace")
        proc = await asyncio.create_subprocess_exec(
            "/bin/sh",
            "-c",
            body["command"],
            cwd=str(cwd),
            env=self._env(record, body.get("envs")),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        timeout = body.get("timeout") or 10
        try:
            out, _ = await asyncio.wait_for(proc.communicate(), timeout)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise _http_error(408) from None
        return web.json_response(
            {"exitCode": proc.returncode, "result": out.decode("utf-8", "replace")}
        )

    def _env(self, record: FakeSandboxRecord, extra: dict[str, str] | None) -> dict[str, str]:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(record.root / "workspace"),
            "TMPDIR": str(record.root / "tmp"),
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        env.update(record.body.get("env") or {})
        env.update(extra or {})
        return env

    async def _upload(self, record: FakeSandboxRecord, request: web.Request) -> web.Response:
        self.calls["upload"] += 1
        reader = await request.multipart()
        paths: dict[str, str] = {}
        blobs: dict[str, bytes] = {}
        while (part := await reader.next()) is not None:
            name = part.name or ""  # type: ignore[union-attr]
            data = await part.read()  # type: ignore[union-attr]
            index = name.split("]", 1)[0]
            if name.endswith(".path"):
                paths[index] = data.decode()
            elif name.endswith(".file"):
                blobs[index] = bytes(data)
        for index, path in paths.items():
            target = record.local(path)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(blobs.get(index, b""))
        return web.json_response({})

    async def _download(self, record: FakeSandboxRecord, request: web.Request) -> web.Response:
        self.calls["download"] += 1
        body = await request.json()
        writer = MultipartWriter("form-data")
        for path in body.get("paths") or []:
            target = record.local(path)
            if target.is_file():
                part = writer.append(target.read_bytes())
                part.headers["Content-Disposition"] = f'form-data; name="file"; filename="{path}"'
            else:
                part = writer.append(json.dumps({"message": "file not found", "statusCode": 404}))
                part.headers["Content-Disposition"] = f'form-data; name="error"; filename="{path}"'
        response = web.Response(body=writer)
        response.content_type = "multipart/form-data"
        response.headers["Content-Type"] = f"multipart/form-data; boundary={writer.boundary}"
        return response

    # -- the interpreter websocket ----------------------------------------------------------
    async def _execute_ws(
        self, record: FakeSandboxRecord, request: web.Request
    ) -> web.StreamResponse:
        ws = web.WebSocketResponse(max_msg_size=1 << 28)
        await ws.prepare(request)
        msg = await ws.receive_json()
        ctx_id = msg.get("contextId") or "default"
        ctx = record.contexts.get(ctx_id)
        if ctx is None and ctx_id == "default":
            ctx = record.contexts.setdefault(
                "default", Context("default", record.local("/workspace"))
            )
        if ctx is None:
            await ws.close(code=WSCloseCode.INTERNAL_ERROR, message=b"no such context")
            return ws
        record.executions += 1
        drop = record.drop_next > 0
        if drop:
            record.drop_next -= 1
        async with ctx.lock:
            code, reason = await self._run_in_context(record, ctx, msg, ws, forward=not drop)
        if drop:
            code, reason = WSCloseCode.INTERNAL_ERROR, "runner lost"
        with contextlib.suppress(Exception):
            await ws.close(code=code, message=reason.encode())
        return ws

    async def _run_in_context(
        self,
        record: FakeSandboxRecord,
        ctx: Context,
        msg: dict[str, Any],
        ws: web.WebSocketResponse,
        *,
        forward: bool,
    ) -> tuple[int, str]:
        proc = await self._kernel(record, ctx)
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write((json.dumps({"code": msg.get("code", "")}) + "\n").encode())
        await proc.stdin.drain()
        timeout = msg.get("timeout") or 0
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout if timeout else None
        interrupted = killed = False
        while True:
            wait = None if deadline is None else max(deadline - loop.time(), 0.0)
            try:
                line = await asyncio.wait_for(proc.stdout.readline(), wait)
            except TimeoutError:
                if not interrupted:
                    interrupted = True
                    with contextlib.suppress(ProcessLookupError):
                        proc.send_signal(signal.SIGINT)
                    deadline = loop.time() + GRACE_S
                else:
                    killed = True
                    await _kill(ctx)
                    return 4008, ""
                continue
            if not line:
                await proc.wait()
                ctx.proc = None
                if killed:
                    return 4008, ""
                return WSCloseCode.GOING_AWAY, "worker process ended"
            try:
                chunk = json.loads(line)
            except ValueError:
                continue  # like the daemon: non-JSON lines on the worker's stdout are dropped
            if chunk.get("type") == "control":
                if chunk.get("text") == "interrupted":
                    return 4008, ""
                return WSCloseCode.OK, ""
            if forward and not ws.closed:
                with contextlib.suppress(Exception):
                    await ws.send_str(json.dumps(chunk))

    async def _kernel(self, record: FakeSandboxRecord, ctx: Context) -> asyncio.subprocess.Process:
        if ctx.proc is not None and ctx.proc.returncode is None:
            return ctx.proc
        ctx.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-u",
            "-c",
            KERNEL,
            cwd=str(ctx.cwd),
            env=self._env(record, None),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            limit=1 << 27,
            start_new_session=True,
        )
        return ctx.proc

    async def _kill_all(self, record: FakeSandboxRecord) -> None:
        for ctx in list(record.contexts.values()):
            await _kill(ctx)
        record.contexts.clear()


def _ctx_json(ctx: Context) -> dict[str, Any]:
    return {
        "id": ctx.id,
        "cwd": str(ctx.cwd),
        "language": "python",
        "active": ctx.proc is not None,
        "createdAt": ctx.created,
    }


async def _kill(ctx: Context) -> None:
    proc = ctx.proc
    ctx.proc = None
    if proc is None or proc.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    await proc.wait()


_ERRORS: dict[int, type[web.HTTPException]] = {
    400: web.HTTPBadRequest,
    401: web.HTTPUnauthorized,
    403: web.HTTPForbidden,
    404: web.HTTPNotFound,
    408: web.HTTPRequestTimeout,
    409: web.HTTPConflict,
    429: web.HTTPTooManyRequests,
    500: web.HTTPInternalServerError,
    502: web.HTTPBadGateway,
    503: web.HTTPServiceUnavailable,
}


def _http_error(status: int) -> web.HTTPException:
    body = json.dumps({"statusCode": status, "message": f"fake error {status}"})
    return _ERRORS[status](text=body, content_type="application/json")
