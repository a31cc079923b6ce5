"""Sessions, workspace files, datasets and restarts through FleetRuntime, on both databases."""

from __future__ import annotations

import asyncio
import os
import stat
import time
from pathlib import Path

import anyio
import pytest

from fleet_core import workspace as workspace_module
from fleet_core.api import FleetRuntime
from fleet_core.config import EffectiveConfig, load_config
from fleet_core.errors import (
    DatasetChanged,
    FileTooLarge,
    InvalidInput,
    MemoryNotFound,
    SessionExists,
    SessionNotFound,
    WorkspaceFileNotFound,
    WorkspacePathError,
)
from fleet_core.models import TurnError
from fleet_core.store import TurnOutcome
from fleet_core.workspace import STAGING_DIR, TEMP_PREFIX


async def test_sessions_are_created_listed_described_and_deleted(runtime: FleetRuntime) -> None:
    created = await runtime.new_session("alpha", mode="rlm")
    assert (created.session_id, created.mode, created.turn_count) == ("alpha", "rlm", 0)
    generated = await runtime.new_session()
    assert generated.session_id.startswith("sess_") and generated.mode == "hybrid"
    listed = {info.session_id for info in await runtime.list_sessions()}
    assert listed == {"alpha", generated.session_id}
    assert (await runtime.describe_session("alpha")).mode == "rlm"
    await runtime.delete_session("alpha")
    with pytest.raises(SessionNotFound, match="No session 'alpha'"):
        await runtime.describe_session("alpha")
    assert not (runtime.config.state_dir / "workspaces" / "alpha").exists()


async def test_duplicate_bad_and_unknown_sessions_give_clear_errors(
    runtime: FleetRuntime,
) -> None:
    await runtime.new_session("dup")
    with pytest.raises(SessionExists, match="already exists"):
        await runtime.new_session("dup")
    with pytest.raises(InvalidInput, match="Invalid session id"):
        await runtime.new_session("../etc")
    with pytest.raises(InvalidInput, match="Unknown mode 'fast'"):
        await runtime.new_session("m", mode="fast")
    with pytest.raises(SessionNotFound):
        await runtime.load_session("missing")


async def test_workspace_paths_from_clients_are_validated(
    runtime: FleetRuntime, tmp_path: Path
) -> None:
    await runtime.new_session("paths")
    for path in ("../x", "/etc/passwd", "files/a\x00", "files\\a", "other/a"):
        with pytest.raises(WorkspacePathError):
            await runtime.write_file("paths", path, b"x")
        with pytest.raises(WorkspacePathError):
            await runtime.read_file("paths", path)
    outside = tmp_path / "outside.txt"
    outside.write_text("host")
    link = runtime.workspace("paths").root / "files" / "link.txt"
    link.symlink_to(outside)
    with pytest.raises(WorkspacePathError, match="symlink"):
        await runtime.read_file("paths", "files/link.txt")
    with pytest.raises(WorkspacePathError, match="symlink"):
        await runtime.set_dataset("paths", "files/link.txt")


async def test_restart_keeps_sessions_files_selections_history_and_notes(
    fleet_config: EffectiveConfig, tmp_path: Path
) -> None:
    source = tmp_path / "sales.csv"
    source.write_text("region,revenue\nnorth,10\nsouth,5\n")
    first = await FleetRuntime.open(fleet_config)
    await first.new_session("keep", mode="flex")
    attached = await first.attach("keep", source)
    await first.set_dataset("keep", "files/sales.csv", description="sales")
    claim = first.store.claim_turn("keep", "sum revenue", None)
    first.store.finish_turn(
        claim.turn_id,
        TurnOutcome(
            status="completed",
            result={"answer": "15"},
            answer="15",
            route="rlm",
            learned_note="revenue is in column 2",
        ),
    )
    await first.close()

    second = await FleetRuntime.open(fleet_config)
    try:
        info = await second.load_session("keep")
        assert info.mode == "flex" and info.turn_count == 1
        assert info.dataset is not None and info.dataset.sha256 == attached.sha256
        assert info.dataset.description == "sales"
        listing = await second.list_workspace("keep")
        assert [f.path for f in listing["files"]] == ["files/sales.csv"]
        history = await second.history("keep")
        assert [(t.task, t.status, t.answer) for t in history] == [
            ("sum revenue", "completed", "15")
        ]
        assert "revenue is in column 2" in await second.memory_summary("keep")
        effective = await second.effective_config("keep")
        assert effective.settings.runtime.execution_mode == "flex"
        assert effective.sources["runtime.execution_mode"] == "session"
    finally:
        await second.close()


async def test_dataset_change_is_detected_at_turn_start(runtime: FleetRuntime) -> None:
    await runtime.new_session("data")
    await runtime.write_file("data", "files/d.csv", b"a,b\n1,2\n")
    selected = await runtime.set_dataset("data", "files/d.csv")
    assert await runtime.check_dataset("data") == selected
    await runtime.write_file("data", "files/d.csv", b"a,b\n1,3\n")
    with pytest.raises(DatasetChanged, match="Dataset source changed; select the new revision"):
        await runtime.check_dataset("data")
    await runtime.clear_dataset("data")
    assert await runtime.check_dataset("data") is None


async def test_a_turn_left_running_by_a_dead_process_is_marked_interrupted(
    fleet_config: EffectiveConfig,
) -> None:
    crashed = await FleetRuntime.open(fleet_config)
    await crashed.new_session("crash")
    claim = crashed.store.claim_turn("crash", "long task", None)
    await crashed.close()  # the process dies: its ownership ends, the row stays running

    restarted = await FleetRuntime.open(fleet_config)
    try:
        [turn] = await restarted.history("crash")
        assert turn.turn_id == claim.turn_id
        assert turn.status == "failed"
        assert turn.error is not None and turn.error.kind == "interrupted"
    finally:
        await restarted.close()


async def test_an_interrupted_turn_names_the_files_it_changed_in_place(
    fleet_environ: dict[str, str], fleet_config: EffectiveConfig
) -> None:
    """Written before the Turn began and left alone: not named. Written in place after it began:
    a committed file is put back from the shared blob store (PostgreSQL) or named as maybe
    incomplete (SQLite: the workspace is the store); new files are named. ``files/`` (read-only
    in a sandbox, attached atomically) never is."""
    crashed = await FleetRuntime.open(fleet_config)
    await crashed.new_session("torn")
    await crashed.write_file("torn", "artifacts/before.csv", b"a\n1\n")
    await crashed.write_file("torn", "artifacts/kept.csv", b"k\n")
    await asyncio.sleep(0.05)
    claim = crashed.store.claim_turn("torn", "long task", None)
    await asyncio.sleep(0.05)
    await crashed.write_file("torn", "files/attached.csv", b"x\n")  # attached meanwhile
    root = fleet_config.state_dir / "workspaces" / "torn"
    (root / "artifacts" / "before.csv").write_bytes(b"a\n")  # the kill came mid-write
    (root / "artifacts" / "table.csv").write_bytes(b"region,rev")
    (root / "memory" / "notes.md").write_text("half a no", encoding="utf-8")
    await crashed.close()

    restarted = await FleetRuntime.open(fleet_config)
    try:
        [turn] = await restarted.history("torn")
        assert turn.turn_id == claim.turn_id and turn.status == "failed"
        error = turn.error
        assert error is not None and error.kind == "interrupted"
        stopped = "The process running this Turn stopped before it finished"
        if "FLEET_DATABASE_URL" in fleet_environ:  # blob_backend auto: postgresql
            assert error.restored == ["artifacts/before.csv"]
            assert error.paths == ["artifacts/table.csv", "memory/notes.md"]
            assert error.message == (
                f"{stopped}; files it was changing were restored to their last commit: "
                "artifacts/before.csv; files it was changing may be incomplete: "
                "artifacts/table.csv, memory/notes.md"
            )
            assert (root / "artifacts" / "before.csv").read_bytes() == b"a\n1\n"
        else:
            assert error.restored is None
            assert error.paths == ["artifacts/before.csv", "artifacts/table.csv", "memory/notes.md"]
            assert error.message == (
                f"{stopped}; files it was changing may be incomplete: "
                "artifacts/before.csv, artifacts/table.csv, memory/notes.md"
            )
            assert (root / "artifacts" / "before.csv").read_bytes() == b"a\n"
        listed = {a.path: a for a in await restarted.list_artifacts("torn")}
        assert listed["artifacts/kept.csv"].size_bytes == 2
    finally:
        await restarted.close()


async def test_a_process_taking_over_a_dead_owners_session_fails_its_turn_as_interrupted(
    fleet_environ: dict[str, str], fleet_config: EffectiveConfig
) -> None:
    """A server that was already running when the owner died never ran startup recovery for
    it: taking the Session (load or a mutation) fails the Turn left running as interrupted,
    with the same account of the files it changed in place; a Turn that failed otherwise
    keeps its error."""
    survivor = await FleetRuntime.open(fleet_config)
    dead = await FleetRuntime.open(fleet_config)
    try:
        await dead.new_session("taken")
        await dead.write_file("taken", "artifacts/table.csv", b"region,total\nNorth,1\n")
        earlier = dead.store.claim_turn("taken", "an earlier task", None)
        failed = TurnError(kind="SandboxError", message="worker died")
        dead.store.finish_turn(
            earlier.turn_id, TurnOutcome(status="failed", result={}, error=failed)
        )
        await asyncio.sleep(0.05)
        claim = dead.store.claim_turn("taken", "long task", None)
        await asyncio.sleep(0.05)
        table = fleet_config.state_dir / "workspaces" / "taken" / "artifacts" / "table.csv"
        table.write_bytes(b"region,to")  # the kill came mid-write
    finally:
        await dead.close()
    try:
        await survivor.load_session("taken")
        first, turn = await survivor.history("taken")
        assert first.error == failed
        assert turn.turn_id == claim.turn_id and turn.status == "failed"
        assert turn.error is not None and turn.error.kind == "interrupted"
        if "FLEET_DATABASE_URL" in fleet_environ:  # blob_backend auto: postgresql
            assert turn.error.restored == ["artifacts/table.csv"] and turn.error.paths is None
            assert table.read_bytes() == b"region,total\nNorth,1\n"
        else:
            assert turn.error.paths == ["artifacts/table.csv"] and turn.error.restored is None
    finally:
        await survivor.close()


async def test_a_running_turn_of_a_live_owner_is_left_alone_at_startup(
    fleet_config: EffectiveConfig,
) -> None:
    owner = await FleetRuntime.open(fleet_config)
    other = None
    try:
        await owner.new_session("live")
        owner.store.claim_turn("live", "still running", None)
        other = await FleetRuntime.open(fleet_config)
        [turn] = await other.history("live")
        assert turn.status == "running"
    finally:
        await owner.close()
        if other is not None:
            await other.close()


async def test_memories_are_stored_and_reviewed_explicitly(runtime: FleetRuntime) -> None:
    await runtime.new_session("mem")
    memory = runtime.store.add_memory("mem", "observation", "north leads", {"turn": "t1"})
    assert [m.reviewed for m in await runtime.memories("mem")] == [False]
    await runtime.review_memory("mem", memory.memory_id)
    [reviewed] = await runtime.memories("mem", reviewed=True)
    assert reviewed.content == "north leads"
    with pytest.raises(MemoryNotFound, match="No memory 'nope'"):
        await runtime.review_memory("mem", "nope")


async def test_attach_over_the_cap_fails_cleanly_and_keeps_the_session_usable(
    fleet_environ: dict[str, str], tmp_path: Path
) -> None:
    config = load_config(environ={**fleet_environ, "FLEET_MAX_FILE_BYTES": "1000"}, cwd=tmp_path)
    runtime = await FleetRuntime.open(config)
    try:
        await runtime.new_session("cap")
        big = tmp_path / "big.csv"
        big.write_bytes(b"x" * 1001)
        with pytest.raises(FileTooLarge, match="nothing was stored"):
            await runtime.attach("cap", big)
        files_dir = runtime.workspace("cap").root / "files"
        assert list(files_dir.iterdir()) == []
        assert (await runtime.list_workspace("cap"))["files"] == []
        small = tmp_path / "small.csv"
        small.write_bytes(b"a,b\n")
        assert (await runtime.attach("cap", small)).size_bytes == 4
    finally:
        await runtime.close()


# ---------------------------------------------------------------------------------------------
# issue 13: attach refusals, staging and its sweep, private workspace directories, deleting
# symlinks, and the commit of a Turn with 1,501 artifacts
# ---------------------------------------------------------------------------------------------


async def _attach_with_guard(runtime: FleetRuntime, source: Path, fifo: Path | None) -> None:
    """Attach ``source``; if it blocks (a FIFO opened for reading), unblock it and fail."""
    try:
        with anyio.fail_after(10):
            await asyncio.shield(runtime.attach("att", source))
    except TimeoutError:
        if fifo is not None:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # frees the blocked reader
        pytest.fail(f"attaching {source} blocked for 10 s")


async def test_attach_refuses_fifos_pseudo_files_and_devices_promptly(
    runtime: FleetRuntime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    canary = "canary-runtime-environ-8e21"
    monkeypatch.setenv("FLEET_TEST_ATTACH_CANARY", canary)
    await runtime.new_session("att")
    fifo = tmp_path / "pipe.csv"
    os.mkfifo(fifo)
    with pytest.raises(InvalidInput, match=r"named pipe \(FIFO\)"):
        await _attach_with_guard(runtime, fifo, fifo)
    for source in ("/proc/self/environ", "/dev/zero"):
        with pytest.raises(InvalidInput, match="pseudo-filesystem"):
            await _attach_with_guard(runtime, Path(source), None)
    with pytest.raises(InvalidInput, match="a directory"):
        await runtime.attach("att", tmp_path, "files/dir")
    assert await runtime.list_workspace("att") == {"files": [], "artifacts": []}
    for path in runtime.config.state_dir.rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert canary.encode() not in path.read_bytes(), path
    small = tmp_path / "ok.csv"
    small.write_text("a,b\n")
    assert (await runtime.attach("att", small)).path == "files/ok.csv"  # still usable


async def test_a_temp_file_left_by_a_killed_attach_is_swept_at_start_and_never_listed(
    fleet_config: EffectiveConfig,
) -> None:
    first = await FleetRuntime.open(fleet_config)
    await first.new_session("swept")
    await first.write_file("swept", "files/a.csv", b"a\n")
    await first.close()
    workspaces = fleet_config.state_dir / "workspaces"
    stale = workspaces / STAGING_DIR / f"{TEMP_PREFIX}k9k9k9k9"  # a kill -9 mid-attach
    stale.parent.mkdir(exist_ok=True)
    stale.write_bytes(b"x" * 100_000)
    second = await FleetRuntime.open(fleet_config)
    try:
        assert not stale.exists()
        await second.load_session("swept")
        listing = await second.list_workspace("swept")
        assert [f.path for f in listing["files"]] == ["files/a.csv"]
        assert not list((workspaces / "swept").rglob(f"{TEMP_PREFIX}*"))
    finally:
        await second.close()


async def test_workspace_directories_are_private(runtime: FleetRuntime) -> None:
    await runtime.new_session("private")
    root = runtime.workspace("private").root
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    workspaces = root.parent
    assert stat.S_IMODE(workspaces.stat().st_mode) in (
        0o700,
        0o711,
    )  # 0711: root, for a sandbox uid


async def test_a_planted_symlink_can_be_deleted_and_its_target_survives(
    runtime: FleetRuntime, tmp_path: Path
) -> None:
    await runtime.new_session("links")
    target = tmp_path / "host.txt"
    target.write_text("host")
    root = runtime.workspace("links").root
    (root / "artifacts" / "planted").symlink_to(target)
    (root / "artifacts" / "planted-dir").symlink_to(tmp_path)
    await runtime.delete_file("links", "artifacts/planted")
    await runtime.delete_file("links", "artifacts/planted-dir")
    assert not (root / "artifacts" / "planted").is_symlink()
    assert not (root / "artifacts" / "planted-dir").is_symlink()
    assert target.read_text() == "host"
    with pytest.raises(WorkspaceFileNotFound):
        await runtime.delete_file("links", "artifacts/planted")


MANY = 1_501


async def test_a_turn_with_1501_artifacts_commits_with_bounded_work(
    fleet_environ: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 13: the commit of a Turn that writes 1,501 artifacts. Unchanged files are never
    re-hashed, at most ``storage.max_turn_artifacts`` are hashed and listed, and the next Turn
    that changes one artifact hashes only that one."""
    from fleet_core.engine.scripted_lm import SwitchableLms, action, scripted_lm, submit
    from fleet_core.models import TurnRequest

    env = {**fleet_environ, "FLEET_MLFLOW_DESTINATION": "off"}
    lms = SwitchableLms()
    runtime = await FleetRuntime.open(load_config(environ=env, cwd=tmp_path), lm_provider=lms)
    limit = runtime.config.settings.storage.max_turn_artifacts
    hashed: list[Path] = []
    real = workspace_module.file_sha256
    monkeypatch.setattr(workspace_module, "file_sha256", lambda p: hashed.append(p) or real(p))
    try:
        await runtime.new_session("many", mode="rlm")
        write = (
            "import os\nos.makedirs('artifacts/many', exist_ok=True)\n"
            f"for i in range({MANY}):\n"
            "    open(f'artifacts/many/a{i:05}.txt', 'w').write('row %d\\n' % i * 100)\n"
            "print('ok')"
        )
        lms.root = scripted_lm([action(write), submit("'done'")])
        started = time.monotonic()
        first = await runtime.run_turn(TurnRequest(session_id="many", task="write many"))
        elapsed = time.monotonic() - started
        assert first.status == "completed", first.error
        assert len(first.artifacts) == min(limit, MANY) == 1_000
        assert first.artifacts_omitted == MANY - limit  # the client is told, not just the log
        artifacts_dir = runtime.workspace("many").root / "artifacts"
        hashed_now = len([p for p in hashed if artifacts_dir in p.parents])
        if runtime.store.blobs is None:
            assert hashed_now == limit  # none past it
        else:  # shared content (PostgreSQL): each new file is hashed once, to be published
            assert hashed_now == MANY
        stored = await runtime.list_workspace("many")
        assert len(stored["artifacts"]) == MANY  # every file is still in the workspace
        hashed.clear()
        lms.root = scripted_lm(
            [action("open('artifacts/many/a00007.txt', 'a').write('more')"), submit("'one'")]
        )
        second = await runtime.run_turn(TurnRequest(session_id="many", task="change one"))
        assert second.status == "completed", second.error
        assert [a.path for a in second.artifacts] == ["artifacts/many/a00007.txt"]
        assert second.artifacts_omitted == 0
        rehashed = [p for p in hashed if artifacts_dir in p.parents]
        assert rehashed == [artifacts_dir / "many/a00007.txt"]  # the manifest reused digests
        database = "postgres" if "FLEET_DATABASE_URL" in fleet_environ else "sqlite"
        print(f"\n1,501-artifact Turn on {database}: {elapsed:.2f} s end to end")
    finally:
        await runtime.close()


async def test_session_pages_follow_the_keyset_on_both_databases(runtime: FleetRuntime) -> None:
    """Pages concatenate to every Session newest first, ties on ``updatedAt`` broken by id, with
    no duplicates; a Session updated while paging moves to the front and is not repeated."""
    made = [(await runtime.new_session(f"pg-{index:02}")).session_id for index in range(17)]
    seen: list[str] = []
    cursor = None
    while True:
        page = await runtime.sessions_page(cursor, limit=4)
        assert len(page.sessions) <= 4
        seen += [s.session_id for s in page.sessions]
        if len(seen) == 8:
            await runtime.set_mode(seen[0], "flex")  # moves to the front, already seen
        cursor = page.next_cursor
        if cursor is None:
            break
    assert sorted(seen) == sorted(made) and len(seen) == len(set(seen))
    everything = (await runtime.sessions_page(limit=500)).sessions
    keys = [(s.updated_at, s.session_id) for s in everything]
    assert keys == sorted(keys, reverse=True) and everything[0].session_id == seen[0]
    with pytest.raises(InvalidInput, match="Invalid cursor"):
        await runtime.sessions_page("bm90IGEgY3Vyc29y")
    with pytest.raises(InvalidInput, match="'limit' must be between 1 and 500"):
        await runtime.sessions_page(limit=501)


def test_an_interrupted_turns_message_names_three_files_and_counts_the_rest() -> None:
    from fleet_core.store.ownership import INTERRUPTED, interrupted_error

    assert interrupted_error([]) == INTERRUPTED
    paths = [f"artifacts/p{n:03}.csv" for n in range(60)]
    error = interrupted_error(paths)
    assert error.paths == paths[:50] and error.restored is None
    assert error.message.endswith(
        "may be incomplete: artifacts/p000.csv, artifacts/p001.csv, artifacts/p002.csv and 57 more"
    )
