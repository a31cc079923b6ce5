"""``fleet-lsp doctor`` checks the workspace content store (docs/storage.md): a probe blob is
stored and read back through the configured backend and nothing is left behind; a backend that
cannot store fails with what to fix; without sharing it says so."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import func, select

from fleet_core.config import load_config
from fleet_core.store import Store
from fleet_core.store.database import database_url
from fleet_lsp.cli.doctor import check_blob_store


def _blob_rows(environ: dict[str, str], state: Path) -> int:
    from fleet_core.store import schema

    table = schema.metadata.tables["fleet_blobs"]
    store = Store.open(database_url(environ.get("FLEET_DATABASE_URL"), state), state)
    try:
        with store.engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(table)).scalar() or 0)
    finally:
        store.close()


def test_doctor_probes_the_default_content_store(
    fleet_environ: dict[str, str], tmp_path: Path
) -> None:
    config = load_config(environ=fleet_environ, cwd=tmp_path)
    check = check_blob_store(config)
    assert check.status == "ok", check
    if "FLEET_DATABASE_URL" in fleet_environ:
        assert check.detail.startswith("postgresql: a probe blob stored and read back")
        assert _blob_rows(fleet_environ, config.state_dir) == 0  # rolled back
    else:
        assert check.detail.startswith("local:") and "nothing shared" in check.detail


def test_doctor_probes_a_directory_store_and_fails_one_it_cannot_write(tmp_path: Path) -> None:
    environ = {"FLEET_STATE_DIR": str(tmp_path / "state")}
    blob_dir = tmp_path / "blobs"
    config = load_config(
        {"storage": {"blob_backend": "directory", "blob_dir": str(blob_dir)}},
        environ=environ,
        cwd=tmp_path,
    )
    check = check_blob_store(config)
    assert check.status == "ok" and check.detail.startswith("directory:"), check
    assert [p for p in blob_dir.rglob("*") if p.is_file()] == []  # the probe was deleted
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("a file where the blob root should be")
    config = load_config(
        {"storage": {"blob_backend": "directory", "blob_dir": str(blocked)}},
        environ=environ,
        cwd=tmp_path,
    )
    failed = check_blob_store(config)
    assert failed.status == "fail" and failed.fix, failed
