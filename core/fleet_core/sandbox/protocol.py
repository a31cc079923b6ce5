"""Host side of the worker protocol: frame splitting, validation and the per-cell gate.

The worker's frames share a process with generated code, so none is trusted. A frame counts only
if it names the running cell's id *and* nonce; a cell accepts exactly one ``result``; a
``tool_call`` must name a tool registered for this cell, use a fresh call id, and pass the
per-cell budget; a ``result`` must be well typed (its ``value`` a string tagged by ``value_type``,
within the cell's bounds). Anything else is dropped and counted, and can only affect its own cell.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from fleet_core.sandbox.base import (
    ExecutionError,
    ExecutionResult,
    SandboxLimits,
    ToolBridge,
    ToolPolicy,
)
from fleet_core.sandbox.worker import TRUNCATED_MARK

ENCODING = "utf-8"


def encode_frame(frame: dict[str, Any]) -> bytes:
    """One JSON line (ASCII, so no byte can split a frame)."""
    return (json.dumps(frame, ensure_ascii=True, separators=(",", ":")) + "\n").encode("ascii")


class LineSplitter:
    """Splits a byte stream into lines, dropping (and counting) lines over ``max_bytes``."""

    def __init__(self, max_bytes: int) -> None:
        self._max = max_bytes
        self._buffer = bytearray()
        self._discarding = False
        self.oversized = 0

    def feed(self, data: bytes) -> Iterator[bytes]:
        start = 0
        while True:
            end = data.find(b"\n", start)
            if end < 0:
                self._keep(data[start:])
                return
            if self._discarding:
                self._discarding = False
            elif len(self._buffer) + end - start <= self._max:
                self._buffer += data[start:end]
                line = bytes(self._buffer)
                self._buffer.clear()
                yield line
            else:
                self.oversized += 1
                self._buffer.clear()
            start = end + 1

    def _keep(self, rest: bytes) -> None:
        if self._discarding:
            return
        if len(self._buffer) + len(rest) > self._max:
            self.oversized += 1
            self._discarding = True
            self._buffer.clear()
            return
        self._buffer += rest


def decode_frame(line: bytes) -> dict[str, Any] | None:
    try:
        frame = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(frame, dict) or not isinstance(frame.get("type"), str):
        return None
    return frame


@dataclass
class CellGate:
    """Everything the host knows about the one running cell; decides which frames count."""

    tools: ToolBridge
    policy: ToolPolicy | None
    limits: SandboxLimits
    exec_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    nonce: str = field(default_factory=lambda: secrets.token_hex(16))
    done: asyncio.Future[ExecutionResult] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )
    seen_calls: set[int] = field(default_factory=set)
    tool_calls: int = 0
    rejected_frames: int = 0
    tool_tasks: set[asyncio.Task[None]] = field(default_factory=set)
    stop_reason: str | None = None
    stop_detail: str = ""

    @property
    def open(self) -> bool:
        return not self.done.done()

    def owns(self, frame: dict[str, Any]) -> bool:
        """True if the frame names this cell's id and nonce and the cell is still open."""
        ok = self.open and frame.get("id") == self.exec_id and frame.get("nonce") == self.nonce
        if not ok:
            self.rejected_frames += 1
        return ok

    def accept_result(self, frame: dict[str, Any]) -> bool:
        """Resolve the cell from a ``result`` frame; a malformed one counts as rejected."""
        result = parse_result(frame, self.exec_id, self.tool_calls, self.limits)
        if result is None:
            self.rejected_frames += 1
            return False
        self.done.set_result(result)
        return True

    def check_tool_call(self, frame: dict[str, Any]) -> str | None:
        """None if the call may run, else the error message to send back into the sandbox."""
        call = frame.get("call")
        tool = frame.get("tool")
        if not isinstance(call, int) or call in self.seen_calls:
            self.rejected_frames += 1
            return "invalid or repeated call id"
        self.seen_calls.add(call)
        if not isinstance(tool, str) or tool not in self.tools:
            return f"no host tool named {tool!r} is available in this cell"
        if not isinstance(frame.get("args", []), list) or not isinstance(
            frame.get("kwargs", {}), dict
        ):
            return "tool arguments must be a list and a dict"
        self.tool_calls += 1
        budget = self.limits.max_tool_calls_per_cell
        if self.tool_calls > budget:
            return f"tool-call budget of {budget} per cell is exhausted"
        if self.policy is not None:
            try:
                self.policy(tool)
            except Exception as exc:
                return f"{type(exc).__name__}: {exc}"
        return None


def parse_result(
    frame: dict[str, Any], exec_id: str, tool_calls: int, limits: SandboxLimits
) -> ExecutionResult | None:
    """An :class:`ExecutionResult` from a worker ``result`` frame, or None if malformed."""
    error = frame.get("error")
    final = frame.get("final")
    try:
        value, value_type = _typed_value(frame, limits)
        return ExecutionResult(
            exec_id=exec_id,
            stdout=_text(frame.get("stdout")),
            stderr=_text(frame.get("stderr")),
            stdout_truncated=bool(frame.get("stdout_truncated")),
            stderr_truncated=bool(frame.get("stderr_truncated")),
            value=value,
            value_type=value_type,
            error=ExecutionError.model_validate(error) if error is not None else None,
            final=final if isinstance(final, dict) else None,
            duration_s=float(frame.get("duration") or 0.0),
            tool_calls=tool_calls,
        )
    except (ValidationError, TypeError, ValueError):
        return None


def _text(value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise TypeError("expected text")
    return value


def _typed_value(frame: dict[str, Any], limits: SandboxLimits) -> tuple[str | None, Any]:
    """The result's ``value`` and ``value_type``, checked: both absent, or a string tagged
    ``"str"`` (at most ``max_value_chars``) or ``"repr"`` (at most ``max_output_chars`` plus the
    truncation mark). Raises ``ValueError`` otherwise (the frame is malformed)."""
    value, value_type = frame.get("value"), frame.get("value_type")
    if value is None and value_type is None:
        return None, None
    if not isinstance(value, str):
        raise ValueError("value must be a string")
    bounds = {
        "str": limits.max_value_chars,
        "repr": limits.max_output_chars + len(TRUNCATED_MARK),
    }
    bound = bounds.get(value_type) if isinstance(value_type, str) else None
    if bound is None:
        raise ValueError("value_type must be 'str' or 'repr'")
    if len(value) > bound:
        raise ValueError(f"a {value_type} value longer than {bound} characters")
    return value, value_type
