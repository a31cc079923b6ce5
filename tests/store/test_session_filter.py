"""``fleet/session/list``'s filters in the store and the runtime (SQLite and PostgreSQL): owner
host, owner user and recency combine with AND and with paging; a Session records the host and OS
user of the process that last created or took it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import update

from fleet_core.api import FleetRuntime
from fleet_core.config import EffectiveConfig, load_config, owner_identity
from fleet_core.errors import InvalidInput
from fleet_core.store import Store, schema
from fleet_core.store.database import database_url

HOSTS = {"a1": ("host-a", "ann"), "a2": ("host-a", "bob"), "b1": ("host-b", "ann")}


def _store(config: EffectiveConfig) -> Store:
    secret = config.secrets.database_url
    url = database_url(secret.get_secret_value() if secret else None, config.state_dir)
    return Store.open(url, config.state_dir)


def _age(store: Store, session_id: str, days: int) -> None:
    stamp = datetime.now(UTC) - timedelta(days=days)
    with store.engine.begin() as conn:
        conn.execute(
            update(schema.sessions)
            .where(schema.sessions.c.session_id == session_id)
            .values(updated_at=stamp)
        )


def _ids(store: Store, **filters: object) -> list[str]:
    found, _more = store.session_page(limit=100, **filters)  # type: ignore[arg-type]
    return [s.session_id for s in found]


def test_the_store_filters_by_owner_host_user_and_recency_with_and(
    fleet_config: EffectiveConfig,
) -> None:
    store = _store(fleet_config)
    try:
        for session_id, owner in HOSTS.items():
            store.create_session(session_id, "hybrid", owner=owner)
        store.create_session("legacy", "hybrid")  # stored before owners existed
        _age(store, "a2", days=10)
        assert store.get_session("a1").owner_host == "host-a"
        assert store.get_session("legacy").owner_host is None
        assert sorted(_ids(store, owner_host="host-a")) == ["a1", "a2"]
        assert sorted(_ids(store, owner_user="ann")) == ["a1", "b1"]
        assert _ids(store, owner_host="host-a", owner_user="ann") == ["a1"]
        week = datetime.now(UTC) - timedelta(days=7)
        assert sorted(_ids(store, updated_since=week)) == ["a1", "b1", "legacy"]
        assert _ids(store, owner_host="host-a", updated_since=week) == ["a1"]
        assert _ids(store, owner_host="nowhere") == []
        assert len(_ids(store)) == 4
    finally:
        store.close()


def test_taking_a_session_records_the_new_owner_without_reordering(
    fleet_config: EffectiveConfig,
) -> None:
    store = _store(fleet_config)
    try:
        store.create_session("moved", "hybrid", owner=("host-a", "ann"))
        before = store.get_session("moved").updated_at
        store.record_owner("moved", ("host-b", "bob"))
        after = store.get_session("moved")
        assert (after.owner_host, after.owner_user) == ("host-b", "bob")
        assert after.updated_at == before
    finally:
        store.close()


async def test_filtered_pages_concatenate_to_the_filtered_listing(
    fleet_environ: dict[str, str], tmp_path: Path
) -> None:
    environ = fleet_environ | {"FLEET_HOST_NAME": "host-here"}
    config = load_config(environ=environ, cwd=tmp_path)
    runtime = await FleetRuntime.open(config)
    try:
        here, user = owner_identity(config)
        assert here == "host-here" and runtime.owner == (here, user)
        mine = [f"m{n:02}" for n in range(7)]
        for session_id in mine:
            info = await runtime.new_session(session_id)
            assert (info.owner_host, info.owner_user) == (here, user)
        store = runtime.store
        for n in range(5):  # another host's Sessions in the same database
            store.create_session(f"o{n}", "hybrid", owner=("elsewhere", user))
        seen: list[str] = []
        cursor = None
        while True:
            page = await runtime.sessions_page(cursor, 3, owner_host=here, owner_user=user)
            assert len(page.sessions) <= 3
            seen += [s.session_id for s in page.sessions]
            cursor = page.next_cursor
            if cursor is None:
                break
        assert sorted(seen) == mine and len(seen) == len(set(seen))
        recent = await runtime.sessions_page(
            updated_since=(datetime.now(UTC) - timedelta(hours=1)).isoformat()
        )
        assert len(recent.sessions) == 12
        future = await runtime.sessions_page(updated_since="2999-01-01T00:00:00")
        assert future.sessions == []
        with pytest.raises(InvalidInput, match="updatedSince"):
            await runtime.sessions_page(updated_since="last tuesday")
        loaded = await runtime.load_session("o1")  # taking it makes this process its owner
        assert loaded.owner_host == here
        assert (await runtime.describe_session("o1")).owner_host == here
    finally:
        await runtime.close()
