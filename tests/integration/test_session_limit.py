"""Issue 10: a process holds at most ``runtime.max_active_sessions`` Sessions (both databases)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet_core.api import FleetRuntime
from fleet_core.config import load_config
from fleet_core.errors import SessionLimit


async def _opened(environ: dict[str, str], tmp_path: Path, **extra: str) -> FleetRuntime:
    env = {**environ, "FLEET_MLFLOW_DESTINATION": "off", **extra}
    return await FleetRuntime.open(load_config(environ=env, cwd=tmp_path))


async def test_the_session_past_the_limit_is_refused_naming_the_setting(
    fleet_environ: dict[str, str], tmp_path: Path
) -> None:
    runtime = await _opened(fleet_environ, tmp_path, FLEET_MAX_ACTIVE_SESSIONS="3")
    try:
        for n in range(3):
            await runtime.new_session(f"s{n}")
        with pytest.raises(SessionLimit) as refused:
            await runtime.new_session("s3")
        assert "max_active_sessions" in refused.value.message
        assert refused.value.data["setting"] == "runtime.max_active_sessions"
        assert {s.session_id for s in await runtime.list_sessions()} == {"s0", "s1", "s2"}
        await runtime.load_session("s1")  # a Session already held never counts twice
        await runtime.set_mode("s2", "rlm")

        await runtime.close_session("s0")  # closing frees a slot
        await runtime.new_session("s3")
        with pytest.raises(SessionLimit):
            await runtime.load_session("s0")  # taking a stored Session back counts too
        with pytest.raises(SessionLimit):
            await runtime.set_mode("s0", "rlm")  # so does any action that takes ownership

        await runtime.delete_session("s0")  # deleting is never refused by the limit
        await runtime.delete_session("s3")  # and frees the slot it held
        await runtime.new_session("s4")
    finally:
        await runtime.close()


async def test_the_65th_session_is_refused_at_the_default(
    fleet_environ: dict[str, str], tmp_path: Path
) -> None:
    runtime = await _opened(fleet_environ, tmp_path)
    try:
        assert runtime.config.settings.runtime.max_active_sessions == 64
        for n in range(64):
            await runtime.new_session(f"d{n}")
        with pytest.raises(SessionLimit) as refused:
            await runtime.new_session("d64")
        assert "runtime.max_active_sessions = 64" in refused.value.message
        stored = {s.session_id for s in await runtime.list_sessions()}
        assert "d64" not in stored and len(stored) == 64
        await runtime.close_session("d0")
        assert (await runtime.new_session("d64")).session_id == "d64"
    finally:
        await runtime.close()
