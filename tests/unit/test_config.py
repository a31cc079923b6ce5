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
    from fleet_core.api import FleetRuntime
    from fleet_core.config import TURN_TIMEOUT_RULE
    from fleet_core.engine.lm import StaticLmProvider
    from fleet_core.engine.scripted_lm import fields, scripted_lm
    from fleet_core.errors import InvalidInput
    from fleet_core.models import TurnRequest

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


# ---------------------------------------------------------------------------------------------
# scopes: a key from the user's scope never goes to an endpoint a workspace file set
# ---------------------------------------------------------------------------------------------

USER_KEY = "sk-user-canary-abcdef0123456789abcdef"
USER_ENV = {"FLEET_LM_API_BASE": "https://user.example/v1", "FLEET_LM_API_KEY": USER_KEY,
            "FLEET_LM_MODEL": "m"}  # fmt: skip
REPO = "https://repository.example/v1"


def _key(config: object, role: str) -> str | None:
    secret = config.secrets.lm_key(role)  # type: ignore[attr-defined]
    return secret.get_secret_value() if secret is not None else None


@pytest.mark.parametrize("where", ["toml", "dotenv"])
def test_a_workspace_endpoint_never_receives_the_users_key(
    tmp_path: Path, where: str, caplog: pytest.LogCaptureFixture
) -> None:
    from fleet_core.config import NO_KEY
    from fleet_core.engine.lm import models_endpoint, resolve_spec

    if where == "toml":
        write_toml(tmp_path, f'[llm.root]\napi_base = "{REPO}"\n')
    else:
        (tmp_path / ".env").write_text(f"FLEET_LM_ROOT_API_BASE={REPO}\n")
    with caplog.at_level("WARNING", logger="fleet_core.config"):
        config = load_config(environ=USER_ENV, cwd=tmp_path)
        load_config(environ=USER_ENV, cwd=tmp_path)  # told once per process, not per load
    assert _key(config, "root") is None
    assert (_key(config, "sub"), _key(config, "judge")) == (USER_KEY, USER_KEY)
    spec, key = resolve_spec(config.settings.llm, config.secrets, "root")
    assert (spec.api_base, key) == (REPO, NO_KEY)  # runs without the key
    assert resolve_spec(config.settings.llm, config.secrets, "sub")[1] == USER_KEY
    assert models_endpoint(config) == (REPO, None)
    root = config.bindings["llm.root"]
    assert (root.endpoint_scope, root.key, root.key_scope, root.key_sent) == (
        "workspace", "FLEET_LM_API_KEY", "user", False)  # fmt: skip
    assert root.endpoint_source == ("file" if where == "toml" else "dotenv")
    assert (
        config.bindings["llm.sub"].key_sent and config.bindings["llm.sub"].endpoint_scope == "user"
    )
    assert USER_KEY in config.secrets.values()  # still redacted everywhere
    (warning,) = config.warnings
    assert "FLEET_LM_API_KEY (environment) is not sent to https://repository.example/v1" in warning
    logged = [r.getMessage() for r in caplog.records if "is not sent to" in r.getMessage()]
    assert len(logged) == 1 and USER_KEY not in logged[0]
    assert USER_KEY not in repr(config.bindings) + repr(config.warnings)


def test_the_shared_key_does_not_reach_a_withheld_role_through_another_name(
    tmp_path: Path,
) -> None:
    """Root's own key is the user's and withheld: the shared FLEET_LM_API_KEY (the user's too)
    must not be sent in its place."""
    write_toml(tmp_path, f'[llm.root]\napi_base = "{REPO}"\n')
    environ = USER_ENV | {"FLEET_LM_ROOT_API_KEY": "sk-root-only-0123456789abcdef"}
    config = load_config(environ=environ, cwd=tmp_path)
    assert _key(config, "root") is None and _key(config, "sub") == USER_KEY
    assert config.bindings["llm.root"].key == "FLEET_LM_ROOT_API_KEY"


def test_the_workspace_may_send_its_own_dotenv_key_to_its_endpoint(tmp_path: Path) -> None:
    write_toml(tmp_path, f'[llm]\napi_base = "{REPO}"\n')
    (tmp_path / ".env").write_text("FLEET_LM_API_KEY=sk-repo-own\n")
    alone = load_config(environ={}, cwd=tmp_path)  # the repository's key, its endpoint: fine
    assert _key(alone, "root") == "sk-repo-own" and alone.warnings == ()
    config = load_config(environ={"FLEET_LM_API_KEY": USER_KEY}, cwd=tmp_path)
    assert _key(config, "root") == "sk-repo-own"  # the user's key withheld, the .env one used
    assert config.bindings["llm.root"].key_used == "FLEET_LM_API_KEY (.env, workspace)"
    assert "send FLEET_LM_API_KEY (.env, workspace) instead" in config.warnings[0]


def test_a_keyless_workspace_endpoint_and_a_user_endpoint_are_unaffected(tmp_path: Path) -> None:
    write_toml(tmp_path, '[llm.sub]\napi_base = "http://127.0.0.1:8080/v1"\n')
    config = load_config(environ={"FLEET_LM_API_BASE": "https://user.example/v1"}, cwd=tmp_path)
    assert config.warnings == () and config.bindings["llm.sub"].key is None
    user_only = load_config(environ=USER_ENV, cwd=tmp_path / "elsewhere")
    assert user_only.warnings == () and _key(user_only, "root") == USER_KEY


def test_fleet_config_is_the_users_file(tmp_path: Path) -> None:
    path = write_toml(tmp_path, f'[llm.root]\napi_base = "{REPO}"\n')
    config = load_config(environ=USER_ENV | {"FLEET_CONFIG": str(path)}, cwd=tmp_path)
    assert config.config_file_scope == "user" and config.warnings == ()
    assert _key(config, "root") == USER_KEY and config.bindings["llm.root"].endpoint_scope == "user"


def test_overrides_are_the_users(tmp_path: Path) -> None:
    config = load_config({"llm": {"root": {"api_base": REPO}}}, environ=USER_ENV, cwd=tmp_path)
    assert _key(config, "root") == USER_KEY
    assert config.bindings["llm.root"].endpoint_source == "override"


@pytest.mark.parametrize("value", ["1", "true", "{cwd}", "/nowhere{sep}{parent}"])
def test_the_users_opt_in_trusts_the_workspace(tmp_path: Path, value: str) -> None:
    import os

    cwd = tmp_path / "repo"
    write_toml(cwd, f'[llm.root]\napi_base = "{REPO}"\n')
    trust = value.format(cwd=cwd, sep=os.pathsep, parent=tmp_path)
    config = load_config(environ=USER_ENV | {"FLEET_TRUST_WORKSPACE_CONFIG": trust}, cwd=cwd)
    assert _key(config, "root") == USER_KEY and config.warnings == ()
    assert config.workspace_trusted and config.bindings["llm.root"].trusted


@pytest.mark.parametrize("value", ["0", "", "/somewhere/else", "relative/path"])
def test_no_opt_in_without_a_matching_folder(tmp_path: Path, value: str) -> None:
    write_toml(tmp_path, f'[llm.root]\napi_base = "{REPO}"\n')
    config = load_config(environ=USER_ENV | {"FLEET_TRUST_WORKSPACE_CONFIG": value}, cwd=tmp_path)
    assert _key(config, "root") is None and not config.workspace_trusted


def test_the_opt_in_cannot_come_from_the_workspace(tmp_path: Path) -> None:
    write_toml(tmp_path, f'[llm.root]\napi_base = "{REPO}"\n')
    (tmp_path / ".env").write_text("FLEET_TRUST_WORKSPACE_CONFIG=1\n")
    assert _key(load_config(environ=USER_ENV, cwd=tmp_path), "root") is None


def test_ignoring_workspace_config_reads_neither_file(tmp_path: Path) -> None:
    write_toml(tmp_path, f'[llm.root]\napi_base = "{REPO}"\n[runtime]\nmax_agent_depth = 1\n')
    (tmp_path / ".env").write_text("FLEET_MAX_CHILD_SANDBOXES=2\nFLEET_LM_API_KEY=sk-repo\n")
    environ = USER_ENV | {"FLEET_IGNORE_WORKSPACE_CONFIG": "1"}
    config = load_config(environ=environ, cwd=tmp_path)
    assert config.config_file is None and config.warnings == ()
    assert {p.name for p in config.workspace_ignored} == {"fleet.toml", ".env"}
    assert config.settings.runtime.max_agent_depth == 3
    assert config.settings.runtime.max_child_sandboxes == 8
    assert _key(config, "root") == USER_KEY and config.settings.llm.root.api_base is None
    named = tmp_path / "mine.toml"
    named.write_text(TOML_HEAD + "[runtime]\nmax_agent_depth = 2\n")
    mine = load_config(environ=environ | {"FLEET_CONFIG": str(named)}, cwd=tmp_path)
    assert mine.config_file == named and mine.settings.runtime.max_agent_depth == 2


def test_daytona_key_is_not_sent_to_a_workspace_api_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("daytona")
    from fleet_core.config import SandboxSettings
    from fleet_core.sandbox.daytona_support import DaytonaOptions
    from fleet_core.sandbox.errors import SandboxUnavailableError

    write_toml(tmp_path, '[sandbox]\ndaytona_api_url = "https://repository.example/api"\n')
    monkeypatch.chdir(tmp_path)
    for name in [n for n in __import__("os").environ if n.startswith("FLEET_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("FLEET_DAYTONA_API_KEY", USER_KEY)
    config = load_config()
    assert config.secrets.daytona_api_key is None
    assert not config.bindings["sandbox.daytona"].key_sent
    assert "FLEET_DAYTONA_API_KEY (environment) is not sent to" in config.warnings[0]
    with pytest.raises(SandboxUnavailableError, match="needs an API key"):
        DaytonaOptions.from_settings(config.settings.sandbox)
    user_url = SandboxSettings(daytona_api_url="https://user.example/api")
    (tmp_path / "config" / "fleet.toml").unlink()  # no workspace file: the key goes
    assert DaytonaOptions.from_settings(user_url).api_key == USER_KEY


def test_jev_key_is_not_sent_to_a_workspace_base_url(tmp_path: Path) -> None:
    from fleet_core.engine.jev import jev_client

    write_toml(tmp_path, '[jev]\nbase_url = "https://repository.example"\n')
    config = load_config(environ={"FLEET_JEV_API_KEY": USER_KEY}, cwd=tmp_path)
    assert jev_client(config) is None  # Jev off rather than the key sent there
    assert "FLEET_JEV_API_KEY (environment) is not sent to" in config.warnings[0]
    default = load_config(environ={"FLEET_JEV_API_KEY": USER_KEY}, cwd=tmp_path / "x")
    assert jev_client(default) is not None


def test_mlflow_credentials_never_go_to_a_workspace_tracking_server(tmp_path: Path) -> None:
    write_toml(
        tmp_path,
        '[mlflow]\ndestination = "server"\ntracking_uri = "https://repository.example"\n',
    )
    plain = load_config(environ={}, cwd=tmp_path)  # no credentials: the team's server is used
    assert plain.settings.mlflow.destination == "server" and plain.warnings == ()
    config = load_config(environ={"MLFLOW_TRACKING_TOKEN": USER_KEY}, cwd=tmp_path)
    assert config.settings.mlflow.destination == "local"
    assert "MLFLOW_TRACKING_TOKEN" in config.warnings[0] and USER_KEY not in config.warnings[0]
    assert not config.bindings["mlflow"].key_sent
    env = {"MLFLOW_TRACKING_TOKEN": USER_KEY, "FLEET_MLFLOW_TRACKING_URI": "https://mine.example"}
    mine = load_config(environ=env, cwd=tmp_path)
    assert mine.settings.mlflow.destination == "server" and mine.warnings == ()


@pytest.mark.parametrize(
    ("where", "body"),
    [
        ("toml", "[sandbox]\nallow_unisolated = true\n"),
        ("dotenv", "FLEET_ALLOW_UNISOLATED_SANDBOX=true\n"),
        ("toml", "[server]\nallow_non_loopback_bind = true\n"),
    ],
)
def test_a_workspace_file_cannot_turn_a_safety_switch_on(
    tmp_path: Path, where: str, body: str
) -> None:
    if where == "toml":
        write_toml(tmp_path, body)
    else:
        (tmp_path / ".env").write_text(body)
    config = load_config(environ={}, cwd=tmp_path)
    assert not config.settings.sandbox.allow_unisolated
    assert not config.settings.server.allow_non_loopback_bind
    assert "is ignored: a safety switch" in config.warnings[0]
    mine = load_config(environ={"FLEET_ALLOW_UNISOLATED_SANDBOX": "true"}, cwd=tmp_path / "x")
    assert mine.settings.sandbox.allow_unisolated


# ---------------------------------------------------------------------------------------------
# smaller items: deep nesting, the state directory
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        "x = " + "[" * 5000 + "]" * 5000 + "\n",
        "[" + ".".join(["a"] * 5000) + "]\nx = 1\n",
        "[runtime]\nmax_agent_depth = " + "[" * 900 + "]" * 900 + "\n",
    ],
)
def test_deeply_nested_toml_is_a_one_line_configuration_error(tmp_path: Path, body: str) -> None:
    path = write_toml(tmp_path, body)
    with pytest.raises(ConfigError) as caught:
        load_config(environ={}, cwd=tmp_path)
    message = str(caught.value)
    assert str(path) in message and "\n" not in message and len(message) < 400


SYSTEM_DIRS = ["/", "/usr", "/etc/", "/var", "/bin", "/lib", "/lib64", "/proc", "/sys", "/dev",
               "/usr/../etc", "/boot", "/run", "/sbin"]  # fmt: skip


@pytest.mark.parametrize("value", SYSTEM_DIRS)
def test_a_system_directory_is_refused_as_the_state_directory(tmp_path: Path, value: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(environ={"FLEET_STATE_DIR": value}, cwd=tmp_path)
    message = str(caught.value)
    assert "FLEET_STATE_DIR" in message and "\n" not in message
    assert "system directory" in message or "filesystem root" in message


def test_ordinary_state_directories_are_accepted(tmp_path: Path) -> None:
    for value in ("/usr/local/fleet-state", str(tmp_path / "state"), str(Path.home()), "/root/x"):
        assert load_config(environ={"FLEET_STATE_DIR": value}, cwd=tmp_path).state_dir == Path(
            value
        )


def test_a_workspace_dotenv_keeps_the_state_directory_inside_the_workspace(
    tmp_path: Path,
) -> None:
    cwd = tmp_path / "repo"
    cwd.mkdir()
    (cwd / ".env").write_text("FLEET_STATE_DIR=state\n")
    assert load_config(environ={}, cwd=cwd).state_dir == cwd / "state"
    (cwd / ".env").write_text(f"FLEET_STATE_DIR={tmp_path / 'elsewhere'}\n")
    config = load_config(environ={}, cwd=cwd)
    assert config.state_dir == cwd / ".fleet"
    assert "outside the working directory and is ignored" in config.warnings[0]
    trusted = load_config(environ={"FLEET_TRUST_WORKSPACE_CONFIG": "1"}, cwd=cwd)
    assert trusted.state_dir == tmp_path / "elsewhere"
    mine = load_config(environ={"FLEET_STATE_DIR": str(tmp_path / "mine")}, cwd=cwd)
    assert mine.state_dir == tmp_path / "mine" and mine.warnings == ()
