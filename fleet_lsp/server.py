"""The fleet-lsp language server: pygls 2 + lsprotocol, typed ``fleet/*`` requests over the
``FleetRuntime``.

Startup is cheap on purpose: this module imports pygls, lsprotocol, attrs and the tiny
``fleet_core.errors``/``workspace`` modules only. The runtime (pydantic, SQLAlchemy, the store's
migrations) is opened in the background once the client sends ``initialized`` (or on the first
``fleet/*`` request), so ``initialize`` is answered as fast as a bare pygls server. DSPy and
MLflow load only when a Turn needs them.

State lives on the :class:`FleetServer` object (no module-level mutable state); create one with
:func:`create_server`. What a feature runs (Turns, optimizations, trace documents) is held by that
feature's own object, which the server makes and asks to stop at ``shutdown``. Handlers return
typed replies; :meth:`FleetServer.call` serializes them, once (``protocol.to_wire``).
"""

from __future__ import annotations

import asyncio
import contextvars
import faulthandler
import logging
import re
import sys
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol

import attrs
from lsprotocol import types
from pygls.capabilities import get_capability
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer
from pygls.protocol import JsonRPCNotification, LanguageServerProtocol, lsp_method

from fleet_core.errors import FleetError
from fleet_lsp import __version__, transport
from fleet_lsp.features.optimize import OptimizationRuns
from fleet_lsp.features.traces import TraceDocuments
from fleet_lsp.features.turns import EditorTurns
from fleet_lsp.protocol import (
    COMMANDS,
    FEATURES,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    METHODS,
    NOTIFY_SESSION_CHANGE,
    PARSE_ERROR,
    PROTOCOL_VERSION,
    REQUEST_CANCELLED,
    SERVER_NAME,
    SERVER_NOT_INITIALIZED,
    URI_SCHEME,
    InitializationOptions,
    ParamsError,
    changed_settings,
    error_code,
    parse,
    to_wire,
)

if TYPE_CHECKING:
    from fleet_core.api import FleetRuntime
    from fleet_core.config import EffectiveConfig

log = logging.getLogger("fleet_lsp")
Handler = Callable[["FleetServer", Any], Awaitable[Any]]
MAX_INTERNAL_MESSAGE = 500
MAX_EARLY_CANCELS = 64  # progress cancels kept for Turns whose run request is still starting
#: ``data.kind`` for the JSON-RPC errors pygls sends without data.
STANDARD_KINDS = {
    PARSE_ERROR: "ParseError",
    INVALID_REQUEST: "InvalidRequest",
    METHOD_NOT_FOUND: "MethodNotFound",
    INVALID_PARAMS: "InvalidParams",
    REQUEST_CANCELLED: "RequestCancelled",
}


@attrs.define
class FleetRequestMessage:
    """Envelope for ``fleet/*`` requests: params stay raw JSON until :func:`parse` checks them
    (pygls would otherwise hand out untyped namedtuples, or fail without a useful message)."""

    id: int | str
    method: str
    params: Any = None
    jsonrpc: str = "2.0"


_WORK_DONE_TOKEN: contextvars.ContextVar[int | str | None] = contextvars.ContextVar(
    "fleet_work_done_token", default=None
)


class FleetProtocol(LanguageServerProtocol):
    """Typed ``fleet/*`` envelopes, the 3.18 content capability, command progress tokens, the
    LSP lifecycle rules, readable params errors, and no traceback in any error."""

    initialize_received = False
    shutdown_received = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._early: OrderedDict[int | str, None] = OrderedDict()

    def get_message_type(self, method: str) -> Any:  # type: ignore[override]
        if method in METHODS:
            return FleetRequestMessage
        return super().get_message_type(method)

    def structure_message(self, data: dict[str, Any]) -> Any:
        """pygls' structuring, with a readable -32602 (pygls logs a traceback and raises a bare
        "Invalid Params", which its reader then dropped)."""
        method = data.get("method")
        if not isinstance(method, str) or "error" in data:
            return super().structure_message(data)
        default = FleetRequestMessage if "id" in data else JsonRPCNotification
        kind = self.get_message_type(method) or default
        try:
            return self._converter.structure(data, kind)
        except Exception as exc:  # cattrs' validation errors, whatever the shape
            raise JsonRpcInvalidParams(
                f"{method}: invalid params: {describe_structure_error(exc)}",
                data={"kind": "InvalidParams", "method": method},
            ) from None

    def handle_message(self, message: Any) -> None:
        method = getattr(message, "method", None)
        if isinstance(method, str) and not self._lifecycle_allows(message, method):
            return
        super().handle_message(message)

    def _lifecycle_allows(self, message: Any, method: str) -> bool:
        """LSP: before ``initialize`` requests get -32002 and notifications are dropped; after
        ``shutdown`` only ``exit`` is served (pygls dropped requests, so clients waited)."""
        request_id = getattr(message, "id", None)
        is_request = hasattr(message, "id")
        refusal: tuple[int, str, str] | None = None
        if method == types.EXIT:
            return True
        if self.shutdown_received:
            refusal = (
                INVALID_REQUEST,
                "ShuttingDown",
                f"{method}: the server is shutting "
                "down ('shutdown' was received); only 'exit' is accepted now",
            )
        elif not self.initialize_received:
            if method == types.INITIALIZE and is_request:
                self.initialize_received = True
                return True
            refusal = (
                SERVER_NOT_INITIALIZED,
                "ServerNotInitialized",
                f"{method}: the server is not initialized; send 'initialize' first",
            )
        elif method == types.INITIALIZE:
            refusal = (
                INVALID_REQUEST,
                "InvalidRequest",
                "initialize: the server is already initialized ('initialize' is sent once)",
            )
        elif method == types.SHUTDOWN and is_request:
            self.shutdown_received = True
        if refusal is None:
            return True
        code, kind, text = refusal
        if is_request:
            error = types.ResponseError(code=code, message=text, data={"kind": kind})
            self._send_response(request_id, error=error)
        else:
            log.debug("dropped a %s notification: %s", method, kind)
        return False

    def _send_response(
        self, msg_id: Any, result: Any | None = None, error: types.ResponseError | None = None
    ) -> None:
        super()._send_response(msg_id, result, None if error is None else public_error(error))

    @lsp_method(types.INITIALIZE)
    def lsp_initialize(
        self, params: types.InitializeParams
    ) -> Generator[Any, Any, types.InitializeResult]:
        result: types.InitializeResult = yield from super().lsp_initialize(params)
        caps = result.capabilities
        workspace = caps.workspace or types.WorkspaceOptions()
        workspace.text_document_content = types.TextDocumentContentOptions(schemes=[URI_SCHEME])
        caps.workspace = workspace
        if caps.execute_command_provider is not None:
            caps.execute_command_provider.work_done_progress = True
        caps.experimental = {
            "fleet": {"protocolVersion": PROTOCOL_VERSION, "features": list(FEATURES)}
        }
        return result

    @lsp_method(types.WINDOW_WORK_DONE_PROGRESS_CANCEL)
    def lsp_work_done_progress_cancel(
        self, params: types.WorkDoneProgressCancelParams
    ) -> Generator[Any, Any, None]:
        """A cancel for a token no Turn holds yet is kept (the last few, bounded): the
        notification can overtake the handler of the ``fleet/turn/run`` that brings the token,
        and that Turn applies it as it starts (``take_early_cancel``)."""
        if params.token not in self.progress.tokens:
            self._early[params.token] = None
            while len(self._early) > MAX_EARLY_CANCELS:
                self._early.popitem(last=False)
            return
        yield from super().lsp_work_done_progress_cancel(params)

    def take_early_cancel(self, token: int | str) -> bool:
        """Whether a cancel for ``token`` arrived before any Turn held it (forgets it)."""
        return self._early.pop(token, False) is None

    @lsp_method(types.WORKSPACE_EXECUTE_COMMAND)
    def lsp_workspace__execute_command(
        self, params: types.ExecuteCommandParams
    ) -> Generator[Any, Any, Any]:
        # Command handlers never see the token otherwise; the handler's task copies this context.
        _WORK_DONE_TOKEN.set(params.work_done_token)
        return (yield from super().lsp_workspace__execute_command(params))


@dataclass
class ClientInfo:
    """What the client told us at ``initialize``."""

    name: str = "unknown"
    protocol_version: int = PROTOCOL_VERSION
    turn_events: bool = False
    settings: dict[str, Any] = field(default_factory=dict)
    work_done_progress: bool = False
    show_document: bool = False
    text_document_content: bool = False


class Feature(Protocol):
    """A feature's own state (what it runs); the server asks it to stop at ``shutdown``."""

    async def stop(self) -> None: ...


class FleetServer(LanguageServer):
    """A pygls server whose state (runtime, client, the features' state) lives on the
    instance."""

    def __init__(self) -> None:
        super().__init__(SERVER_NAME, __version__, protocol_cls=FleetProtocol)
        self.client = ClientInfo()
        self._option_problems: list[str] = []  # reported once the client is initialized
        self.handlers: dict[str, Handler] = {}
        self._runtime: FleetRuntime | None = None
        self._runtime_task: asyncio.Task[FleetRuntime] | None = None
        self.editor_turns = EditorTurns()
        self.optimization_runs = OptimizationRuns()
        self.trace_documents = TraceDocuments(opened_runtime=lambda: self._runtime)
        self.features: tuple[Feature, ...] = (
            self.editor_turns,
            self.optimization_runs,
            self.trace_documents,
        )
        self.max_message_bytes = (
            transport.DEFAULT_MAX_MESSAGE_BYTES
        )  # the configured cap, once read
        self.exit_code = 0  # the process's, when serving ends
        self.exit_grace_seconds: float | None = transport.EXIT_GRACE_SECONDS
        self.frame_stall_seconds: float | None = transport.FRAME_STALL_SECONDS

    # transport --------------------------------------------------------------------------------

    def start_io(self, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> None:
        """Serve over stdio with :mod:`fleet_lsp.transport` (bounded frames, every error
        answered); sets :attr:`exit_code`. Without streams given, the process's stdin and
        stdout become the protocol's alone (``transport.claim_stdio``: other writes to stdout
        go to stderr)."""
        if stdin is None and stdout is None:
            stdin, stdout = transport.claim_stdio()
        self.exit_code = transport.serve_stdio(
            self.protocol,
            stdin or sys.stdin.buffer,
            stdout or sys.stdout.buffer,
            self._message_limit,
            stall=self.frame_stall_seconds,
            exit_grace=self.exit_grace_seconds,
        )

    def start_tcp(self, host: str, port: int) -> None:
        """Serve one TCP client (others are refused); sets :attr:`exit_code`."""
        self.exit_code = transport.serve_tcp(
            self.protocol,
            host,
            port,
            self._message_limit,
            stall=self.frame_stall_seconds,
            exit_grace=self.exit_grace_seconds,
        )

    def _message_limit(self) -> int:
        return self.max_message_bytes

    # registration -----------------------------------------------------------------------------

    def fleet_method(self, method: str) -> Callable[[Handler], Handler]:
        """Register a typed ``fleet/*`` handler ``async (server, params) -> result``."""
        if method not in METHODS:
            raise KeyError(f"{method} is not in fleet_lsp.protocol.METHODS")

        def decorator(fn: Handler) -> Handler:
            self.handlers[method] = fn

            async def request(raw: Any) -> Any:
                params = raw.params if isinstance(raw, FleetRequestMessage) else raw
                return await self.call(method, params)

            self.feature(method)(request)
            return fn

        return decorator

    def register_commands(self) -> None:
        for command, method in COMMANDS.items():
            self.command(command)(self._command_handler(command, method))

    def _command_handler(self, command: str, method: str) -> Callable[..., Awaitable[Any]]:
        async def run(*args: Any) -> Any:
            if len(args) > 1:
                raise JsonRpcInvalidParams(
                    f"{command}: takes one object argument, got {len(args)} arguments"
                )
            return await self.call(method, args[0] if args else {}, command=command)

        return run

    async def call(self, method: str, raw: Any, *, command: str | None = None) -> Any:
        """Validate ``raw`` into the method's params, run its handler and answer its reply as
        JSON (the one place replies are serialized), mapping errors."""
        name = command or method
        try:
            params: Any = parse(METHODS[method], raw)
        except ParamsError as exc:
            raise JsonRpcInvalidParams(
                f"{name}: {exc}", data={"kind": "InvalidParams", "method": name}
            ) from None
        try:
            reply = await self.handlers[method](self, params)
        except FleetError as exc:
            raise rpc_error(exc) from None
        return to_wire(reply)

    # runtime ----------------------------------------------------------------------------------

    def start_runtime(self) -> None:
        """Open the runtime in the background (after ``initialize`` was answered)."""
        if self._runtime is None and (self._runtime_task is None or self._runtime_task.done()):
            if self._runtime_task is not None and self._runtime_task.exception() is None:
                return
            self._runtime_task = asyncio.ensure_future(self._open_runtime())
            self._runtime_task.add_done_callback(_log_open_failure)

    @property
    def runtime_opened(self) -> FleetRuntime | None:
        """The runtime if it is open already (never opens it)."""
        return self._runtime

    async def runtime(self) -> FleetRuntime:
        if self._runtime is not None:
            return self._runtime
        self.start_runtime()
        assert self._runtime_task is not None
        return await asyncio.shield(self._runtime_task)

    async def _open_runtime(self) -> FleetRuntime:
        config = await asyncio.to_thread(self.load_config)
        from fleet_core.api import FleetRuntime
        from fleet_core.api.scripted import provider_from_environment

        # None: the configured models (runtime.reconfigure follows changes); scripted models
        # when the documented FLEET_TEST_SCRIPT hook is set (fleet_core.api.scripted)
        provider: Any = await asyncio.to_thread(provider_from_environment)
        runtime = await FleetRuntime.open(config, lm_provider=provider)
        self._runtime = runtime
        return runtime

    def load_config(self) -> EffectiveConfig:
        from fleet_core.config import load_config

        config = load_config(overrides=self.client.settings or None)
        self.max_message_bytes = config.settings.server.max_message_bytes
        return config

    async def apply_settings(self, settings: dict[str, Any]) -> None:
        """New client settings: validate, then ``runtime.reconfigure`` (the next Turns use them;
        a state directory change needs a restart and is refused with a warning)."""
        previous = self.client.settings
        self.client.settings = settings
        try:
            config = await asyncio.to_thread(self.load_config)
        except FleetError as exc:
            self.client.settings = previous
            self._show(types.MessageType.Error, f"Fleet settings ignored: {exc}")
            return
        if self._runtime is None:
            return  # the runtime opens with self.load_config(), so with these settings
        try:
            notes = await self._runtime.reconfigure(config)
        except FleetError as exc:
            self._show(types.MessageType.Warning, f"Fleet: {exc.message}")
            return
        for note in notes:
            self._show(types.MessageType.Warning, f"Fleet: {note}")

    def report_option_problems(self) -> None:
        """Warn of each initialization option ignored because it was invalid (once)."""
        for problem in self._option_problems:
            self._show(
                types.MessageType.Warning, f"Fleet ignored an initialization option: {problem}"
            )
        self._option_problems = []

    def _show(self, kind: types.MessageType, message: str) -> None:
        self.window_show_message(types.ShowMessageParams(type=kind, message=message))

    # client helpers ---------------------------------------------------------------------------

    def command_work_done_token(self) -> int | str | None:
        return _WORK_DONE_TOKEN.get()

    def session_changed(self, session_id: str, change: str) -> None:
        self.protocol.notify(NOTIFY_SESSION_CHANGE, {"sessionId": session_id, "change": change})

    def on_initialize(self, params: types.InitializeParams) -> None:
        """Read the client's options (an invalid one is ignored and reported once the client
        is initialized) and capabilities."""
        options, self._option_problems = InitializationOptions.read(
            _plain(params.initialization_options)
        )
        caps = params.capabilities
        self.client = ClientInfo(
            name=options.client or (params.client_info.name if params.client_info else "unknown"),
            protocol_version=options.protocol_version,
            turn_events=options.turn_events,
            settings=options.settings,
            work_done_progress=bool(get_capability(caps, "window.work_done_progress", False)),
            show_document=bool(get_capability(caps, "window.show_document.support", False)),
            text_document_content=get_capability(caps, "workspace.text_document_content", None)
            is not None,
        )


def rpc_error(exc: FleetError) -> JsonRpcException:
    """A FleetError as a JSON-RPC error: documented code, ``data.kind`` and the message."""
    code = error_code(exc.kind)
    data: dict[str, Any] = {"kind": exc.kind}
    for key, value in exc.data.items():
        if (
            isinstance(value, str | int | float | bool)
            or value is None
            or (isinstance(value, list) and all(isinstance(v, str) for v in value))
        ):
            data[key] = value
    if code == INVALID_PARAMS:
        return JsonRpcInvalidParams(exc.message, data=data)
    return JsonRpcException(exc.message, code=code, data=data)


def public_error(error: types.ResponseError) -> types.ResponseError:
    """No traceback leaves the server: pygls puts one in ``data`` for unhandled exceptions
    (``JsonRpcInternalError.of``); the log has it, the client gets a one-line message."""
    data = error.data
    if data is None and error.code in STANDARD_KINDS:  # pygls' own errors: add the kind
        return types.ResponseError(
            code=error.code, message=error.message, data={"kind": STANDARD_KINDS[error.code]}
        )
    if error.code != INTERNAL_ERROR and not (isinstance(data, dict) and "traceback" in data):
        return error
    if isinstance(data, dict) and isinstance(data.get("kind"), str) and "traceback" not in data:
        return error
    first = (error.message or "").strip().splitlines()[:1]
    detail = first[0][:MAX_INTERNAL_MESSAGE] if first else "unexpected error"
    return types.ResponseError(
        code=error.code,
        message=f"Internal error in fleet-lsp: {detail} (the server log has the details)",
        data={"kind": "InternalError"},
    )


def describe_structure_error(exc: Exception) -> str:
    """cattrs' validation errors as short ``problem @ $.path`` lines."""
    try:
        from cattrs import transform_error

        lines = transform_error(exc, path="$")
    except Exception:  # not a cattrs error
        lines = [f"{type(exc).__name__}: {exc}"]
    lines = [_camel_path(line) for line in lines]
    text = "; ".join(lines[:3]) + ("; ..." if len(lines) > 3 else "")
    return text[:MAX_INTERNAL_MESSAGE]


def _camel_path(line: str) -> str:
    """``... @ $.params.text_document.uri`` as the wire names it: ``$.params.textDocument.uri``."""
    problem, sep, path = line.rpartition(" @ ")
    if not sep:
        return line
    return problem + sep + re.sub(r"_([a-z])", lambda m: m.group(1).upper(), path)


def _plain(value: Any) -> Any:
    """lsprotocol/pygls may hand ``LSPAny`` values over as namedtuples; make them JSON again."""
    if isinstance(value, tuple) and hasattr(value, "_asdict"):
        return {k: _plain(v) for k, v in value._asdict().items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _log_open_failure(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("cannot open the Fleet runtime: %s", task.exception())


_UNKNOWN_CANCEL = "Cancel notification for unknown message id"


class _QuietExpectedErrors(logging.Filter):
    """pygls logs every error response with a traceback; expected ones are not news."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name.startswith("pygls") and str(record.msg).startswith(_UNKNOWN_CANCEL):
            # a cancel that lost the race with its answer (a flood of them is no news): DEBUG
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            return logging.getLogger().isEnabledFor(logging.DEBUG)
        exc = record.exc_info[1] if record.exc_info else None
        expected = isinstance(exc, JsonRpcException) and (
            exc.code == INVALID_PARAMS or -32099 <= exc.code <= -32050
        )
        return not expected


def create_server() -> FleetServer:
    """A fully registered server (features, commands, lifecycle hooks)."""
    from fleet_lsp.features import register_all

    server = FleetServer()

    @server.feature(types.INITIALIZE)
    def initialize(ls: FleetServer, params: types.InitializeParams) -> None:
        ls.on_initialize(params)

    @server.feature(types.INITIALIZED)
    def initialized(ls: FleetServer, params: types.InitializedParams) -> None:
        ls.report_option_problems()
        if ls.client.protocol_version != PROTOCOL_VERSION:
            ls.window_log_message(
                types.LogMessageParams(
                    type=types.MessageType.Warning,
                    message=(
                        f"fleet-lsp speaks protocol {PROTOCOL_VERSION}; the client asked "
                        f"for {ls.client.protocol_version}; check the client and server versions."
                    ),
                )
            )
        ls.start_runtime()

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(
        ls: FleetServer, params: types.DidChangeConfigurationParams
    ) -> None:
        settings = changed_settings(_plain(params.settings))
        if settings is not None:
            await ls.apply_settings(settings)

    @server.feature(types.SHUTDOWN)
    async def shutdown(ls: FleetServer, *args: Any) -> None:
        for feature in ls.features:  # Turns are cancelled, runs flagged, then exports stopped
            await feature.stop()

    register_all(server)
    server.register_commands()
    return server


def configure_logging(level: int = logging.WARNING) -> None:
    # a native crash (SIGSEGV, SIGBUS, SIGFPE, SIGABRT, SIGILL in an extension) leaves every
    # thread's Python stack on stderr, the editor's log: file, line and function names only
    faulthandler.enable()
    handler = logging.StreamHandler()  # stderr: stdout is the protocol stream
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(_QuietExpectedErrors())
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(level)
    # pygls logs every message it sends (answers, artifact text) and the initialize params at
    # INFO: that is traffic, shown only at DEBUG (fleet_lsp.transport logs its own at DEBUG).
    logging.getLogger("pygls").setLevel(
        logging.DEBUG if level <= logging.DEBUG else logging.WARNING
    )
