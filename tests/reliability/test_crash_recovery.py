"""Crash recovery (issue 13): kill -9 the real server (stdio, scripted models) at seeded random
moments while it attaches files and runs Turns whose code runs in the sandbox and delegates to two
child agents; restart it on the same state dir after each kill and check that

- every Turn the client saw committed is intact: status and answer in ``fleet/session/history``,
  its artifacts in ``fleet/artifact/list`` (and ``fleet/artifact/read``) with the digests it
  recorded (the latest answered Turn's for a path), unless a Turn interrupted while rewriting
  one in place names it in its error as maybe incomplete; every attach that was answered still
  has its digest, and one in flight is either whole (old or new bytes) or absent, never partial;
- Turns in flight are marked interrupted (status ``failed``, error kind ``interrupted``);
- nothing is left behind: no descendant of the killed server (bwrap, worker, python), no process
  naming the state dir, no sandbox cgroup of the killed pid (swept when the next server starts
  its first sandbox), no temp file and no child-agent workspace ``<state>/agents/<s>/<t>/``;
- the store passes an integrity check (SQLite ``integrity_check`` and ``foreign_key_check``; on
  PostgreSQL validated foreign keys, a full read of every table and an orphan scan);
- a new Turn on the same Session succeeds.

The CI variant kills 4 times on SQLite; the long variants (``FLEET_LONG_TESTS=1``) kill 20 times
on SQLite and on PostgreSQL. Set ``FLEET_CRASH_SEED`` to replay a run: the seed and every kill
moment (with the operation it interrupted) are printed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from fleet_core.sandbox.isolation import cgroup_available
from tests.lsp.test_turns import QUICKSTART
from tests.reliability.support import (
    SALES,
    SCRIPT,
    SLOW_TASK,
    TORN_TASK,
    Server,
    ServerGone,
    child_workspaces,
    postgres_integrity,
    processes_mentioning,
    sandbox_cgroups,
    server_env,
    sha256_file,
    sqlite_integrity,
    temp_files,
    wait_until,
)

SESSION = "crash"
BIG_FILES = 3  # attach targets files/big-<n>.dat, rewritten in turn
BIG_BYTES = 20 << 20  # under storage.max_file_bytes (25 MB)
TYPICAL_SECONDS = {"attach": 0.05, "turn": 1.0, "slow": 3.0}


@dataclass
class Ledger:
    """What the client saw committed, and what was in flight at each kill."""

    turns: dict[str, dict[str, Any]] = field(default_factory=dict)  # turnId -> result
    attached: dict[str, str] = field(default_factory=dict)  # path -> sha256 (answered)
    in_flight_attach: dict[str, str] = field(default_factory=dict)  # path -> sha256 (unanswered)
    moments: list[dict[str, Any]] = field(default_factory=list)
    killed_pids: list[int] = field(default_factory=list)
    interrupted: set[str] = field(default_factory=set)
    # paths an interrupted Turn named as changed in place (maybe incomplete) since the last
    # answered Turn that wrote them
    torn: set[str] = field(default_factory=set)
    unanswered_but_committed: set[str] = field(default_factory=set)
    zombies: int = 0
    attaches: int = 0  # answered
    stale_cgroups_at_kill: int = 0
    child_workspaces_at_kill: int = 0
    temp_files_at_kill: int = 0


class Workload(threading.Thread):
    """Attach, quick Turn, slow Turn, ... until the server dies; records what was answered and
    signals when an operation of the kind a kill aims at has begun."""

    PLAN = ("turn", "attach", "slow", "turn")

    def __init__(
        self, server: Server, ledger: Ledger, big: dict[Path, str], iteration: int, target: str
    ) -> None:
        super().__init__(name=f"workload-{iteration}", daemon=True)
        self.server, self.ledger, self.big, self.iteration = server, ledger, big, iteration
        self.current: tuple[str, float] = ("idle", time.monotonic())
        self.target = target
        self.target_started = threading.Event()
        self.error: BaseException | None = None
        self.ops = 0

    def run(self) -> None:
        start = self.iteration % len(self.PLAN)
        try:
            for k in range(10_000):
                op = self.PLAN[(start + k) % len(self.PLAN)]
                self.current = (op, time.monotonic())
                if op == self.target:
                    self.target_started.set()
                if op == "attach":
                    self._attach(k)
                else:
                    self._turn(SLOW_TASK if op == "slow" else QUICKSTART)
                self.ops += 1
        except ServerGone:
            return
        except BaseException as exc:  # surfaced by the test
            self.error = exc

    def _attach(self, k: int) -> None:
        source, digest = list(self.big.items())[(self.iteration + k) % len(self.big)]
        path = f"files/big-{(self.iteration * 7 + k) % BIG_FILES}.dat"
        self.ledger.in_flight_attach = {path: digest}
        result = self.server.request(
            "fleet/context/attach",
            {"sessionId": SESSION, "uri": source.as_uri(), "as": path},
            timeout=120,
        )
        assert result["path"] == path and result["sha256"] == digest, result
        self.ledger.attached[path] = digest
        self.ledger.attaches += 1
        self.ledger.in_flight_attach = {}

    def _turn(self, task: str) -> None:
        result = self.server.request(
            "fleet/turn/run", {"sessionId": SESSION, "task": task}, timeout=180
        )
        assert result["status"] == "completed", result
        self.ledger.turns[result["turnId"]] = result
        self.ledger.torn -= {a["path"] for a in result["artifacts"]}


def _big_sources(directory: Path, seed: int) -> dict[Path, str]:
    """Three host files to attach (different bytes each), with their digests."""
    sources = {}
    for n in range(3):
        path = directory / f"big-source-{n}.dat"
        block = hashlib.sha256(f"{seed}-{n}".encode()).digest() * (BIG_BYTES // 32)
        path.write_bytes(block)
        sources[path] = sha256_file(path)
    return sources


def _workspace(state: Path) -> Path:
    return state / "workspaces" / SESSION


def _check_store(env: dict[str, str], state: Path) -> None:
    url = env.get("FLEET_DATABASE_URL")
    if url:
        assert postgres_integrity(url) == []
        return
    integrity, violations = sqlite_integrity(state / "fleet.db")
    assert integrity == ["ok"], integrity
    assert violations == [], violations


def _verify_committed(server: Server, ledger: Ledger, state: Path) -> None:
    """Every answered Turn and attach intact; every other Turn interrupted or committed."""
    turns = server.request("fleet/session/history", {"sessionId": SESSION, "limit": 1000})
    by_id = {t["turnId"]: t for t in turns["turns"]}
    for turn_id, result in ledger.turns.items():
        stored = by_id.get(turn_id)
        assert stored is not None, f"committed Turn {turn_id} lost"
        assert stored["status"] == result["status"] == "completed", stored
        assert stored["answer"] == result["answer"], stored
    for turn_id, stored in by_id.items():
        assert stored["status"] != "running", f"Turn {turn_id} still running after restart"
        if turn_id in ledger.turns:
            continue
        if stored["status"] == "failed":
            assert (stored.get("error") or {}).get("kind") == "interrupted", stored
            if turn_id not in ledger.interrupted:  # what it was writing may be incomplete
                ledger.torn.update(stored["error"].get("paths", []))
            ledger.interrupted.add(turn_id)
        else:  # committed just before the kill, answer lost with the pipe: still whole
            assert stored["status"] == "completed", stored
            ledger.unanswered_but_committed.add(turn_id)

    listed = {
        a["path"]: a
        for a in server.request("fleet/artifact/list", {"sessionId": SESSION})["artifacts"]
    }
    latest = {a["path"]: a for result in ledger.turns.values() for a in result["artifacts"]}
    for path, artifact in latest.items():
        entry = listed.get(path)
        assert entry is not None, f"artifact {path} lost"
        if path in ledger.torn:  # named by the interrupted Turn that was rewriting it
            continue
        assert entry["sha256"] == artifact["sha256"], (artifact, entry)
        assert entry["sizeBytes"] == artifact["sizeBytes"], (artifact, entry)
    for path in {"artifacts/revenue_by_region.csv"} & set(listed):  # read back through the face
        text = server.request("fleet/artifact/read", {"uri": listed[path]["uri"]})["text"]
        assert hashlib.sha256(text.encode()).hexdigest() == listed[path]["sha256"]

    files = {
        f["path"]: f["sha256"]
        for f in server.request("fleet/workspace/list", {"sessionId": SESSION})["files"]
    }
    for path, digest in ledger.attached.items():
        allowed = {digest, ledger.in_flight_attach.get(path)}
        assert files.get(path) in allowed, f"attached {path} changed: {files.get(path)}"
    for path, digest in ledger.in_flight_attach.items():  # whole (old or new) or absent
        assert files.get(path) in {digest, ledger.attached.get(path)}, (path, files.get(path))
        ledger.attached[path] = files[path] if path in files else ledger.attached.get(path, "")
    ledger.attached = {p: d for p, d in ledger.attached.items() if d}
    ledger.in_flight_attach = {}


def _leftovers(previous: Server, state: Path, live: Server | None) -> dict[str, list[str]]:
    """What the killed server left that should not be there (a zombie counts until init
    reaps it)."""
    live_pids = {p.pid for p in live.descendants.seen.values()} if live else set()
    if live is not None:
        live_pids.add(live.pid)
    # a zombie (the killed server's bwrap, reparented) counts until init reaps it
    survivors = [f"{p.pid} {s} {p.cmdline[:120]}" for p, s in previous.descendants.survivors()]
    naming = [
        f"{p.pid} {p.cmdline[:120]}"
        for p in processes_mentioning([str(state)])
        if p.pid not in live_pids and p.pid != previous.pid
    ]
    return {
        "processes": survivors,
        "processes naming the state dir": naming,
        "temp files": [str(p) for p in temp_files(state)],
        "child workspaces": [str(p) for p in child_workspaces(state)],
    }


def _start(env: dict[str, str], cwd: Path, n: int) -> Server:
    server = Server(env, cwd, cwd / f"server-{n}.log")
    server.initialize()
    return server


def crash_recovery(tmp_path: Path, env_extra: dict[str, str], moments: int, seed: int) -> Ledger:
    rng = random.Random(seed)
    print(f"\ncrash recovery: seed={seed} moments={moments} (FLEET_CRASH_SEED={seed} replays)")
    state = tmp_path / "state"
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT), encoding="utf-8")
    env = server_env(
        state,
        script,
        FLEET_MLFLOW_DESTINATION="off",
        FLEET_RUNTIME__HISTORY_TURNS="0",
        **env_extra,
    )
    big = _big_sources(tmp_path, seed)
    ledger = Ledger()

    server = _start(env, tmp_path, 0)
    server.request("fleet/session/new", {"sessionId": SESSION})
    server.request("fleet/context/attach", {"sessionId": SESSION, "uri": SALES.as_uri()})
    for iteration in range(moments):
        # a moment: an operation kind, and a delay into it (its typical length: attach 20 MB
        # ~0.05 s, quickstart Turn ~1 s, slow Turn ~3 s); when the operation ends sooner the
        # kill lands in the next one, and the moment records what was in flight
        target = rng.choice(Workload.PLAN[1:])
        delay = rng.uniform(0.0, TYPICAL_SECONDS[target])
        workload = Workload(server, ledger, big, iteration, target)
        workload.start()
        began = wait_until(
            lambda w=workload: w.target_started.is_set() or not w.is_alive(), 120, 0.0005
        )
        if workload.error is not None:
            raise workload.error
        assert began and workload.is_alive(), f"no {target} began"
        time.sleep(delay)
        op, since = workload.current
        server.kill()
        workload.join(60)
        assert not workload.is_alive(), "the workload did not notice the kill"
        if workload.error is not None:
            raise workload.error
        ledger.killed_pids.append(server.pid)
        moment: dict[str, Any] = {
            "n": iteration,
            "aimed_at": target,
            "delay": round(delay, 3),
            "during": op,
            "into_op": round(time.monotonic() - since, 3),
            "ops_done": workload.ops,
        }
        ledger.moments.append(moment)
        print(f"  kill {iteration}: {moment}")
        ledger.stale_cgroups_at_kill += len(sandbox_cgroups(server.pid))
        ledger.child_workspaces_at_kill += len(child_workspaces(state))
        ledger.temp_files_at_kill += len(temp_files(state))
        _check_store(env, state)  # what the crash left, before anything recovers it

        ledger.zombies += sum(1 for _p, s in server.descendants.survivors() if s == "Z")
        previous = server
        server = _start(env, tmp_path, iteration + 1)
        server.request("fleet/session/load", {"sessionId": SESSION})
        _verify_committed(server, ledger, state)
        # bwrap and its worker die with their parent (--die-with-parent): give the kernel a moment
        left = wait_until(
            lambda p=previous, s=server: not any(_leftovers(p, state, s).values()),
            timeout=10,
        )
        if not left:
            report = {k: v for k, v in _leftovers(previous, state, server).items() if v}
            raise AssertionError(f"left behind after kill {iteration}: {report}")

    # the final server: a new Turn on the same Session succeeds, then everything is clean
    result = server.request(
        "fleet/turn/run", {"sessionId": SESSION, "task": QUICKSTART}, timeout=180
    )
    assert result["status"] == "completed", result
    ledger.turns[result["turnId"]] = result
    _verify_committed(server, ledger, state)
    # the first sandbox of a new process swept the killed servers' cgroups
    stale = {pid: sandbox_cgroups(pid) for pid in ledger.killed_pids}
    assert not any(stale.values()), f"stale sandbox cgroups: {stale}"
    assert server.shutdown() == 0
    assert child_workspaces(state) == []
    assert temp_files(state) == []
    assert wait_until(lambda: not processes_mentioning([str(state)]), timeout=10), [
        p.cmdline[:120] for p in processes_mentioning([str(state)])
    ]
    _check_store(env, state)

    during: dict[str, int] = {}
    for moment in ledger.moments:
        during[moment["during"]] = during.get(moment["during"], 0) + 1
    summary = {
        "seed": seed,
        "kills": len(ledger.moments),
        "kills_during": during,
        "turns_committed_and_answered": len(ledger.turns),
        "turns_committed_unanswered": len(ledger.unanswered_but_committed),
        "turns_interrupted": len(ledger.interrupted),
        # one Turn at a time: a kill during a Turn request that left neither kind came before
        # the Turn was claimed (no row, nothing to recover)
        "turn_kills_before_claim": during.get("turn", 0)
        + during.get("slow", 0)
        - len(ledger.interrupted)
        - len(ledger.unanswered_but_committed),
        "attaches_answered": ledger.attaches,
        "stale_cgroups_at_kill": ledger.stale_cgroups_at_kill,
        "child_workspaces_at_kill": ledger.child_workspaces_at_kill,
        "temp_files_at_kill": ledger.temp_files_at_kill,
        "zombies_at_kill_reaped_by_init": ledger.zombies,
        "data_lost": 0,  # every check above passed
    }
    print("crash recovery summary:", json.dumps(summary))
    return ledger


def _seed(default: int) -> int:
    return int(os.environ.get("FLEET_CRASH_SEED", default))


def test_kill_9_at_random_moments_loses_nothing_and_leaves_nothing(tmp_path: Path) -> None:
    ledger = crash_recovery(tmp_path, {}, moments=4, seed=_seed(13))
    assert len(ledger.turns) >= 2  # the kills did not all land before the first Turn


@pytest.mark.long
def test_kill_9_at_20_moments_on_sqlite(tmp_path: Path) -> None:
    crash_recovery(tmp_path, {}, moments=20, seed=_seed(int(time.time())))


@pytest.mark.long
@pytest.mark.postgres
def test_kill_9_at_20_moments_on_postgresql(tmp_path: Path, postgres_database: str) -> None:
    from tests.conftest import _reset_schema

    _reset_schema(postgres_database)
    crash_recovery(
        tmp_path,
        {"FLEET_DATABASE_URL": postgres_database},
        moments=20,
        seed=_seed(int(time.time())),
    )


def _scripted_session(tmp_path: Path) -> tuple[Path, dict[str, str], Server]:
    """A server on the scripted models with the Session made and the sales file attached:
    its state directory, environment and the server."""
    state = tmp_path / "state"
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT), encoding="utf-8")
    env = server_env(
        state, script, FLEET_MLFLOW_DESTINATION="off", FLEET_RUNTIME__HISTORY_TURNS="0"
    )
    server = _start(env, tmp_path, 0)
    server.request("fleet/session/new", {"sessionId": SESSION})
    server.request("fleet/context/attach", {"sessionId": SESSION, "uri": SALES.as_uri()})
    return state, env, server


def test_a_kill_while_children_run_leaves_no_child_workspace_process_or_cgroup(
    tmp_path: Path,
) -> None:
    """The moment the random kills hit least: children's workspaces exist, their sandboxes run.
    The restarted server marks the Turn interrupted and removes ``<state>/agents/<s>/``; its
    first sandbox sweeps the killed server's cgroups."""
    state, env, server = _scripted_session(tmp_path)
    pending = server.send("fleet/turn/run", {"sessionId": SESSION, "task": SLOW_TASK})
    assert wait_until(lambda: len(list(state.glob("agents/*/*/agent-*"))) == 2, 60, 0.005)
    time.sleep(0.2)  # the children's sandboxes are starting or running their cells
    cgroups = sandbox_cgroups(server.pid)
    if any(cgroup_available().values()):  # else the cgroup check below proves nothing
        assert cgroups, "no sandbox cgroup of the server was found before the kill"
    server.kill()
    with contextlib.suppress(Exception):
        pending.result(5)
    assert child_workspaces(state), "the kill came too late"
    killed = server
    server = _start(env, tmp_path, 1)
    try:
        server.request("fleet/session/load", {"sessionId": SESSION})
        (turn,) = server.request("fleet/session/history", {"sessionId": SESSION})["turns"]
        assert turn["status"] == "failed" and turn["error"]["kind"] == "interrupted", turn
        assert child_workspaces(state) == []
        assert wait_until(lambda: not any(_leftovers(killed, state, server).values()), 10), (
            _leftovers(killed, state, server)
        )
        result = server.request("fleet/turn/run", {"sessionId": SESSION, "task": QUICKSTART})
        assert result["status"] == "completed", result
        print(
            f"\ncgroups at the kill: {len(cgroups)}; after the next Turn: "
            f"{sandbox_cgroups(killed.pid)}"
        )
        assert sandbox_cgroups(killed.pid) == []
    finally:
        server.shutdown()
    _check_store(env, state)


def test_a_kill_while_a_turn_rewrites_an_artifact_names_it_in_the_interrupted_turn(
    tmp_path: Path,
) -> None:
    """A Turn's code writes the workspace in place, so a kill mid-write leaves the committed
    artifact it was rewriting incomplete. The restarted server cannot bring the old bytes back
    (the workspace is the store), so the interrupted Turn says which files it changed: the
    error's ``paths`` and its message name the artifact, and its listing shows what is there."""
    state, env, server = _scripted_session(tmp_path)
    done = server.request("fleet/turn/run", {"sessionId": SESSION, "task": QUICKSTART})
    assert done["status"] == "completed", done
    artifact = _workspace(state) / "artifacts" / "revenue_by_region.csv"
    committed = sha256_file(artifact)
    pending = server.send("fleet/turn/run", {"sessionId": SESSION, "task": TORN_TASK})
    assert wait_until(lambda: artifact.stat().st_size == len("region,rev"), 60, 0.005)
    server.kill()
    with contextlib.suppress(Exception):
        pending.result(5)
    server = _start(env, tmp_path, 1)
    try:
        server.request("fleet/session/load", {"sessionId": SESSION})
        first, torn = server.request("fleet/session/history", {"sessionId": SESSION})["turns"]
        assert first["status"] == "completed" and "error" not in first, first
        assert torn["status"] == "failed" and torn["error"]["kind"] == "interrupted", torn
        assert torn["error"]["paths"] == ["artifacts/revenue_by_region.csv"], torn
        assert "artifacts/revenue_by_region.csv" in torn["error"]["message"], torn
        assert "incomplete" in torn["error"]["message"], torn
        (listed,) = [
            a
            for a in server.request("fleet/artifact/list", {"sessionId": SESSION})["artifacts"]
            if a["path"] == "artifacts/revenue_by_region.csv"
        ]
        assert listed["sha256"] == sha256_file(artifact) != committed
        again = server.request("fleet/turn/run", {"sessionId": SESSION, "task": QUICKSTART})
        assert again["status"] == "completed", again
        assert sha256_file(artifact) == committed  # a new Turn writes it whole again
    finally:
        server.shutdown()
    _check_store(env, state)


def test_a_kill_during_a_large_attach_leaves_no_temp_file(tmp_path: Path) -> None:
    """Issue 13 (attach): kill -9 while a large file streams into ``files/``; the next server
    must not keep (or list) the partial ``.fleet-*`` temp file."""
    state = tmp_path / "state"
    env = server_env(state, None, FLEET_MLFLOW_DESTINATION="off")
    source = tmp_path / "large.dat"
    with source.open("wb") as handle:  # 24 MB of non-zero bytes, under max_file_bytes
        block = hashlib.sha256(b"large").digest() * 32768
        for _ in range(24):
            handle.write(block)
    server = _start(env, tmp_path, 0)
    server.request("fleet/session/new", {"sessionId": SESSION})
    workspaces = state / "workspaces"
    pending = server.send("fleet/context/attach", {"sessionId": SESSION, "uri": source.as_uri()})
    seen = wait_until(lambda: list(workspaces.rglob(".fleet-*")), timeout=30, interval=0.0005)
    server.kill()
    with contextlib.suppress(Exception):
        pending.result(5)
    if not seen:
        pytest.skip("the attach finished before a temp file was seen")
    server = _start(env, tmp_path, 1)
    try:
        server.request("fleet/session/load", {"sessionId": SESSION})
        listed = server.request("fleet/workspace/list", {"sessionId": SESSION})["files"]
        assert not [f for f in listed if ".fleet-" in f["path"]], listed
        assert temp_files(state) == [], temp_files(state)
    finally:
        server.shutdown()


def test_a_native_crash_of_the_server_leaves_its_python_stacks_in_its_log(
    tmp_path: Path,
) -> None:
    """A SIGSEGV (a GEPA run in a CI gate ended so, with nothing in the log to say where):
    the server's fault handler writes every thread's stack to stderr before it dies."""
    _state, _env, server = _scripted_session(tmp_path)
    os.kill(server.pid, signal.SIGSEGV)
    assert wait_until(lambda: server.proc.poll() is not None, 10), "the server did not die"
    log = server.log.read_text(encoding="utf-8", errors="replace")
    assert "Fatal Python error: Segmentation fault" in log, log[-2000:]
    assert "File " in log and "fleet_lsp" in log, log[-2000:]
