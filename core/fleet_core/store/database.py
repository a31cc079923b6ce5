"""Engine creation, and migrations under a cross-process lock (file lock or advisory lock)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from filelock import FileLock
from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError
from sqlalchemy.pool import NullPool, QueuePool

from fleet_core.errors import ConfigError, StoreError

MIGRATIONS = Path(__file__).parent / "migrations"
MIGRATION_LOCK_KEY = 0x464C4545  # "FLEE": the advisory lock guarding migrations


def database_url(secret_url: str | None, state_dir: Path) -> str:
    """The configured URL, or the embedded SQLite database under the state directory."""
    if not secret_url:
        return f"sqlite:///{state_dir / 'fleet.db'}"
    try:
        url = make_url(secret_url)
    except ArgumentError:
        raise ConfigError("FLEET_DATABASE_URL is not a valid database URL") from None
    if url.drivername in ("postgresql", "postgres"):
        url = url.set(drivername="postgresql+psycopg")
    if url.drivername not in ("postgresql+psycopg", "sqlite"):
        raise ConfigError(
            f"FLEET_DATABASE_URL uses driver '{url.drivername}'; "
            "use postgresql+psycopg://... or sqlite:///..."
        )
    return url.render_as_string(hide_password=False)


def create_db_engine(url: str, *, pool_size: int = 5, max_overflow: int = 10) -> Engine:
    """The engine for ``url``. PostgreSQL: a pool of ``pool_size`` connections kept open plus
    up to ``max_overflow`` more under load (``storage.pool_size`` / ``storage.max_overflow``;
    the Session lease holds one more, docs/deployment.md). SQLite: a small fixed pool."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database:
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        # A small pool: opening a connection (and its pragmas) costs about a millisecond, more
        # than a typical read; pysqlite connections are shared across threads by SQLAlchemy.
        engine = create_engine(
            url,
            poolclass=QueuePool,
            pool_size=4,
            max_overflow=8,
            connect_args={"timeout": 30, "check_same_thread": False},
        )
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    return create_engine(
        url,
        pool_size=pool_size,
        max_overflow=max_overflow,
        pool_pre_ping=True,
        pool_recycle=1800,
        # Keepalives and a TCP user timeout: a connection to a vanished server fails within
        # seconds instead of hanging (the Session lease probe relies on it).
        connect_args={
            "connect_timeout": 10,
            "keepalives": 1,
            "keepalives_idle": 10,
            "keepalives_interval": 5,
            "keepalives_count": 3,
            "tcp_user_timeout": 15_000,
        },
    )


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def migrate(engine: Engine, lock_dir: Path) -> None:
    """Bring the schema to head; safe when several processes start at once."""
    if engine.dialect.name == "sqlite":
        lock_dir.mkdir(parents=True, exist_ok=True)
        with FileLock(lock_dir / "migrate.lock", timeout=120), engine.begin() as connection:
            _upgrade(connection)
        return
    with engine.begin() as connection:
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY})
        _upgrade(connection)


@contextmanager
def advisory_lock(url: str, key: int) -> Iterator[None]:
    """Hold PostgreSQL's transaction-scoped advisory lock ``key`` on a connection of its own
    for the block (other processes taking it wait); other databases need none and pass."""
    if make_url(url).drivername.split("+")[0] not in ("postgresql", "postgres"):
        yield
        return
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.begin() as conn:  # the lock is released when this transaction ends
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": key})
            yield
    finally:
        engine.dispose()


def _upgrade(connection: Any) -> None:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    command.upgrade(config, "head")


def db_reason(exc: DBAPIError) -> str:
    """The driver's own first line (no SQL, no parameters): safe to show a person."""
    text_ = str(exc.orig).strip() if exc.orig is not None else ""
    return text_.splitlines()[0] if text_ else "unknown database error"


@contextmanager
def store_errors(action: str) -> Iterator[None]:
    """Database errors leave the store as ``StoreError`` with a message, never raw."""
    try:
        yield
    except DBAPIError as exc:
        raise StoreError(f"The database failed to {action}: {db_reason(exc)}") from None
