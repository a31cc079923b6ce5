"""Issue 10: the sandbox environment line in every Turn's inputs, and one
``sandbox_environment_incomplete`` event per Session when packages are missing."""

from __future__ import annotations

import sys
from importlib import metadata

import pytest

from fleet_core import turns
from fleet_core.engine import environment
from fleet_core.engine.scripted_lm import scripted_lm, submit
from fleet_core.event_payloads import SandboxEnvironmentIncompletePayload
from fleet_core.models import TurnRequest


@pytest.fixture(autouse=True)
def _fresh_probe() -> None:
    environment.host_environment.cache_clear()
    yield
    environment.host_environment.cache_clear()


async def test_the_prompt_has_versions_and_the_digit_hint(engine_runtime, lms) -> None:
    await engine_runtime.new_session("env", mode="rlm")
    lms.root = scripted_lm([submit("'ok'")])
    events: list = []
    await engine_runtime.run_turn(TurnRequest(session_id="env", task="t"), on_event=events.append)
    prompt = lms.root.engine_script.requests[0]
    python = ".".join(map(str, sys.version_info[:3]))
    assert f"Sandbox: Python {python}" in prompt
    digits = sys.get_int_max_str_digits()
    assert f"int→str conversion is limited to {digits} digits" in prompt
    assert "use sys.set_int_max_str_digits(0) for bigger numbers" in prompt
    for name in environment.ENV_PACKAGES:
        version = environment.package_version(name)
        if version is not None:
            assert f"{name} {version}" in prompt, name
        else:
            assert name in prompt.split("not installed:")[1], name
    assert "scikit-learn" in prompt and "sympy" in prompt
    missing = [e for e in events if e.kind == "sandbox_environment_incomplete"]
    assert len(missing) == (1 if environment.host_environment().missing else 0)


async def test_missing_packages_are_reported_once_per_session(
    engine_runtime, lms, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = environment.package_version

    def lookup(name: str) -> str | None:
        return None if name == "sympy" else (real(name) or "1.0")

    monkeypatch.setattr(environment, "package_version", lookup)
    runtime = engine_runtime
    for session in ("e1", "e2"):
        await runtime.new_session(session, mode="rlm")
    events: list = []
    for session in ("e1", "e1", "e2"):
        lms.root = scripted_lm([submit("'ok'")])
        await runtime.run_turn(TurnRequest(session_id=session, task="t"), on_event=events.append)
        assert "not installed: sympy" in lms.root.engine_script.requests[0]
        assert "numpy " in lms.root.engine_script.requests[0]
    told = [e for e in events if e.kind == "sandbox_environment_incomplete"]
    assert [e.session_id for e in told] == ["e1", "e2"]  # one per Session, not per Turn
    data = told[0].data
    assert isinstance(data, SandboxEnvironmentIncompletePayload) and data.missing == ["sympy"]
    assert told[0].payload == {"missing": ["sympy"], "python": data.python}  # the wire


def test_versions_come_from_metadata_without_importing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "sympy", raising=False)
    env = environment.probe_environment()
    assert "sympy" not in sys.modules  # never imported to be described
    assert dict(env.packages)["numpy"] == metadata.version("numpy")
    assert turns.host_environment_line() == environment.host_environment().line()
    assert environment.host_environment() is environment.host_environment()  # cached


def test_an_unlimited_digit_setting_reads_as_such() -> None:
    line = environment.environment_line("3.12.0", {"numpy": "2.0", "sympy": None}, 0)
    assert line == (
        "Sandbox: Python 3.12.0; available packages: numpy 2.0; not installed: sympy; "
        "int→str conversion has no digit limit."
    )
