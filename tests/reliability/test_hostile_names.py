"""Names a workspace cannot hold (issue 19): model code, a child agent, an attached file or an older
fleet-lsp leave a file whose name has a control character, a newline, DEL, a C1 control, a
backslash, bytes that are not UTF-8, or a path too long to list. The Session must stay usable: the
file is quarantined under an escaped name (``fleet_core.names``), the cell says so, and the next
Turn, the listings and delete all work. The scripted model's code runs in the real sandbox."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fleet_core import names
from fleet_core.api import FleetRuntime
from fleet_core.engine.scripted_lm import SwitchableLms, action, scripted_lm, submit
from fleet_core.events import TurnEvent
from fleet_core.models import TurnRequest
from fleet_core.sandbox.isolation import find_bwrap
from fleet_core.workspace import MAX_PATH_CHARS

pytestmark = pytest.mark.skipif(find_bwrap() is None, reason="bubblewrap not available")

# name written by model code -> what the workspace keeps
HOSTILE = {
    "artifacts/esc\x1b[31m.txt": "artifacts/esc%1B[31m.txt",
    "artifacts/new\nline.txt": "artifacts/new%0Aline.txt",
    "artifacts/del\x7f.txt": "artifacts/del%7F.txt",
    "artifacts/csi\x9b2J.txt": "artifacts/csi%C2%9B2J.txt",
    "artifacts/back\\slash.txt": "artifacts/back%5Cslash.txt",
    "memory/bell\x07.md": "memory/bell%07.md",
    "skills/sk\x1b/SKILL.md": "skills/sk%1B/SKILL.md",
    "artifacts/dir\x01/inner.txt": "artifacts/dir%01/inner.txt",
}
BIDI = "artifacts/invoice\u202etxt.exe"  # a name the workspace holds; renderers show it escaped


def _writer(paths: list[str]) -> str:
    return (
        "import os\n"
        f"for p in {paths!r}:\n"
        "    os.makedirs(os.path.dirname(p), exist_ok=True)\n"
        "    open(p, 'w').write('kept ' + p)\n"
        "open(os.fsencode('artifacts/') + b'latin\\xe9.txt', 'wb').write(b'bytes')\n"
        "deep = 'artifacts/' + '/'.join(['d' * 200] * 6)\n"
        "os.makedirs(deep, exist_ok=True)\n"
        "open(deep + '/long.txt', 'w').write('deep')\n"
        "print('wrote')"
    )


async def _turn(
    runtime: FleetRuntime, lms: SwitchableLms, session: str, *replies: str
) -> tuple[str, list[TurnEvent]]:
    lms.root = scripted_lm(["[[ ## route ## ]]\nrlm\n\n[[ ## completed ## ]]", *replies])
    events: list[TurnEvent] = []
    result = await runtime.run_turn(
        TurnRequest(session_id=session, task="write files", mode="rlm"), on_event=events.append
    )
    assert result.status == "completed", result.error
    return result.answer, events


def _cell_output(events: list[TurnEvent]) -> str:
    return "\n".join(
        str(e.payload.get("output") or "") + str(e.payload.get("error") or "")
        for e in events
        if e.kind.startswith("cell")
    )


async def test_model_written_names_are_quarantined_and_the_session_stays_usable(
    scripted: tuple[FleetRuntime, SwitchableLms],
) -> None:
    runtime, lms = scripted
    await runtime.new_session("names", mode="rlm")
    _answer, events = await _turn(
        runtime, lms, "names", action(_writer([*HOSTILE, BIDI])), submit("'done'")
    )
    note = _cell_output(events)
    assert "renamed" in note and "esc%1B[31m.txt" in note and "\x1b" not in note

    listed = await runtime.list_workspace("names")
    paths = {f.path for group in listed.values() for f in group}
    for kept in HOSTILE.values():
        assert kept in paths
    assert BIDI in paths and "artifacts/latin%E9.txt" in paths
    assert not any(names.has_unrepresentable(p) or len(p) > MAX_PATH_CHARS for p in paths)
    assert [p for p in paths if p.endswith("long.txt")], paths  # moved, not lost
    artifacts = {a.path for a in await runtime.list_artifacts("names")}
    assert "artifacts/esc%1B[31m.txt" in artifacts
    assert (await runtime.read_file("names", "artifacts/new%0Aline.txt")) == (
        b"kept artifacts/new\nline.txt"
    )

    await _turn(runtime, lms, "names", action("print('again')"), submit("'ok'"))  # next Turn
    await runtime.delete_file("names", "artifacts/esc%1B[31m.txt")
    remaining = {f.path for g in (await runtime.list_workspace("names")).values() for f in g}
    assert "artifacts/esc%1B[31m.txt" not in remaining


async def test_a_session_an_older_version_left_with_such_names_opens_lists_and_runs(
    scripted: tuple[FleetRuntime, SwitchableLms],
) -> None:
    runtime, lms = scripted
    await runtime.new_session("legacy", mode="rlm")
    root = runtime.config.state_dir / "workspaces" / "legacy"
    (root / "artifacts" / "x\x1b.txt").write_text("legacy")
    Path(os.fsdecode(os.fsencode(root / "files") + b"/raw\xff.csv")).write_bytes(b"a,b\n")  # noqa: ASYNC240

    listed = await runtime.list_workspace("legacy")
    paths = {f.path for group in listed.values() for f in group}
    assert {"artifacts/x%1B.txt", "files/raw%FF.csv"} <= paths
    await _turn(
        runtime, lms, "legacy", action("print(open('artifacts/x%1B.txt').read())"), submit("'ok'")
    )
    await runtime.delete_file("legacy", "artifacts/x%1B.txt")
    assert not (root / "artifacts" / "x%1B.txt").exists()


async def test_an_attached_file_with_such_a_name_keeps_an_escaped_one(
    runtime: FleetRuntime, tmp_path: Path
) -> None:
    await runtime.new_session("attach")
    source = tmp_path / "report\x1b\n.csv"
    source.write_text("a\n1\n")
    info = await runtime.attach("attach", source)
    assert info.path == "files/report%1B%0A.csv"


def test_quarantine_never_overwrites_and_escapes_visibly(tmp_path: Path) -> None:
    top = tmp_path / "artifacts"
    top.mkdir()
    (top / "x%1B.txt").write_text("already here")
    (top / "x\x1b.txt").write_text("hostile")
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        paths, renamed = names.walk_regular(fd, "artifacts", max_depth=8)
    finally:
        os.close(fd)
    assert paths == ["artifacts/x%1B-2.txt", "artifacts/x%1B.txt"]
    assert (top / "x%1B.txt").read_text() == "already here"
    assert [r.describe() for r in renamed] == ["'artifacts/x\\x1b.txt' -> 'artifacts/x%1B-2.txt'"]
    assert names.shown("a\x9b\udcff\\b") == "a\\x9b\\xff\\\\b"
