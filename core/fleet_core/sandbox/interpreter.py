"""A DSPy ``CodeInterpreter`` over any :class:`~fleet_core.sandbox.base.Sandbox`.

``dspy.RLM`` and ``dspy.Flex`` call ``execute`` synchronously from the thread that runs the
program; the sandbox is async, so calls cross into its event loop through an anyio
``BlockingPortal`` (the runtime's, or a private one). dspy is imported lazily.

What ``execute`` returns, like dspy's own interpreters: ``FinalOutput`` after ``SUBMIT``; a
cell's trailing ``str`` *raw* (the sandbox sends the string itself, never its repr), so dspy.Flex's
JSON result comes back verbatim; ``None`` when nothing was printed or returned.

Differences from dspy's own interpreters (on purpose):
- printed output is kept when the cell ends with an expression (both are shown, as text);
- output printed before an exception is kept in the ``CodeExecutionError`` message;
- host tools accept positional arguments (mapped to keywords through the tool's signature);
- tool calls run in a copy of the caller's contextvars, so ``dspy.context`` and tracing spans
  carry into ``llm_query``/``spawn_agent`` even when several threads call at once.

Like dspy's own interpreters, ``start``/``execute``/``invoke_tool``/``shutdown`` go through
``dspy.utils.callback.with_callbacks`` (applied on first use, since dspy is imported lazily), so
``on_interpreter_{startup,execute,tool_call,shutdown}_{start,end}`` reach the global
(``dspy.settings.callbacks``) and per-instance (``callbacks=``) callbacks. Every host tool call
from sandbox code is an ``invoke_tool`` call, nested under its ``execute``.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import shutil
import tempfile
import threading
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from anyio.from_thread import BlockingPortal, start_blocking_portal

from fleet_core.config import SandboxSettings
from fleet_core.errors import InvalidInput
from fleet_core.sandbox.base import (
    ExecutionResult,
    Sandbox,
    SandboxLimits,
    SandboxSpec,
    ToolFunction,
    ToolPolicy,
)
from fleet_core.sandbox.errors import ExecutionTimeoutError, SandboxError

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

EXECUTION_INSTRUCTIONS = (
    "Code runs in CPython inside an isolated sandbox (no network, no host files) as a persistent "
    "REPL: variables, imports and functions persist between steps. The working directory is the "
    "workspace (/workspace): inputs are under files/ (read-only); write outputs under artifacts/ "
    "(e.g. artifacts/report.csv). Large inputs stay in files: read them with code instead of "
    "asking for their content. Host tools and SUBMIT are global functions: call them with "
    "keyword arguments (positional ones are mapped too); arguments and results must be "
    "JSON-compatible. Printed output and the value of a final expression are both shown; long "
    "output is cut, and a step that runs too long is interrupted (its variables are kept)."
)
"""The one description of the sandbox the model sees (the engine appends only its own helpers)."""


def _with_dspy_callbacks(method: F) -> F:
    """``dspy.utils.callback.with_callbacks(method)``, built on the first call (dspy is imported
    lazily) and cached. Without any callback configured it costs one list concatenation."""
    wrapped: Callable[..., Any] | None = None

    def resolve() -> Callable[..., Any]:
        nonlocal wrapped
        if wrapped is None:
            from dspy.utils.callback import with_callbacks  # type: ignore[import-untyped, unused-ignore]

            wrapped = with_callbacks(method)
        return wrapped

    if inspect.iscoroutinefunction(method):

        @functools.wraps(method)
        async def call_async(self: Any, *args: Any, **kwargs: Any) -> Any:
            return await resolve()(self, *args, **kwargs)

        return call_async  # type: ignore[return-value]

    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        return resolve()(self, *args, **kwargs)

    return call  # type: ignore[return-value]


class SandboxInterpreter:
    """DSPy ``CodeInterpreter`` protocol over a :class:`Sandbox` (one per RLM/Flex forward)."""

    execution_instructions: ClassVar[str] = EXECUTION_INSTRUCTIONS

    def __init__(
        self,
        sandbox: Sandbox,
        *,
        tools: Mapping[str, Callable[..., Any]] | None = None,
        output_fields: list[dict[str, Any]] | None = None,
        portal: BlockingPortal | None = None,
        owns_sandbox: bool = False,
        cell_timeout: float | None = None,
        policy: ToolPolicy | None = None,
        on_shutdown: Callable[[], None] | None = None,
        callbacks: list[Any] | None = None,
    ) -> None:
        self.tools: dict[str, Callable[..., Any]] = dict(tools or {})
        self.callbacks: list[Any] = list(callbacks or [])  # dspy BaseCallback instances
        self.output_fields = output_fields
        self._sandbox = sandbox
        self._portal = portal
        self._portal_cm: AbstractContextManager[BlockingPortal] | None = None
        self._owns_sandbox = owns_sandbox
        self.cell_timeout = cell_timeout
        """The next cell's timeout (None: the sandbox's limit); the Turn sets it per cell."""
        self.policy = policy
        """Called before every tool call of a cell with the tool's name; raise to refuse it."""
        self.host_code = False
        """The next cell is the host's own code (a bootstrap cell, no model code): a sandbox that
        accepts ``host_code`` may skip work only model code needs (the Turn sets it per cell)."""
        self._on_shutdown = on_shutdown
        self._lock = threading.Lock()
        self._started = False
        self._broken: str | None = None
        self._ended = False
        self.last_result: ExecutionResult | None = None
        """The last cell's ``ExecutionResult`` (e.g. the output a submitting cell printed)."""

    @property
    def sandbox(self) -> Sandbox:
        return self._sandbox

    @_with_dspy_callbacks
    def start(self) -> None:
        """Start the sandbox once; after a failure raise instead of silently restarting."""
        errors = _dspy_errors()
        if self._ended:
            raise errors.CodeInterpreterError("This interpreter was shut down")
        if self._broken:
            raise errors.CodeInterpreterError(self._broken)
        if self._started:
            return
        try:
            self._call(self._sandbox.start)
        except SandboxError as exc:
            self._broken = f"{exc.kind}: {exc}"
            raise errors.CodeInterpreterError(self._broken) from exc
        self._started = True

    @_with_dspy_callbacks
    def execute(self, code: str, variables: dict[str, Any] | None = None) -> Any:
        errors = _dspy_errors()
        if not isinstance(code, str):
            raise errors.CodeInterpreterError("code must be a string")
        if not self._lock.acquire(blocking=False):
            raise errors.CodeInterpreterError("This interpreter already has a running execution")
        try:
            self.start()
            self.last_result = None
            result = self._run(code, variables or {})
            self.last_result = result
        finally:
            self._lock.release()
        return _to_dspy_output(result)

    __call__ = execute

    def _run(self, code: str, variables: dict[str, Any]) -> ExecutionResult:
        errors = _dspy_errors()
        context = contextvars.copy_context()
        bridge = {name: bind_tool(fn, context, via=(self, name)) for name, fn in self.tools.items()}
        run = functools.partial(
            self._sandbox.execute,
            code,
            variables=variables,
            tools=bridge,
            output_fields=_field_specs(self.output_fields),
            timeout=self.cell_timeout,
            policy=self.policy,
            **({"host_code": True} if self.host_code and _accepts_host_code(self._sandbox) else {}),
        )
        try:
            return self._call(run)
        except ExecutionTimeoutError as exc:
            if exc.state_preserved:
                raise errors.CodeExecutionError(_timeout_text(exc)) from exc
            self._broken = f"{exc.kind}: {exc}"
            raise errors.CodeInterpreterError(self._broken) from exc
        except InvalidInput as exc:
            raise errors.CodeInterpreterError(str(exc)) from exc
        except SandboxError as exc:
            self._broken = f"{exc.kind}: {exc}"
            raise errors.CodeInterpreterError(self._broken) from exc

    @_with_dspy_callbacks
    def invoke_tool(self, tool_name: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """Run one host tool for sandbox code (a sync tool, in a worker thread)."""
        return self._tool(tool_name)(*args, **kwargs)

    async def _invoke_tool_async(
        self, tool_name: str, args: list[Any], kwargs: dict[str, Any]
    ) -> Any:
        return await self._tool(tool_name)(*args, **kwargs)

    _invoke_tool_async.__name__ = "invoke_tool"  # with_callbacks maps hooks by method name
    invoke_tool_async = _with_dspy_callbacks(_invoke_tool_async)

    def _tool(self, tool_name: str) -> Callable[..., Any]:
        function = self.tools.get(tool_name)
        if function is None:
            raise _dspy_errors().CodeInterpreterError(f"Unknown tool: {tool_name}")
        return function

    @_with_dspy_callbacks
    def shutdown(self) -> None:
        if self._ended:
            return
        self._ended = True
        try:
            if self._owns_sandbox:
                self._call(self._sandbox.destroy)
        finally:
            if self._portal_cm is not None:
                self._portal_cm.__exit__(None, None, None)
                self._portal_cm = self._portal = None
            if self._on_shutdown is not None:
                self._on_shutdown()

    def __enter__(self) -> SandboxInterpreter:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.shutdown()

    def _call(self, function: Callable[[], Awaitable[T]]) -> T:
        if self._portal is None:
            self._portal_cm = start_blocking_portal()
            self._portal = self._portal_cm.__enter__()
        return self._portal.call(function)


def bind_tool(
    function: Callable[..., Any],
    context: contextvars.Context,
    *,
    via: tuple[SandboxInterpreter, str] | None = None,
) -> ToolFunction:
    """Wrap a host tool: positional args become keywords, each call runs in a context copy.
    ``via=(interpreter, name)`` routes the call through ``interpreter.invoke_tool`` (callbacks)."""
    signature = _signature(function)
    if inspect.iscoroutinefunction(function):

        async def call_async(*args: Any, **kwargs: Any) -> Any:
            args, kwargs = _as_keywords(signature, args, kwargs)
            if via is not None:
                interpreter, name = via
                coro = interpreter.invoke_tool_async(name, list(args), kwargs)
            else:
                coro = function(*args, **kwargs)
            return await asyncio.create_task(coro, context=context.copy())

        return call_async

    def call(*args: Any, **kwargs: Any) -> Any:
        args, kwargs = _as_keywords(signature, args, kwargs)
        if via is not None:
            interpreter, name = via
            return context.copy().run(interpreter.invoke_tool, name, list(args), kwargs)
        return context.copy().run(function, *args, **kwargs)

    return call


def _signature(function: Callable[..., Any]) -> inspect.Signature | None:
    try:
        return inspect.signature(function)
    except (TypeError, ValueError):
        return None


def _as_keywords(
    signature: inspect.Signature | None, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Map positional arguments onto parameter names (RLM's tool shims take keywords only)."""
    if signature is None or not args:
        return args, kwargs
    kinds = {p.kind for p in signature.parameters.values()}
    if kinds & {inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.POSITIONAL_ONLY}:
        return args, kwargs
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError:
        return args, kwargs
    named: dict[str, Any] = {}
    for name, value in bound.arguments.items():
        if signature.parameters[name].kind is inspect.Parameter.VAR_KEYWORD:
            named.update(value)
        else:
            named[name] = value
    return (), named


def _field_specs(fields: list[dict[str, Any]] | None) -> list[dict[str, str]] | None:
    if fields is None:
        return None
    return [{k: str(v) for k, v in f.items() if k in ("name", "type")} for f in fields]


def _to_dspy_output(result: ExecutionResult) -> Any:
    """What ``execute`` returns: ``FinalOutput``, the raw ``str`` value of a cell that printed
    nothing (verbatim, e.g. dspy.Flex's JSON), or the shown text (output, then the value)."""
    errors = _dspy_errors()
    if result.final is not None:
        return errors.FinalOutput(result.final)
    if result.error is not None:
        if result.error.type == "SyntaxError":
            raise SyntaxError(result.error.traceback.strip() or result.error.message)
        raise errors.CodeExecutionError(_error_text(result))
    printed = _printed_text(result)
    if result.value_type == "str" and not printed:
        return result.value
    value = result.value
    return "\n".join(p for p in (printed, value) if p) or None


def _printed_text(result: ExecutionResult) -> str:
    parts = [result.stdout.rstrip("\n")]
    if result.stdout_truncated:
        parts.append("[stdout truncated]")
    if result.stderr:
        parts.append(result.stderr.rstrip("\n"))
    if result.stderr_truncated:
        parts.append("[stderr truncated]")
    return "\n".join(p for p in parts if p)


def _error_text(result: ExecutionResult) -> str:
    assert result.error is not None
    text = f"{result.error.type}: {result.error.message}"
    output = _printed_text(result)
    if output:
        text += f"\n\nOutput before the error:\n{output}"
    if result.error.traceback:
        text += f"\n\n{result.error.traceback.rstrip()}"
    return text


def _timeout_text(exc: ExecutionTimeoutError) -> str:
    text = f"TimeoutError: {exc}"
    partial = exc.partial
    if isinstance(partial, ExecutionResult):
        output = _printed_text(partial)
        if output:
            text += f"\n\nOutput before the timeout:\n{output}"
    return text


class _DspyErrors:
    def __init__(self) -> None:
        from dspy.primitives.code_interpreter import (  # type: ignore[import-untyped, unused-ignore]
            CodeExecutionError,
            CodeInterpreterError,
            FinalOutput,
        )

        self.CodeExecutionError = CodeExecutionError
        self.CodeInterpreterError = CodeInterpreterError
        self.FinalOutput = FinalOutput


@functools.cache
def _dspy_errors() -> _DspyErrors:
    return _DspyErrors()


def make_local_interpreter_factory(
    settings: SandboxSettings | None = None,
    *,
    parent_dir: Path | None = None,
    session_id: str = "dspy",
) -> Callable[[], SandboxInterpreter]:
    """A zero-argument factory: each call gives an interpreter over a fresh LocalSandbox in a new
    temporary workspace (removed at shutdown). ``execution_instructions`` is set on it for RLM."""
    settings = settings or SandboxSettings()

    def factory() -> SandboxInterpreter:
        from fleet_core.sandbox.local import LocalSandbox

        root = Path(tempfile.mkdtemp(prefix="fleet-sbx-", dir=parent_dir))
        spec = SandboxSpec(
            session_id=session_id,
            agent_id=root.name,
            workspace=root,
            limits=SandboxLimits.from_settings(settings),
        )
        sandbox = LocalSandbox(spec, allow_unisolated=settings.allow_unisolated)
        return SandboxInterpreter(
            sandbox,
            owns_sandbox=True,
            on_shutdown=functools.partial(shutil.rmtree, root, ignore_errors=True),
        )

    factory.execution_instructions = EXECUTION_INSTRUCTIONS  # type: ignore[attr-defined]
    return factory


def local_interpreter_factory() -> SandboxInterpreter:
    """What ``dspy.RLM(interpreter_factory=...)`` expects: a fresh interpreter over a LocalSandbox
    (default limits, bubblewrap required) in a new temporary workspace."""
    return make_local_interpreter_factory()()


local_interpreter_factory.execution_instructions = EXECUTION_INSTRUCTIONS  # type: ignore[attr-defined]


def _accepts_host_code(sandbox: Any) -> bool:
    """Whether ``sandbox.execute`` takes ``host_code`` (our backends do; a test double may not)."""
    return getattr(sandbox, "accepts_host_code", False) is True
