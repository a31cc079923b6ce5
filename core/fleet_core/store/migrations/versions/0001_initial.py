"""Initial schema: sessions, turns, memories, artifacts, replays, labels, candidates.

The tables are built from ``fleet_core.store.schema`` as it stands at this revision (the digest
is pinned in ``tests/store/test_migrations.py``). Before changing a table in schema.py,
freeze this file by copying the table definitions in, then add a new revision for the change.
``fleet_sessions`` is frozen here (revision 0004 adds its owner columns).

Revision ID: 0001
Revises:
"""

from __future__ import annotations

from alembic import op
from sqlalchemy import Column, DateTime, Integer, MetaData, String, Table, Text

from fleet_core.store import schema

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

# fleet_sessions as it stood at 0.1.0 (frozen before revision 0004 changed it in schema.py).
_frozen = MetaData()
_sessions_0001 = Table(
    "fleet_sessions",
    _frozen,
    Column("session_id", String(64), primary_key=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    Column("mode", String(16), nullable=False),
    Column("selections", schema.Json, nullable=False),
    Column("dataset", schema.Json, nullable=True),
    Column("memory_summary", Text, nullable=False, default=""),
    Column("turn_count", Integer, nullable=False, default=0),
)

_TABLES = (
    _sessions_0001,
    schema.turns,
    schema.memories,
    schema.artifacts,
    schema.replay_snapshots,
    schema.trace_labels,
    schema.optimization_candidates,
)


def upgrade() -> None:
    bind = op.get_bind()
    for table in _TABLES:
        table.create(bind, checkfirst=False)


def downgrade() -> None:
    bind = op.get_bind()
    for table in reversed(_TABLES):
        table.drop(bind)
