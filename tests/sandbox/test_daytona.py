"""DaytonaSandbox contract tests: the real SDK against the fake server (no network).

The conformance suite (test_conformance.py) also runs on this backend; these tests cover what is
specific to Daytona: labels, snapshot preflight, the allocation journal, adoption after a create
without an answer, orphan reconciliation, retries only for idempotent calls, child linking, the
workspace mirror, configuration and secrets.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from daytona_fake import FakeDaytona
from daytona_testing import FAKE_KEY, SNAPSHOT, fake_options

from fleet_core.config import SandboxSettings
from fleet_core.sandbox import (
    ExecutionOutcomeUnknownError,
    SandboxCrashedError,
    SandboxLimits,
    SandboxSpec,
    SandboxUnavailableError,
    create_sandbox,
)
from fleet_core.sandbox.daytona import DaytonaOptions, DaytonaSandbox, reconcile_orphans
from fleet_core.sandbox.daytona_support import AllocationJournal
from tests.conftest import live_secret

LIMITS = SandboxLimits(cell_timeout_seconds=20, interrupt_grace_seconds=1.0)


@pytest.fixture
def fake(daytona_fake: FakeDaytona) -> FakeDaytona:
    daytona_fake.faults.clear()
    daytona_fake.calls.clear()
    daytona_fake.create_then_fail = 0
    return daytona_fake


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    return tmp_path / ".fleet"


@pytest.fixture
async def made(fake: FakeDaytona) -> AsyncIterator[list[DaytonaSandbox]]:
    sandboxes: list[DaytonaSandbox] = []
    yield sandboxes
    for sandbox in sandboxes:
        await sandbox.destroy()


def _spec(tmp_path: Path, agent: str = "root", parent: str | None = None, **kw: Any) -> SandboxSpec:
    workspace = tmp_path / f"ws-{agent}"
    workspace.mkdir(exist_ok=True)
    return SandboxSpec(
        session_id=kw.pop("session", "s1"),
        agent_id=agent,
        parent_agent_id=parent,
        workspace=workspace,
        limits=LIMITS,
        **kw,
    )


def _sandbox(
    made: list[DaytonaSandbox],
    fake: FakeDaytona,
    state_dir: Path,
    spec: SandboxSpec,
    **overrides: Any,
) -> DaytonaSandbox:
    sandbox = DaytonaSandbox(spec, options=fake_options(fake, state_dir, **overrides))
    made.append(sandbox)
    return sandbox


async def test_labels_snapshot_and_network_off(
    tmp_path: Path, fake: FakeDaytona, state_dir: Path, made: list[DaytonaSandbox]
) -> None:
    sandbox = _sandbox(made, fake, state_dir, _spec(tmp_path, labels={"turn": "t1"}))
    info = await sandbox.start()
    record = fake.sandboxes[str(sandbox.remote_id)]
    labels = record.body["labels"]
    assert labels["fleet_session"] == "s1" and labels["fleet_agent"] == "root"
    assert labels["fleet_parent"] == "" and labels["fleet_app"] == "fleet-lsp"
    assert labels["turn"] == "t1" and labels["fleet_alloc"]
    assert record.body["snapshot"] == SNAPSHOT
    assert record.body["networkBlockAll"] is True
    assert info.backend == "daytona" and info.isolation["snapshot"]["name"] == SNAPSHOT
    assert fake.auth_header == f"Bearer {FAKE_KEY}"


async def test_missing_or_inactive_snapshot_is_unavailable(
    tmp_path: Path, fake: FakeDaytona, state_dir: Path, made: list[DaytonaSandbox]
) -> None:
    missing = _sandbox(made, fake, state_dir, _spec(tmp_path), snapshot="no-such-snapshot")
    with pytest.raises(SandboxUnavailableError, match="does not exist"):
        await missing.start()
    fake.add_snapshot("building-snapshot", state="building")
    building = _sandbox(made, fake, state_dir, _spec(tmp_path, "b"), snapshot="building-snapshot")
    with pytest.raises(SandboxUnavailableError, match="not active"):
        await building.start()
    assert fake.calls["create"] == 0


async def test_journal_records_allocation_and_destroy_removes_it(
    tmp_path: Path, fake: FakeDaytona, state_dir: Path, made: list[DaytonaSandbox]
) -> None:
    sandbox = _sandbox(made, fake, state_dir, _spec(tmp_path))
    await sandbox.start()
    journal = AllocationJournal(state_dir)
    entry = journal.get("s1", "root")
    assert entry is not None and entry.status == "ready"
    assert entry.sandbox_id == sandbox.remote_id and entry.owner_pid == os.getpid()
    await sandbox.destroy()
    assert journal.get("s1", "root") is None
    assert fake.sandboxes[entry.sandbox_id].state == "destroyed"


async def test_create_without_answer_is_not_retried_and_is_adopted(
    tmp_path: Path, fake: FakeDaytona, state_dir: Path, made: list[DaytonaSandbox]
) -> None:
    fake.create_then_fail = 1  # the sandbox is created, but the answer is a 503
    spec = _spec(tmp_path)
    first = _sandbox(made, fake, state_dir, spec)
    with pytest.raises(SandboxUnavailableError, match="without a clear answer"):
        await first.start()
    assert fake.calls["create"] == 1  # create is never retried
    entry = AllocationJournal(state_dir).get("s1", "root")
    assert entry is not None and entry.status == "requested"
    [orphan] = fake.by_label(fleet_alloc=entry.alloc_id)

    second = _sandbox(made, fake, state_dir, spec)
    await second.start()
    assert second.remote_id == orphan.id  # adopted by its labels, not created again
    assert fake.calls["create"] == 1
    assert (await second.execute("6 * 7")).value_repr == "42"
    adopted = AllocationJournal(state_dir).get("s1", "root")
    assert adopted is not None and adopted.status == "ready" and adopted.sandbox_id == orphan.id


async def test_ambiguous_adoption_refuses_to_create(
    tmp_path: Path, fake: FakeDaytona, state_dir: Path, made: list[DaytonaSandbox]
) -> None:
    fake.create_then_fail = 1
    spec = _spec(tmp_path)
    with pytest.raises(SandboxUnavailableError):
        await _sandbox(made, fake, state_dir, spec).start()
    entry = AllocationJournal(state_dir).get("s1", "root")
    assert entry is not None
    [orphan] = fake.by_label(fleet_alloc=entry.alloc_id)
    twin = dict(orphan.body)
    fake.sandboxes["sbx-twin"] = type(orphan)("sbx-twin", orphan.root, twin)
    with pytest.raises(SandboxUnavailableError, match="refusing to create"):
        await _sandbox(made, fake, state_dir, spec).start()
    assert fake.calls["create"] == 1
    del fake.sandboxes["sbx-twin"]


async def test_refused_create_clears_the_journal(
    tmp_path: Path, fake: FakeDaytona, state_dir: Path, made: list[DaytonaSandbox]
) -> None:
    fake.fail_next("create", 400)
    with pytest.raises(SandboxUnavailableError, match="refused"):
        await _sandbox(made, fake, state_dir, _spec(tmp_path)).start()
    assert AllocationJournal(state_dir).get("s1", "root") is None


async def test_orphans_are_reconciled_after_a_crash(
    tmp_path: Path, fake: FakeDaytona, state_dir: Path
) -> None:
    options = fake_options(fake, state_dir)
    crashed = DaytonaSandbox(_spec(tmp_path, session="old"), options=options)
    await crashed.start()
    remote_id = str(crashed.remote_id)
    journal = AllocationJournal(state_dir)
    entry = journal.get("old", "root")
    assert entry is not None
    entry.owner_pid = 2**22 + 17  # the process that made it is gone (no such pid)
    journal.put(entry)
    # a live owner's entry is left alone
    assert await reconcile_orphans(options, session_id="nobody") == []
    assert await reconcile_orphans(options) == [remote_id]
    assert fake.sandboxes[remote_id].state == "destroyed"
    assert journal.get("old", "root") is None
    await crashed.destroy()  # idempotent on an already deleted remote


async def test_expired_entries_are_reconciled_when_a_root_starts(
    tmp_path: Path, fake: FakeDaytona, state_dir: Path, made: list[DaytonaSandbox]
) -> None:
    stale = _sandbox(made, fake, state_dir, _spec(tmp_path, "worker", session="s9"))
    await stale.start()
    stale_id = str(stale.remote_id)
    journal = AllocationJournal(state_dir)
    entry = journal.get("s9", "worker")
    assert entry is not None
    entry.expires_at = time.time() - 1
    journal.put(entry)
    root = _sandbox(made, fake, state_dir, _spec(tmp_path, "root", session="s9"))
    await root.start()
    assert fake.sandboxes[stale_id].state == "destroyed"
    assert journal.get("s9", "worker") is None


async def test_idempotent_calls_are_retried(
    tmp_path: Path, fake: FakeDaytona, state_dir: Path, made: list[DaytonaSandbox]
) -> None:
    fake.add_snapshot("retry-snapshot")  # not yet checked by this process (preflight is cached)
    sandbox = _sandbox(made, fake, state_dir, _spec(tmp_path), snapshot="retry-snapshot")
    fake.fail_next("snapshot", 503)
    await sandbox.start()
    assert fake.calls["snapshot"] == 2
    await sandbox.execute("x = 5")
    fake.fail_next("stop", 503, 502)
    await sandbox.stop()
    assert fake.calls["stop"] == 3
    assert fake.sandboxes[str(sandbox.remote_id)].state == "stopped"
    fake.fail_next("start", 500)
    await sandbox.start()  # resumes the stopped sandbox: fresh REPL, files kept
    assert fake.calls["start"] == 2
    assert (await sandbox.execute("'x' in globals()")).value_repr == "False"
    fake.fail_next("delete", 503)
    await sandbox.destroy()
    assert fake.calls["delete"] == 2
    assert fake.sandboxes[str(sandbox.remote_id)].state == "destroyed"


async def test_run_code_is_never_retried(
    tmp_path: Path, fake: FakeDaytona, state_dir: Path, made: list[DaytonaSandbox]
) -> None:
    sandbox = _sandbox(made, fake, state_dir, _spec(tmp_path))
    await sandbox.start()
    record = fake.sandboxes[str(sandbox.remote_id)]
    before = record.executions
    fake.drop_next_execution(record.id)
    with pytest.raises(ExecutionOutcomeUnknownError) as caught:
        await sandbox.execute("open('artifacts/n.txt', 'a').write('x')")
    assert record.executions == before + 1
    assert FAKE_KEY not in str(caught.value)
    with pytest.raises(SandboxCrashedError):
        await sandbox.execute("1")
    await sandbox.start()
    assert await sandbox.read_file("artifacts/n.txt") == b"x"
    assert record.executions == before + 2  # the dropped cell once, the fresh context's boot


async def test_child_is_ephemeral_and_linked_to_the_root(
    tmp_path: Path, fake: FakeDaytona, state_dir: Path, made: list[DaytonaSandbox]
) -> None:
    root = _sandbox(made, fake, state_dir, _spec(tmp_path))
    await root.start()
    child_spec = _spec(tmp_path, "child1", parent="root")
    (child_spec.workspace / "files").mkdir()
    (child_spec.workspace / "files" / "input.txt").write_text("copied input")
    child = _sandbox(made, fake, state_dir, child_spec)
    await child.start()
    body = fake.sandboxes[str(child.remote_id)].body
    assert body["linkedSandbox"] == root.remote_id
    assert body["autoDeleteInterval"] == 0  # ephemeral
    assert body["labels"]["fleet_parent"] == "root"
    result = await child.execute(
        "data = open('files/input.txt').read()\n"
        "open('artifacts/out.txt', 'w').write(data.upper())\ndata"
    )
    assert result.value_repr == "'copied input'"
    # the host mirror has the child's artifact, ready for promotion
    assert (child_spec.workspace / "artifacts" / "out.txt").read_text() == "COPIED INPUT"
    await child.destroy()
    assert fake.sandboxes[str(body and child.remote_id)].state == "destroyed"


async def test_workspace_mirror_pull_skips_symlinks_and_deletes(
    tmp_path: Path, fake: FakeDaytona, state_dir: Path, made: list[DaytonaSandbox]
) -> None:
    sandbox = _sandbox(made, fake, state_dir, _spec(tmp_path))
    await sandbox.start()
    await sandbox.execute(
        "import os\n"
        "open('artifacts/a.txt', 'w').write('a')\n"
        "os.symlink('/etc/passwd', 'artifacts/link')\n"
        "os.makedirs('artifacts/sub', exist_ok=True)\n"
        "open('artifacts/sub/b.bin', 'wb').write(bytes(range(256)))"
    )
    paths = [f.path for f in await sandbox.list_files("artifacts")]
    assert paths == ["artifacts/a.txt", "artifacts/sub/b.bin"]
    assert await sandbox.read_file("artifacts/sub/b.bin") == bytes(range(256))
    await sandbox.execute("import os\nos.remove('artifacts/a.txt')")
    assert [f.path for f in await sandbox.list_files("artifacts")] == ["artifacts/sub/b.bin"]


async def test_a_pulled_file_with_an_unholdable_name_lands_under_its_escaped_name(
    tmp_path: Path, fake: FakeDaytona, state_dir: Path, made: list[DaytonaSandbox]
) -> None:
    sandbox = _sandbox(made, fake, state_dir, _spec(tmp_path))
    await sandbox.start()
    result = await sandbox.execute("open('artifacts/x\\x1b\\n.txt', 'w').write('kept')")
    assert "renamed" in result.stderr and "x%1B%0A.txt" in result.stderr
    paths = [f.path for f in await sandbox.list_files("artifacts")]
    assert paths == ["artifacts/x%1B%0A.txt"]
    assert await sandbox.read_file("artifacts/x%1B%0A.txt") == b"kept"
    removed = await sandbox.execute("import os\nos.remove('artifacts/x%1B%0A.txt')")
    assert removed.error is None  # the remote sandbox holds the same escaped name
    assert [f.path for f in await sandbox.list_files("artifacts")] == []


async def test_many_files_transfer_in_batches(
    tmp_path: Path, fake: FakeDaytona, state_dir: Path, made: list[DaytonaSandbox]
) -> None:
    spec = _spec(tmp_path)
    for i in range(7):
        (spec.workspace / "files").mkdir(exist_ok=True)
        (spec.workspace / "files" / f"f{i}.txt").write_text(str(i))
    sandbox = _sandbox(made, fake, state_dir, spec, transfer_batch_files=3)
    await sandbox.start()
    assert fake.calls["upload"] == 3  # 7 files in batches of 3
    result = await sandbox.execute("sorted(open(f'files/f{i}.txt').read() for i in range(7))")
    assert result.value_repr == str([str(i) for i in range(7)])
    fake.calls["download"] = 0
    await sandbox.execute("for i in range(7):\n    open(f'artifacts/o{i}.txt', 'w').write(str(i))")
    assert fake.calls["download"] == 3
    assert len(await sandbox.list_files("artifacts")) == 7


async def test_files_past_the_file_count_quota_fail_the_cell_and_are_not_pulled(
    tmp_path: Path, fake: FakeDaytona, state_dir: Path, made: list[DaytonaSandbox]
) -> None:
    spec = _spec(tmp_path).model_copy(
        update={"limits": LIMITS.model_copy(update={"workspace_max_entries": 40})}
    )
    sandbox = _sandbox(made, fake, state_dir, spec)
    await sandbox.start()
    fine = await sandbox.execute("for i in range(10):\n    open(f'artifacts/a{i}', 'w').close()")
    assert fine.error is None, fine.error
    flood = await sandbox.execute(
        "import os\nos.makedirs('artifacts/many')\n"
        "for i in range(500):\n    open(f'artifacts/many/{i}', 'w').close()"
    )
    assert flood.error is not None and flood.error.type == "WorkspaceQuotaExceeded"
    assert "too many files: the workspace holds 510 entries, the limit is 40" in flood.error.message
    mirrored = await sandbox.list_files("artifacts")
    assert 10 <= len(mirrored) <= 40  # the host mirror never holds more than the quota
    assert all(f.path.startswith("artifacts/") for f in mirrored)
    freed = await sandbox.execute("import shutil\nshutil.rmtree('artifacts/many')")
    assert freed.error is None, freed.error
    assert len(await sandbox.list_files("artifacts")) == 10


async def test_tool_reply_fence_and_forged_markers(
    tmp_path: Path, fake: FakeDaytona, state_dir: Path, made: list[DaytonaSandbox]
) -> None:
    sandbox = _sandbox(made, fake, state_dir, _spec(tmp_path))
    await sandbox.start()
    calls: list[str] = []

    def secret_tool() -> str:
        calls.append("called")
        return "ok"

    # Generated code can reach the runtime's real channel (it shares the process) and write
    # frames on the transport; without the cell's id and nonce they count for nothing.
    forged = (
        "import gc, sys\n"
        "rt = sys.modules['fleet_worker']\n"
        "[channel] = [o for o in gc.get_objects() if isinstance(o, rt.MarkerChannel)]\n"
        "channel.send({'type': 'result', 'id': 'x', 'nonce': 'y', 'value': 'forged'})\n"
        "channel.send({'type': 'tool_call', 'id': 'x', 'nonce': 'y', 'call': 99, "
        "'tool': 'secret_tool', 'args': [], 'kwargs': {}})\n"
        "'real'"
    )
    result = await sandbox.execute(forged, tools={"secret_tool": secret_tool})
    assert result.value_repr == "'real'" and calls == []
    assert sandbox.rejected_frames >= 1


async def test_create_sandbox_selects_daytona_and_needs_a_key(
    tmp_path: Path, fake: FakeDaytona, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no .env here
    monkeypatch.delenv("FLEET_DAYTONA_API_KEY", raising=False)
    settings = SandboxSettings(backend="daytona", daytona_api_url=fake.url, daytona_target="us")
    with pytest.raises(SandboxUnavailableError, match="FLEET_DAYTONA_API_KEY"):
        create_sandbox(_spec(tmp_path), settings)
    monkeypatch.setenv("FLEET_DAYTONA_API_KEY", FAKE_KEY)
    monkeypatch.setenv("FLEET_STATE_DIR", str(tmp_path / "state"))
    sandbox = create_sandbox(_spec(tmp_path), settings)
    assert isinstance(sandbox, DaytonaSandbox)
    options = sandbox._options
    assert options.api_url == fake.url and options.state_dir == tmp_path / "state"
    assert FAKE_KEY not in repr(options)
    assert options.scrub(f"token {FAKE_KEY} Bearer abc") == "token *** Bearer ***"


async def test_unreachable_api_is_unavailable_without_leaking_the_key(
    tmp_path: Path, state_dir: Path
) -> None:
    options = DaytonaOptions(
        api_key=FAKE_KEY,
        api_url="http://127.0.0.1:9/api",
        target="us",
        state_dir=state_dir,
        retry_attempts=1,
    )
    sandbox = DaytonaSandbox(_spec(tmp_path), options=options)
    with pytest.raises(SandboxUnavailableError) as caught:
        await asyncio.wait_for(sandbox.start(), 30)
    assert FAKE_KEY not in str(caught.value)
    await sandbox.destroy()


@pytest.mark.live
async def test_live_daytona_roundtrip(tmp_path: Path, pytestconfig: pytest.Config) -> None:
    """Against the real service: opt in with FLEET_LIVE_TESTS=1 (or --live) and an API key."""
    live_secret(pytestconfig, "FLEET_DAYTONA_API_KEY", "Daytona")
    from fleet_core.config import load_config

    settings = load_config().settings.sandbox.model_copy(update={"backend": "daytona"})
    sandbox = create_sandbox(_spec(tmp_path, session=f"live-{os.getpid()}"), settings)
    try:
        await sandbox.start()
        result = await sandbox.execute(
            "x = 40\nprint('hi')\nadd(x, 2)", tools={"add": lambda a, b: a + b}
        )
        assert result.value_repr == "42" and result.stdout == "hi\n"
        assert (await sandbox.execute("x")).value_repr == "40"
    finally:
        await sandbox.destroy()
