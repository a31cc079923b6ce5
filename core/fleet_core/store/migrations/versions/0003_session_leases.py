"""Session lease epochs (``fleet_session_leases``): the fencing token of Session ownership.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "fleet_session_leases",
        sa.Column("session_id", sa.String(64), primary_key=True),
        sa.Column("epoch", sa.Integer, nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("fleet_session_leases")
