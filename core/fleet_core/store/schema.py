"""The one schema, in SQLAlchemy Core; Alembic migrations create it."""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.dialects.postgresql import BYTEA, JSONB

metadata = MetaData()
Json = JSON().with_variant(JSONB(), "postgresql")
Blob = LargeBinary().with_variant(BYTEA(), "postgresql")


def _ts(name: str) -> Column[object]:
    return Column(name, DateTime(timezone=True), nullable=False)


sessions = Table(
    "fleet_sessions",
    metadata,
    Column("session_id", String(64), primary_key=True),
    _ts("created_at"),
    _ts("updated_at"),
    Column("mode", String(16), nullable=False),
    Column("selections", Json, nullable=False),
    Column("dataset", Json, nullable=True),
    Column("memory_summary", Text, nullable=False, default=""),
    Column("turn_count", Integer, nullable=False, default=0),
    # The host name and OS user of the process that last created or took the Session (0004).
    Column("owner_host", String(255), nullable=True),
    Column("owner_user", String(255), nullable=True),
    Index("ix_fleet_sessions_updated", "updated_at"),
)

turns = Table(
    "fleet_turns",
    metadata,
    Column("turn_id", String(64), primary_key=True),
    Column(
        "session_id",
        String(64),
        ForeignKey("fleet_sessions.session_id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("seq", Integer, nullable=False),
    Column("idempotency_key", String(128), nullable=True),
    Column("task", Text, nullable=False),
    Column("task_sha256", String(64), nullable=False),
    Column("status", String(16), nullable=False),
    Column("route", String(16), nullable=True),
    Column("answer", Text, nullable=True),
    Column("learned_note", Text, nullable=True),
    Column("trace_id", String(64), nullable=True),
    Column("result", Json, nullable=False),
    Column("error", Json, nullable=True),
    _ts("created_at"),
    _ts("updated_at"),
    UniqueConstraint("session_id", "idempotency_key", name="uq_fleet_turns_idempotency"),
    Index("ix_fleet_turns_session_seq", "session_id", "seq"),
    Index("ix_fleet_turns_status", "status"),
)

memories = Table(
    "fleet_memories",
    metadata,
    Column("memory_id", String(64), primary_key=True),
    Column(
        "session_id",
        String(64),
        ForeignKey("fleet_sessions.session_id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("kind", String(32), nullable=False),
    Column("content", Text, nullable=False),
    Column("sources", Json, nullable=False),
    Column("reviewed", Boolean, nullable=False, default=False),
    _ts("created_at"),
    _ts("updated_at"),
    Index("ix_fleet_memories_session", "session_id"),
)

artifacts = Table(
    "fleet_artifacts",
    metadata,
    Column("artifact_id", Integer, primary_key=True, autoincrement=True),
    Column(
        "session_id",
        String(64),
        ForeignKey("fleet_sessions.session_id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("turn_id", String(64), ForeignKey("fleet_turns.turn_id", ondelete="SET NULL")),
    Column("path", Text, nullable=False),
    Column("root_path", Text, nullable=False),
    Column("sha256", String(64), nullable=False),
    Column("size_bytes", Integer, nullable=False),
    Column("agent_id", String(128), nullable=False),
    Column("source_sandbox", String(128), nullable=True),
    Column("parent_chain", Json, nullable=False),
    _ts("created_at"),
    Index("ix_fleet_artifacts_session_path", "session_id", "path"),
)

replay_snapshots = Table(
    "fleet_replay_snapshots",
    metadata,
    Column(
        "turn_id",
        String(64),
        ForeignKey("fleet_turns.turn_id", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("session_id", String(64), nullable=False),
    Column("sha256", String(64), nullable=False),
    Column("content", Blob, nullable=False),
    _ts("created_at"),
)

trace_labels = Table(
    "fleet_trace_labels",
    metadata,
    Column("trace_id", String(64), primary_key=True),
    Column("session_id", String(64), nullable=True),
    Column("turn_id", String(64), ForeignKey("fleet_turns.turn_id", ondelete="SET NULL")),
    Column("labels", Json, nullable=False),
    Column("eligible", Boolean, nullable=False, default=False),
    Column("ineligible_reason", Text, nullable=True),
    _ts("updated_at"),
)

optimization_candidates = Table(
    "fleet_optimization_candidates",
    metadata,
    Column("candidate_id", String(64), primary_key=True),
    Column("session_id", String(64), nullable=True),
    Column("program_digest", String(64), nullable=False),
    Column("status", String(16), nullable=False),
    Column("scores", Json, nullable=False),
    Column("program", Json, nullable=False),
    _ts("created_at"),
    _ts("updated_at"),
)

# The durable trace export queue: a finished Turn's encoded trace record is inserted in the
# Turn's own commit and deleted once MLflow has it (fleet_core.observability.export).
trace_exports = Table(
    "fleet_trace_exports",
    metadata,
    Column("trace_id", String(64), primary_key=True),
    Column("session_id", String(64), nullable=False),
    Column("turn_id", String(64), nullable=False),
    Column("scope", String(16), nullable=False),
    Column("record", Blob, nullable=False),
    Column("attempts", Integer, nullable=False, default=0),
    Column("last_error", Text, nullable=True),
    _ts("created_at"),
    _ts("updated_at"),
    # The host whose Turn queued the row, and the earliest time any exporter retries it after
    # a failure (per-row backoff with jitter, 0004; NULL = due now).
    Column("origin_host", String(255), nullable=True),
    Column("next_attempt_at", DateTime(timezone=True), nullable=True),
    Index("ix_fleet_trace_exports_created", "created_at"),
    Index("ix_fleet_trace_exports_next_attempt", "next_attempt_at"),
)

# PostgreSQL Session leases: a fencing epoch per Session, bumped by every process that takes the
# Session's advisory lock. Commits into the Session check it under the row lock
# (fleet_core.store.ownership), so a process that lost the lock can never commit afterwards.
session_leases = Table(
    "fleet_session_leases",
    metadata,
    Column("session_id", String(64), primary_key=True),
    Column("epoch", Integer, nullable=False),
    _ts("updated_at"),
)

# Workspace content (fleet_core.blobs, docs/storage.md; 0005). ``fleet_blobs`` is the index of
# every stored blob, whatever the backend (its bytes: ``fleet_blob_chunks`` for the PostgreSQL
# backend, files or objects for the others); ``touched_at`` is the last time a commit referred
# to it (garbage collection spares blobs touched within its grace period). A Session's published
# files are its ``fleet_workspace_entries``; ``fleet_workspace_heads.version`` grows with every
# publish, so a host knows in one read whether its materialized copy is current.
blobs = Table(
    "fleet_blobs",
    metadata,
    Column("digest", String(64), primary_key=True),
    Column("size_bytes", BigInteger, nullable=False),
    Column("chunk_count", Integer, nullable=False),
    _ts("created_at"),
    _ts("touched_at"),
)

blob_chunks = Table(
    "fleet_blob_chunks",
    metadata,
    Column(
        "digest",
        String(64),
        ForeignKey("fleet_blobs.digest", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("seq", Integer, primary_key=True),
    Column("data", Blob, nullable=False),
)

workspace_entries = Table(
    "fleet_workspace_entries",
    metadata,
    Column(
        "session_id",
        String(64),
        ForeignKey("fleet_sessions.session_id", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("path", Text, primary_key=True),
    Column("sha256", String(64), nullable=False),
    Column("size_bytes", BigInteger, nullable=False),
    _ts("updated_at"),
    Index("ix_fleet_workspace_entries_sha256", "sha256"),
)

workspace_heads = Table(
    "fleet_workspace_heads",
    metadata,
    Column(
        "session_id",
        String(64),
        ForeignKey("fleet_sessions.session_id", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("version", Integer, nullable=False),
    _ts("updated_at"),
)
