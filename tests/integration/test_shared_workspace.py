"""Workspace content follows a Session across hosts (issue 21): two runtimes, each with its own
state directory ("host A" and "host B"), on one PostgreSQL database. Files, artifacts, Session
Skills and the dataset digest a host publishes at its commits are materialized by the other when
it loads or reads the Session; a Turn there reads them and answers the same. The scripted
model's code really runs in the local sandbox."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import psycopg
import pytest

from fleet_core.api import FleetRuntime
from fleet_core.config import EffectiveConfig, load_config
from fleet_core.engine.scripted_lm import SwitchableLms, action, scripted_lm, submit
from fleet_core.models import TurnRequest, WorkspaceFile

pytestmark = pytest.mark.postgres

SUM = (
    "rows = open('files/sales.csv').read().split()[1:]\n"
    "total = sum(float(r.split(',')[1]) for r in rows)\n"
    "open('artifacts/total.txt', 'w').write(f'{total:.2f}')\n"
    "print(total)"
)


def _reset(url: str) -> None:
    with psycopg.connect(url.replace("+psycopg", ""), autocommit=True) as conn:
        conn.execute("DROP SCHEMA public CASCADE")
        conn.execute("CREATE SCHEMA public")


def _config(url: str, state: Path, **settings: str) -> EffectiveConfig:
    environ = {"FLEET_STATE_DIR": str(state), "FLEET_DATABASE_URL": url}
    environ |= {f"FLEET_STORAGE__{k.upper()}": v for k, v in settings.items()}
    return load_config(environ=environ, cwd=state.parent)


@pytest.fixture(params=["postgresql", "directory"])
async def hosts(
    request: pytest.FixtureRequest, postgres_database: str, tmp_path: Path
) -> AsyncIterator[tuple[FleetRuntime, FleetRuntime, SwitchableLms]]:
    """Two hosts on one database: PostgreSQL with its own blob store, or one SQLite file with
    blobs in a directory both hosts reach (as a shared mount would be)."""
    settings: dict[str, str] = {}
    if request.param == "postgresql":
        _reset(postgres_database)
        url = postgres_database
    else:
        url = f"sqlite:///{tmp_path / 'shared.db'}"
        settings = {"blob_backend": "directory", "blob_dir": str(tmp_path / "blobs")}
    lms = SwitchableLms()
    opened = [
        await FleetRuntime.open(
            _config(url, tmp_path / name / "state", **settings),
            lm_provider=lms,
            trace_export="deferred",
        )
        for name in ("a", "b")
    ]
    yield opened[0], opened[1], lms
    for runtime in opened:
        await runtime.close()


def _under(files: list[WorkspaceFile], prefix: str) -> list[WorkspaceFile]:
    return [f for f in files if f.path.startswith(prefix)]


async def _turn(runtime: FleetRuntime, lms: SwitchableLms, session_id: str) -> str:
    lms.root = scripted_lm([action(SUM), submit("open('artifacts/total.txt').read()")])
    result = await runtime.run_turn(TurnRequest(session_id=session_id, task="total the sales"))
    assert result.status == "completed", result.error
    return result.answer


async def test_a_session_continues_on_another_host_with_its_files_artifacts_and_dataset(
    hosts: tuple[FleetRuntime, FleetRuntime, SwitchableLms], tmp_path: Path
) -> None:
    a, b, lms = hosts
    sales = tmp_path / "sales.csv"
    sales.write_text("region,amount\nNorth,100.5\nSouth,50\n")
    await a.new_session("shared", mode="rlm")
    await a.attach("shared", sales)
    dataset = await a.set_dataset("shared", "files/sales.csv")
    assert await _turn(a, lms, "shared") == "150.50"
    await a.write_file("shared", "artifacts/extra.txt", b"from A")
    assert await _turn(a, lms, "shared") == "150.50"
    await a.close_session("shared")

    # host B: the same files, artifacts and dataset digest, before and after loading
    listed = await b.list_workspace("shared")
    assert [f.path for f in listed["files"] if f.path.startswith("files/")] == ["files/sales.csv"]
    skills_a = [
        f for f in (await a.list_workspace("shared"))["files"] if f.path.startswith("skills/")
    ]
    assert skills_a and [f for f in listed["files"] if f.path.startswith("skills/")] == skills_a
    assert sorted(f.path for f in listed["artifacts"]) == [
        "artifacts/extra.txt",
        "artifacts/total.txt",
    ]
    await b.load_session("shared")
    assert (await b.check_dataset("shared")) == dataset
    assert await b.read_file("shared", "artifacts/extra.txt") == b"from A"
    sales.write_text("region,amount\nNorth,1\nSouth,2\n")  # A's original is not B's source
    assert await _turn(b, lms, "shared") == "150.50"  # B read A's files: the same answer
    await b.write_file("shared", "artifacts/from_b.txt", b"written on B")
    await b.delete_file("shared", "artifacts/extra.txt")
    await b.close_session("shared")

    # back on A: B's artifacts are readable, B's delete is applied, after A reloads too
    assert await a.read_file("shared", "artifacts/from_b.txt") == b"written on B"
    await a.load_session("shared")
    paths = [f.path for f in (await a.list_workspace("shared"))["artifacts"]]
    assert paths == ["artifacts/from_b.txt", "artifacts/total.txt"]
    assert await _turn(a, lms, "shared") == "150.50"
    assert len(await b.history("shared")) == 4


async def test_deleting_a_session_collects_its_blobs_and_shared_blobs_are_kept(
    hosts: tuple[FleetRuntime, FleetRuntime, SwitchableLms], tmp_path: Path
) -> None:
    a, _b, _lms = hosts
    await a.new_session("one")
    await a.new_session("two")
    await a.write_file("one", "files/same.txt", b"identical bytes")
    await a.write_file("two", "files/same.txt", b"identical bytes")
    await a.write_file("one", "files/only.txt", b"only in one")
    assert a.store.blob_counts()[0] == 2  # the identical file is stored once
    await a.delete_session("one")
    assert await a.collect_blobs(grace_seconds=0) == 1  # only.txt: nothing refers to it
    assert a.store.blob_counts()[0] == 1
    assert await a.read_file("two", "files/same.txt") == b"identical bytes"


async def test_an_approved_program_and_candidates_follow_the_session_to_another_host(
    hosts: tuple[FleetRuntime, FleetRuntime, SwitchableLms],
) -> None:
    """``<state_dir>/optimization/<session>/`` (active.json, candidates) is published like the
    workspace (``Optimization.approve`` publishes at once) and served by B's next Turn."""
    from fleet_core.optimization.program import ProgramState

    a, b, lms = hosts
    await a.new_session("tuned", mode="rlm")
    program = ProgramState(components={"triage": "Route every task to rlm."})
    directory = a.config.state_dir / "optimization" / "tuned"
    (directory / "candidates" / "v1").mkdir(parents=True)
    (directory / "candidates" / "v1" / "report.md").write_text("# v1\n")
    (directory / "candidates" / ".staging-x").mkdir()  # a run's staging: never published
    (directory / "candidates" / ".staging-x" / "program.json").write_text("{}")
    (directory / "active.json").write_bytes(program.canonical())
    await a.sync_session("tuned", publish=True)  # what approve does after writing active.json
    await a.close_session("tuned")

    await b.write_file("tuned", "files/sales.csv", b"region,amount\nNorth,1\n")  # takes it
    copied = b.config.state_dir / "optimization" / "tuned"
    assert (copied / "active.json").read_bytes() == program.canonical()
    assert (copied / "candidates" / "v1" / "report.md").read_text() == "# v1\n"
    assert not (copied / "candidates" / ".staging-x").exists()
    lms.root = scripted_lm([action(SUM), submit("open('artifacts/total.txt').read()")])
    result = await b.run_turn(TurnRequest(session_id="tuned", task="total the sales"))
    assert result.status == "completed", result.error
    assert result.compiled_program_digest == program.digest()  # B serves A's approval

    (copied / "active.json").unlink()  # B withdraws it; A follows when it reads the Session
    await b.sync_session("tuned", publish=True)
    await b.close_session("tuned")
    await a.sync_session("tuned")
    assert not (directory / "active.json").exists()
    assert (directory / "candidates" / "v1" / "report.md").exists()
