"""Configuration precedence, validation and secret handling."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet_core.config import load_config
from fleet_core.errors import ConfigError

TOML_HEAD = "[config]\nschema_version = 1\n"


def write_toml(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "config" / "fleet.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(TOML_HEAD + body, encoding="utf-8")
    return path


def test_defaults_apply_when_nothing_is_configured(tmp_path: Path) -> None:
    config = load_config(environ={}, cwd=tmp_path)
    runtime = config.settings.runtime
    assert (runtime.max_llm_calls_per_turn, runtime.turn_timeout_seconds) == (150, 900)
    assert (runtime.max_agent_depth, runtime.max_child_sandboxes) == (3, 8)
    assert runtime.max_active_children == 4
    assert config.settings.storage.max_file_bytes == 25_000_000
    assert {source for _, _, source in config.items()} == {"default"}
    assert config.state_dir == tmp_path / ".fleet"


def test_each_layer_overrides_the_one_below_and_reports_its_source(tmp_path: Path) -> None:
    write_toml(
        tmp_path,
        "[runtime]\nmax_agent_depth = 1\nmax_child_sandboxes = 2\n"
        "max_active_children = 3\nmax_llm_calls_per_turn = 4\n",
    )
    (tmp_path / ".env").write_text(
        "FLEET_MAX_CHILD_SANDBOXES=20\nFLEET_MAX_ACTIVE_CHILDREN=5\nFLEET_MAX_LLM_CALLS_PER_TURN=6\n"
    )
    environ = {"FLEET_MAX_ACTIVE_CHILDREN": "7", "FLEET_MAX_LLM_CALLS_PER_TURN": "8"}
    config = load_config({"runtime": {"max_llm_calls_per_turn": 9}}, environ=environ, cwd=tmp_path)
    runtime = config.settings.runtime
    assert runtime.max_agent_depth == 1
    assert runtime.max_child_sandboxes == 20
    assert runtime.max_active_children == 7
    assert runtime.max_llm_calls_per_turn == 9
    assert config.sources["runtime.max_agent_depth"] == "file"
    assert config.sources["runtime.max_child_sandboxes"] == "dotenv"
    assert config.sources["runtime.max_active_children"] == "env"
    assert config.sources["runtime.max_llm_calls_per_turn"] == "override"


def test_nested_environment_names_reach_any_setting(tmp_path: Path) -> None:
    config = load_config(environ={"FLEET_SANDBOX__MAX_PROCESSES": "32"}, cwd=tmp_path)
    assert config.settings.sandbox.max_processes == 32
    assert config.sources["sandbox.max_processes"] == "env"


def test_role_model_keys_from_the_protocol_contract(tmp_path: Path) -> None:
    environ = {
        "FLEET_LM_MODEL": "openai/base",
        "FLEET_LM_API_BASE": "https://models.example/v1",
        "FLEET_LM_JUDGE_MODEL": "openai/judge",
    }
    llm = load_config(environ=environ, cwd=tmp_path).settings.llm
    assert (llm.model, llm.api_base, llm.judge.model, llm.root.model) == (
        "openai/base",
        "https://models.example/v1",
        "openai/judge",
        None,
    )


def test_session_selections_override_with_source_session(tmp_path: Path) -> None:
    config = load_config(environ={"FLEET_EXECUTION_MODE": "rlm"}, cwd=tmp_path)
    session = config.with_session({"runtime.execution_mode": "flex"})
    assert session.settings.runtime.execution_mode == "flex"
    assert session.sources["runtime.execution_mode"] == "session"
    assert config.settings.runtime.execution_mode == "rlm"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("[runtime]\nmax_agent_dept = 2\n", "unknown key 'runtime.max_agent_dept'"),
        ("[bogus]\nx = 1\n", "unknown key 'bogus'"),
        ('[runtime]\nmax_agent_depth = "2"\n', "'runtime.max_agent_depth'"),
        ("[runtime]\nturn_timeout_seconds = 5\n", "between 10 and 3600"),
        ('[llm]\napi_key = "sk-123"\n', "key 'llm.api_key' looks like a secret"),
        ('[storage]\ndatabase_url = "postgresql://u:p@h/db"\n', "looks like a secret"),
    ],
)
def test_bad_toml_is_rejected_naming_the_key_and_the_file(
    tmp_path: Path, body: str, message: str
) -> None:
    path = write_toml(tmp_path, body)
    with pytest.raises(ConfigError) as caught:
        load_config(environ={}, cwd=tmp_path)
    assert message in str(caught.value)
    assert str(path) in str(caught.value)


def test_toml_without_schema_version_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "config" / "fleet.toml"
    path.parent.mkdir()
    path.write_text("[runtime]\nmax_agent_depth = 2\n")
    with pytest.raises(ConfigError, match="schema_version"):
        load_config(environ={}, cwd=tmp_path)


def test_explicitly_named_missing_config_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(environ={"FLEET_CONFIG": "nope.toml"}, cwd=tmp_path)


def test_bad_environment_value_names_the_setting(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"runtime\.max_agent_depth"):
        load_config(environ={"FLEET_MAX_AGENT_DEPTH": "99"}, cwd=tmp_path)


def test_zero_deadline_means_no_deadline(tmp_path: Path) -> None:
    config = load_config(environ={"FLEET_TURN_TIMEOUT_SECONDS": "0"}, cwd=tmp_path)
    assert config.settings.runtime.turn_timeout_seconds == 0


def test_secrets_are_reported_set_or_unset_never_by_value(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("FLEET_DATABASE_URL=postgresql+psycopg://u:hunter2@h/db\n")
    environ = {"FLEET_LM_API_KEY": "sk-canary-123", "FLEET_LM_SUB_API_KEY": "sk-sub-456"}
    config = load_config(environ=environ, cwd=tmp_path)
    status = config.secret_status()
    assert status["FLEET_LM_API_KEY"] and status["FLEET_DATABASE_URL"]
    assert status["FLEET_LM_SUB_API_KEY"] and not status["FLEET_LM_ROOT_API_KEY"]
    assert not status["FLEET_DAYTONA_API_KEY"]
    shown = repr(list(config.items())) + repr(config) + config.digest()
    for secret in ("sk-canary-123", "sk-sub-456", "hunter2"):
        assert secret not in shown
    assert set(config.secrets.values()) >= {"sk-canary-123", "sk-sub-456"}


def test_digest_follows_the_effective_values(tmp_path: Path) -> None:
    first = load_config(environ={}, cwd=tmp_path).digest()
    same = load_config(environ={}, cwd=tmp_path).digest()
    other = load_config(environ={"FLEET_MAX_AGENT_DEPTH": "2"}, cwd=tmp_path).digest()
    assert first == same != other
    assert len(first) == 64


def test_shipped_config_file_is_valid() -> None:
    repo = Path(__file__).resolve().parents[2]
    config = load_config(environ={}, cwd=repo)
    assert config.config_file == repo / "config" / "fleet.toml"
    assert config.settings.runtime.max_llm_calls_per_turn == 150


# ---------------------------------------------------------------------------------------------
# issue 9: one timeout rule for the protocol, the configuration and a Turn request
# ---------------------------------------------------------------------------------------------

TIMEOUTS = [(-1, False), (0, True), (1, False), (9, False), (10, True), (900, True),
            (3600, True), (3601, False)]  # fmt: skip


@pytest.mark.parametrize(("seconds", "valid"), TIMEOUTS)
def test_one_timeout_rule_in_the_protocol_and_the_configuration(
    tmp_path: Path, seconds: int, valid: bool
) -> None:
    from fleet_core.config import TURN_TIMEOUT_RULE
    from fleet_lsp.protocol import ParamsError, TurnRunParams, parse

    raw = {"sessionId": "s", "task": "t", "timeoutSeconds": seconds}
    environ = {"FLEET_TURN_TIMEOUT_SECONDS": str(seconds)}
    if valid:
        assert parse(TurnRunParams, raw).timeout_seconds == seconds
        assert load_config(environ=environ, cwd=tmp_path).settings.runtime.turn_timeout_seconds == (
            seconds
        )
        return
    with pytest.raises(ParamsError) as wire:
        parse(TurnRunParams, raw)
    assert str(wire.value) == f"'timeoutSeconds' must be {TURN_TIMEOUT_RULE}; got {seconds}"
    with pytest.raises(ConfigError) as config:
        load_config(environ=environ, cwd=tmp_path)
    assert "'runtime.turn_timeout_seconds'" in str(config.value)
    assert TURN_TIMEOUT_RULE in str(config.value)


async def test_one_timeout_rule_for_a_turn_request(tmp_path: Path) -> None:
    """The Turn service applies the same rule to ``TurnRequest.timeout_seconds``: every value the
    protocol accepts runs, every value it rejects is refused with the same rule."""
    from fleet_core.config import TURN_TIMEOUT_RULE
    from fleet_core.engine.lm import StaticLmProvider
    from fleet_core.engine.testing import fields, scripted_lm
    from fleet_core.errors import InvalidInput
    from fleet_core.models import TurnRequest
    from fleet_core.runtime import FleetRuntime

    reply = fields(reasoning="ok", route="direct", answer="done")
    lms = StaticLmProvider(scripted_lm(rules={"": reply}))
    env = {"FLEET_STATE_DIR": str(tmp_path / "state"), "FLEET_MLFLOW_DESTINATION": "off"}
    runtime = await FleetRuntime.open(load_config(environ=env, cwd=tmp_path), lm_provider=lms)
    try:
        await runtime.new_session("timeouts")
        for seconds, valid in TIMEOUTS:
            request = TurnRequest(session_id="timeouts", task="Say done.", timeout_seconds=seconds)
            if valid:
                result = await runtime.run_turn(request)
                assert result.status == "completed", (seconds, result.error)
                continue
            with pytest.raises(InvalidInput) as refused:
                await runtime.run_turn(request)
            assert refused.value.message == (
                f"timeoutSeconds must be {TURN_TIMEOUT_RULE}; got {seconds}"
            )
    finally:
        await runtime.close()
