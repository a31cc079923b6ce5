"""Session owners (host, OS user) and per-row trace export backoff.

``fleet_sessions`` gains ``owner_host`` and ``owner_user`` (the process that last created or
took the Session; NULL for Sessions stored before) and an index on ``updated_at`` for the
recency filter of ``fleet/session/list``. ``fleet_trace_exports`` gains ``origin_host`` (the
host whose Turn queued the row) and ``next_attempt_at`` (a failed row is not retried before it:
per-row backoff with jitter, shared by every exporter on the database). On PostgreSQL it also
creates the schema ``fleet_mlflow``, where the default trace destination keeps MLflow's tables
when the database is shared (fleet_core.observability.destination).

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("fleet_sessions") as batch:
        batch.add_column(sa.Column("owner_host", sa.String(255), nullable=True))
        batch.add_column(sa.Column("owner_user", sa.String(255), nullable=True))
    op.create_index("ix_fleet_sessions_updated", "fleet_sessions", ["updated_at"])
    with op.batch_alter_table("fleet_trace_exports") as batch:
        batch.add_column(sa.Column("origin_host", sa.String(255), nullable=True))
        batch.add_column(sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=True))
    op.create_index(
        "ix_fleet_trace_exports_next_attempt", "fleet_trace_exports", ["next_attempt_at"]
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute("CREATE SCHEMA IF NOT EXISTS fleet_mlflow")


def downgrade() -> None:
    op.drop_index("ix_fleet_trace_exports_next_attempt", "fleet_trace_exports")
    with op.batch_alter_table("fleet_trace_exports") as batch:
        batch.drop_column("next_attempt_at")
        batch.drop_column("origin_host")
    op.drop_index("ix_fleet_sessions_updated", "fleet_sessions")
    with op.batch_alter_table("fleet_sessions") as batch:
        batch.drop_column("owner_user")
        batch.drop_column("owner_host")
