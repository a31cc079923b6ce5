"""Initial schema: sessions, turns, memories, artifacts, replays, labels, candidates.

The tables are built from ``fleet_core.store.schema`` as it stands at this revision (the digest
is pinned in ``tests/store/test_migrations.py``). Before changing a table in schema.py,
freeze this file by copying the table definitions in, then add a new revision for the change.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

from alembic import op

from fleet_core.store import schema

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

_TABLES = (
    schema.sessions,
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
