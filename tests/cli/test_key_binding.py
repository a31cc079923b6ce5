"""A cloned repository must not redirect the user's API key (docs/configuration.md, scopes).

Real processes, real HTTP: the user's key and endpoint are in the environment; a working
directory's ``config/fleet.toml`` or ``.env`` (the "repository") points the root role at a
recorder on 127.0.0.1 that logs every ``Authorization`` header it receives. A Turn, ``models``
(endpoint discovery) and ``doctor`` (the endpoint probe) must never show the recorder the key,
unless the user opts the folder in with ``FLEET_TRUST_WORKSPACE_CONFIG``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fleet_core.engine.scripted_lm import action, route, submit
from tests.cli.fake_models import ScriptedModels
from tests.cli.test_cli import run
from tests.fake_http import serving

USER_KEY = "sk-user-canary-0123456789abcdef0123456789"
ROOT_TURN = [action("value = 6 * 7\nprint(value)"), submit("str(value)", note="multiplied")]


class Recorder(ScriptedModels):
    """A scripted OpenAI-compatible endpoint that records each request's Authorization header."""

    def _record(self) -> None:
        with self.server.lock:  # type: ignore[attr-defined]
            self.server.seen.append(self.headers.get("Authorization"))  # type: ignore[attr-defined]

    def do_POST(self) -> None:
        self._record()
        super().do_POST()

    def do_GET(self) -> None:
        self._record()
        if not self.path.endswith("/models"):
            self.send_json({"error": "not found"}, 404)
            return
        self.send_json({"object": "list", "data": [{"id": "scripted-model"}]})


@contextmanager
def recorder(replies: list[str]) -> Iterator[Any]:
    with serving(Recorder) as server:
        server.lock = threading.Lock()  # type: ignore[attr-defined]
        server.replies = list(replies)  # type: ignore[attr-defined]
        server.calls = 0  # type: ignore[attr-defined]
        server.seen = []  # type: ignore[attr-defined]
        server.api_base = f"http://127.0.0.1:{server.server_port}/v1"  # type: ignore[attr-defined]
        yield server


def user_env(user: Any) -> dict[str, str]:
    """The user's own endpoint and key, in the process environment."""
    return {
        "FLEET_LM_API_BASE": user.api_base,
        "FLEET_LM_MODEL": "scripted-model",
        "FLEET_LM_API_KEY": USER_KEY,
        "FLEET_LLM__NUM_RETRIES": "0",
        "FLEET_MLFLOW_DESTINATION": "off",
    }


def workspace_toml(tmp_path: Path, api_base: str) -> None:
    config = tmp_path / "config"
    config.mkdir(exist_ok=True)
    (config / "fleet.toml").write_text(
        f'[config]\nschema_version = 1\n\n[llm.root]\napi_base = "{api_base}"\n'
    )


def workspace_dotenv(tmp_path: Path, api_base: str, extra: str = "") -> None:
    (tmp_path / ".env").write_text(f"FLEET_LM_ROOT_API_BASE={api_base}\n{extra}")


def turn(tmp_path: Path, env: dict[str, str]) -> Any:
    args = ("turn", "What is six times seven?", "--session", "s1", "--json")
    return run(tmp_path, *args, env=env, timeout=180)


def assert_warned_once(stderr: str) -> None:
    assert stderr.count("is not sent to") == 1, stderr
    assert "FLEET_LM_API_KEY (environment)" in stderr and "FLEET_TRUST_WORKSPACE_CONFIG" in stderr
    assert USER_KEY not in stderr


def test_a_turn_never_sends_the_users_key_to_the_repository_toml_endpoint(
    tmp_path: Path,
) -> None:
    with recorder([route("rlm")]) as user, recorder(ROOT_TURN) as repo:
        workspace_toml(tmp_path, repo.api_base)
        out = turn(tmp_path, user_env(user))
        seen_by_repo, seen_by_user = list(repo.seen), list(user.seen)
    assert out.returncode == 0, out.stdout + out.stderr
    assert json.loads(out.stdout)["answer"] == "42"
    assert seen_by_repo, "the root role did not reach the repository's endpoint"
    assert all(USER_KEY not in (header or "") for header in seen_by_repo), seen_by_repo
    assert f"Bearer {USER_KEY}" in seen_by_user  # the user's own endpoint still gets it (sub)
    assert_warned_once(out.stderr)
    assert USER_KEY not in out.stdout


def test_a_turn_never_sends_the_users_key_to_the_repository_dotenv_endpoint(
    tmp_path: Path,
) -> None:
    with recorder([route("rlm")]) as user, recorder(ROOT_TURN) as repo:
        workspace_dotenv(tmp_path, repo.api_base)
        out = turn(tmp_path, user_env(user))
        seen_by_repo = list(repo.seen)
    assert out.returncode == 0, out.stdout + out.stderr
    assert seen_by_repo and all(USER_KEY not in (h or "") for h in seen_by_repo), seen_by_repo
    assert_warned_once(out.stderr)


def test_the_repository_may_send_its_own_dotenv_key_to_its_endpoint(tmp_path: Path) -> None:
    own = "sk-repository-own-key-0123456789abcdef"
    with recorder([route("rlm")]) as user, recorder(ROOT_TURN) as repo:
        workspace_dotenv(tmp_path, repo.api_base, f"FLEET_LM_API_KEY={own}\n")
        out = turn(tmp_path, user_env(user))
        seen_by_repo, seen_by_user = list(repo.seen), list(user.seen)
    assert out.returncode == 0, out.stdout + out.stderr
    assert seen_by_repo and set(seen_by_repo) == {f"Bearer {own}"}
    assert f"Bearer {USER_KEY}" in seen_by_user  # the environment's key still wins elsewhere


def test_discovery_and_doctor_never_send_the_users_key_to_the_repository(tmp_path: Path) -> None:
    with recorder([]) as user, recorder([]) as repo:
        workspace_toml(tmp_path, repo.api_base)
        env = user_env(user)
        models = run(tmp_path, "models", "--json", env=env)
        doctor = run(tmp_path, "doctor", "--json", env=env, timeout=180)
        seen_by_repo = list(repo.seen)
    assert models.returncode == 0, models.stderr
    assert json.loads(models.stdout)["models"] == [{"id": "scripted-model", "ownedBy": None}]
    assert len(seen_by_repo) >= 2  # GET /models by `models`, and doctor's probe
    assert all(USER_KEY not in (header or "") for header in seen_by_repo), seen_by_repo
    checks = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}
    assert checks["configuration"]["status"] == "warn"
    assert "is not sent to" in checks["configuration"]["detail"]
    assert USER_KEY not in doctor.stdout + doctor.stderr + models.stdout + models.stderr


def test_the_users_opt_in_lets_the_key_through(tmp_path: Path) -> None:
    with recorder([route("rlm")]) as user, recorder(ROOT_TURN) as repo:
        workspace_toml(tmp_path, repo.api_base)
        env = user_env(user) | {"FLEET_TRUST_WORKSPACE_CONFIG": str(tmp_path)}
        out = turn(tmp_path, env)
        seen_by_repo = list(repo.seen)
    assert out.returncode == 0, out.stdout + out.stderr
    assert seen_by_repo and set(seen_by_repo) == {f"Bearer {USER_KEY}"}
    assert "is not sent to" not in out.stderr


def test_ignoring_workspace_config_skips_the_repository_files(tmp_path: Path) -> None:
    with recorder(["x"]) as user, recorder([]) as repo:
        workspace_toml(tmp_path, repo.api_base)
        workspace_dotenv(tmp_path, repo.api_base)
        env = user_env(user) | {"FLEET_IGNORE_WORKSPACE_CONFIG": "1"}
        shown = run(tmp_path, "config", "show", "--json", env=env)
        models = run(tmp_path, "models", "--json", env=env)
        seen_by_repo, seen_by_user = list(repo.seen), list(user.seen)
    assert shown.returncode == 0 and models.returncode == 0, shown.stderr + models.stderr
    data = json.loads(shown.stdout)
    assert data["configFile"] is None
    assert sorted(Path(p).name for p in data["workspace"]["ignored"]) == [".env", "fleet.toml"]
    assert data["endpoints"]["root"]["endpoint"] == user.api_base
    assert seen_by_repo == [] and seen_by_user == [f"Bearer {USER_KEY}"]


def test_config_show_names_where_each_endpoint_and_key_came_from(tmp_path: Path) -> None:
    workspace_toml(tmp_path, "https://repository.example/v1")
    env = {"FLEET_LM_API_BASE": "https://user.example/v1", "FLEET_LM_API_KEY": USER_KEY}
    table = run(tmp_path, "config", "show", env=env)
    shown = run(tmp_path, "config", "show", "--json", env=env)
    assert table.returncode == 0 and shown.returncode == 0, table.stderr + shown.stderr
    text = " ".join(table.stdout.split())
    assert (
        "root: api_base https://repository.example/v1 (from config/fleet.toml, workspace) key "
        "FLEET_LM_API_KEY (environment, user) — not sent: the endpoint was set by a workspace "
        "file"
    ) in text
    assert (
        "sub: api_base https://user.example/v1 (from FLEET_LM_API_BASE, user) key "
        "FLEET_LM_API_KEY (environment, user)"
    ) in text
    assert "warning: the key FLEET_LM_API_KEY (environment) is not sent to" in text
    data = json.loads(shown.stdout)
    root = data["endpoints"]["root"]
    assert root["endpointSource"] == "file" and root["endpointScope"] == "workspace"
    assert root["endpointOrigin"] == "config/fleet.toml"
    assert (root["key"], root["keyScope"], root["keySent"]) == ("FLEET_LM_API_KEY", "user", False)
    assert data["endpoints"]["sub"]["keySent"] is True
    assert any("is not sent to" in w for w in data["warnings"])
    assert data["settings"]["llm.root.api_base"]["source"] == "file"  # the old fields remain
    assert USER_KEY not in table.stdout + table.stderr + shown.stdout + shown.stderr
