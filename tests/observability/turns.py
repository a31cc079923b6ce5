"""A scripted RLM Turn that submits an answer, for the tracing and label tests."""

from __future__ import annotations

from fleet_core.api import FleetRuntime
from fleet_core.engine.scripted_lm import SwitchableLms, route, scripted_lm, submit
from fleet_core.models import TurnRequest


async def rlm_turn(runtime: FleetRuntime, lms: SwitchableLms, answer: str = "'42'") -> str:
    """A new Session's completed Turn (the scripted root submits ``answer``); its trace id."""
    session = await runtime.new_session()
    lms.root = scripted_lm([submit(answer)])
    lms.sub = scripted_lm(rules={"[[ ## route ## ]]": route("rlm")})
    result = await runtime.run_turn(
        TurnRequest(session_id=session.session_id, task="say 42", mode="rlm")
    )
    assert result.status == "completed", result.error
    assert result.trace_id
    return result.trace_id
