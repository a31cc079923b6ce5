"""Emitters whose errors DSPy swallows (its callbacks log and continue): their payload models are
built and sent through an event channel here directly, and the wire checked against the models."""

from __future__ import annotations

from fleet_core.engine.callbacks import EventCallback
from fleet_core.engine.control import TurnControl
from fleet_core.engine.stream import EventChannel
from fleet_core.event_payloads import ModuleEndPayload, ToolCallEndPayload, check_payload


class Tool:
    name = "spawn_agent"


class RLM:
    pass


def test_module_and_tool_callbacks_emit_valid_payloads() -> None:
    channel = EventChannel("t", "s")
    control = TurnControl(max_units=5, timeout_seconds=None, emit=channel.emit)
    callback = EventCallback(control, "agent-1", "root")
    callback.on_module_start("m1", RLM(), {"kwargs": {"iteration": "2/16"}})
    callback.on_module_end("m1", {"answer": "x"})
    callback.on_module_start("m2", RLM(), {"args": ()})
    callback.on_module_end("m2", None, ValueError("bad"))
    callback.on_tool_start(
        "t1", Tool(), {"args": [], "kwargs": {"subtask": "North", "n": object()}}
    )
    callback.on_tool_end("t1", {"findings": "ok", "artifacts": []})
    callback.on_tool_start("t2", Tool(), {"kwargs": {}})
    callback.on_tool_end("t2", None, RuntimeError("no"))
    events = channel.drain()
    assert [e.kind for e in events] == [
        "module_start", "module_end", "module_start", "module_end",
        "tool_call_start", "tool_call_end", "tool_call_start", "tool_call_end",
    ]  # fmt: skip
    assert all(check_payload(e.kind, e.payload) == [] for e in events)
    assert all(e.agent_id == "agent-1" and e.parent_agent_id == "root" for e in events)
    failed = events[3].data
    assert isinstance(failed, ModuleEndPayload) and failed.error_type == "ValueError"
    tool_failed = events[7].data
    assert isinstance(tool_failed, ToolCallEndPayload) and not tool_failed.ok
