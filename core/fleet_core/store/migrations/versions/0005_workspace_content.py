"""Workspace content shared through the blob store (fleet_core.blobs, docs/storage.md).

``fleet_blobs`` indexes every stored blob by sha256 (whatever the backend holds its bytes);
``fleet_blob_chunks`` holds the bytes of the PostgreSQL backend in chunked rows;
``fleet_workspace_entries`` is each Session's published manifest (path -> digest, size) and
``fleet_workspace_heads`` its version, bumped by every publish.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import BYTEA

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def _ts(name: str) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=False)


def upgrade() -> None:
    op.create_table(
        "fleet_blobs",
        sa.Column("digest", sa.String(64), primary_key=True),
        sa.Column("size_bytes", sa.BigInteger, nullable=False),
        sa.Column("chunk_count", sa.Integer, nullable=False),
        _ts("created_at"),
        _ts("touched_at"),
    )
    op.create_table(
        "fleet_blob_chunks",
        sa.Column(
            "digest",
            sa.String(64),
            sa.ForeignKey("fleet_blobs.digest", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("seq", sa.Integer, primary_key=True),
        sa.Column("data", sa.LargeBinary().with_variant(BYTEA(), "postgresql"), nullable=False),
    )
    op.create_table(
        "fleet_workspace_entries",
        sa.Column(
            "session_id",
            sa.String(64),
            sa.ForeignKey("fleet_sessions.session_id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("path", sa.Text, primary_key=True),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("size_bytes", sa.BigInteger, nullable=False),
        _ts("updated_at"),
    )
    op.create_index("ix_fleet_workspace_entries_sha256", "fleet_workspace_entries", ["sha256"])
    op.create_table(
        "fleet_workspace_heads",
        sa.Column(
            "session_id",
            sa.String(64),
            sa.ForeignKey("fleet_sessions.session_id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("version", sa.Integer, nullable=False),
        _ts("updated_at"),
    )


def downgrade() -> None:
    op.drop_table("fleet_workspace_heads")
    op.drop_index("ix_fleet_workspace_entries_sha256", "fleet_workspace_entries")
    op.drop_table("fleet_workspace_entries")
    op.drop_table("fleet_blob_chunks")
    op.drop_table("fleet_blobs")
