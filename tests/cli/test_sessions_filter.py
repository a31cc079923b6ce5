"""``fleet-lsp sessions`` filters: --host, --user, --since (a duration or an instant) and --mine
(this host and OS user), combined with AND; a bad --since is a usage error in one line."""

from __future__ import annotations

import getpass
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import update

from fleet_core.store import Store, schema
from fleet_core.store.database import database_url
from tests.cli.test_cli import run

HOST = "cli-filter-host"


def _seed(state: Path) -> None:
    store = Store.open(database_url(None, state), state)
    try:
        store.create_session("mine-new", "hybrid", owner=(HOST, getpass.getuser()))
        store.create_session("mine-old", "hybrid", owner=(HOST, getpass.getuser()))
        store.create_session("theirs", "hybrid", owner=("other-host", "someone"))
        store.create_session("legacy", "hybrid")
        with store.engine.begin() as conn:
            conn.execute(
                update(schema.sessions)
                .where(schema.sessions.c.session_id == "mine-old")
                .values(updated_at=datetime.now(UTC) - timedelta(days=30))
            )
    finally:
        store.close()


def _listed(tmp_path: Path, *args: str) -> list[str]:
    out = run(tmp_path, "sessions", "--json", *args, env={"FLEET_HOST_NAME": HOST})
    assert out.returncode == 0, out.stderr
    return sorted(s["sessionId"] for s in json.loads(out.stdout))


def test_the_sessions_command_filters_by_host_user_and_recency(tmp_path: Path) -> None:
    _seed(tmp_path / "state")
    assert _listed(tmp_path, "--mine") == ["mine-new", "mine-old"]
    assert _listed(tmp_path, "--mine", "--since", "7d") == ["mine-new"]
    assert _listed(tmp_path, "--user", "someone", "--host", HOST) == []
    week = (datetime.now(UTC) - timedelta(days=7)).isoformat()
    assert _listed(tmp_path, "--since", week) == ["legacy", "mine-new", "theirs"]
    table = run(tmp_path, "sessions", "--host", "other-host")
    assert table.returncode == 0 and "someone@other-host" in table.stdout
    assert "mine-new" not in table.stdout and "legacy" not in table.stdout


def test_a_bad_since_is_a_usage_error_in_one_line(tmp_path: Path) -> None:
    out = run(tmp_path, "sessions", "--since", "soon")
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "--since" in lines[0] and "7d" in lines[0]
