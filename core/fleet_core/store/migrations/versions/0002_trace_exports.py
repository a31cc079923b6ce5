"""The durable trace export queue (``fleet_trace_exports``).

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import BYTEA

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "fleet_trace_exports",
        sa.Column("trace_id", sa.String(64), primary_key=True),
        sa.Column("session_id", sa.String(64), nullable=False),
        sa.Column("turn_id", sa.String(64), nullable=False),
        sa.Column("scope", sa.String(16), nullable=False),
        sa.Column("record", sa.LargeBinary().with_variant(BYTEA(), "postgresql"), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("last_error", sa.Text, nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_fleet_trace_exports_created", "fleet_trace_exports", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_fleet_trace_exports_created", "fleet_trace_exports")
    op.drop_table("fleet_trace_exports")
