"""One artifact URI (issue 20): a Turn's result names an artifact whose path has a space, '#' or
'%' by the same percent-encoded URI the documents parse and ``fleet/artifact/didChange`` sends."""

from __future__ import annotations

from fleet_core.api import FleetRuntime
from fleet_core.engine.scripted_lm import SwitchableLms, action, route, scripted_lm, submit
from fleet_core.models import TurnRequest
from fleet_core.workspace import artifact_uri
from fleet_lsp.documents import parse_uri

NAME = "artifacts/my report #1 (100%).csv"


async def test_a_turns_artifact_uri_is_the_one_the_documents_parse(
    scripted: tuple[FleetRuntime, SwitchableLms],
) -> None:
    runtime, lms = scripted
    await runtime.new_session("uris", mode="rlm")
    lms.root = scripted_lm(
        [route("rlm"), action(f"open({NAME!r}, 'w').write('a,b')"), submit("'ok'")]
    )
    result = await runtime.run_turn(TurnRequest(session_id="uris", task="write it"))
    assert result.status == "completed", result.error
    [ref] = [a for a in result.artifacts if a.path == NAME]
    assert ref.uri == artifact_uri("uris", NAME)
    assert ref.uri == "fleet:/sessions/uris/artifacts/my%20report%20%231%20%28100%25%29.csv"
    parsed = parse_uri(ref.uri)
    assert (parsed.session_id, parsed.path) == ("uris", NAME)
