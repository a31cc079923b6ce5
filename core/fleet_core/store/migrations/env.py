"""Alembic environment: always run with a connection handed in by ``fleet_core.store``."""

from __future__ import annotations

from alembic import context

from fleet_core.store.schema import metadata

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=metadata,
    version_table="fleet_alembic_version",
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
