"""The one record of a model role (``ModelInUse``) and a ``KeyBinding``, each rendered one way
per face: the texts ``config show`` and doctor print, and the wire ``model status --json`` sends.
"""

from __future__ import annotations

from typing import Any, get_args, get_type_hints

import pytest

from fleet_core.api.records import ModelInUse
from fleet_core.config import KeyBinding
from fleet_core.errors import FleetError
from fleet_core.models import TurnRequest
from fleet_core.modes import EXECUTION_MODES, ROUTES, ExecutionMode, Route
from fleet_lsp import protocol
from fleet_lsp.traces import label_update

MISSING = ModelInUse.missing("judge", "No model is configured: set it", "set FLEET_LM_MODEL")
HOSTED = ModelInUse("root", "m", "https://x.example/v1")
UNREACHABLE = ModelInUse("root", "m", "https://x.example/v1", problem="unreachable", fix="check")
EMBEDDED = ModelInUse("sub", "qwen", None, embedded=True)
RUNNING = ModelInUse("sub", "qwen", "http://127.0.0.1:5/v1", embedded=True)


@pytest.mark.parametrize(
    ("use", "line", "detailed"),
    [
        (MISSING, "none (No model is configured)", "No model is configured"),
        (HOSTED, "m at https://x.example/v1", "m at https://x.example/v1 (origin)"),
        (UNREACHABLE, "m at https://x.example/v1: unreachable", ""),
        (EMBEDDED, "embedded qwen (starts on the first Turn)", ""),
        (RUNNING, "embedded qwen (running at http://127.0.0.1:5/v1)", ""),
    ],
)
def test_a_model_role_has_one_text(use: ModelInUse, line: str, detailed: str) -> None:
    assert use.describe() == line
    if detailed:
        assert use.describe(detailed=True, origin="origin") == detailed


def test_the_detailed_text_names_the_embedded_model_and_the_probe() -> None:
    assert RUNNING.describe(detailed=True, origin="ignored") == (
        "embedded offline model qwen (running at http://127.0.0.1:5/v1; no endpoint is configured)"
    )
    assert (
        UNREACHABLE.describe(detailed=True, origin="o")
        == "m at https://x.example/v1: unreachable (o)"
    )


def test_a_model_role_has_one_wire_form() -> None:
    assert MISSING.wire() == {
        "model": None,
        "apiBase": None,
        "embedded": False,
        "problem": "No model is configured: set it",
    }
    assert RUNNING.wire() == {
        "model": "qwen",
        "apiBase": "http://127.0.0.1:5/v1",
        "embedded": True,
        "problem": None,
    }
    assert (MISSING.configured, MISSING.ok, UNREACHABLE.configured, UNREACHABLE.ok) == (
        False, False, True, False)  # fmt: skip
    assert EMBEDDED.ok and HOSTED.ok


def _binding(**changes: Any) -> KeyBinding:
    fields: dict[str, Any] = {
        "name": "llm.root",
        "label": "root",
        "endpoint": "https://repo.example/v1",
        "endpoint_setting": "llm.root.api_base",
        "endpoint_source": "file",
        "endpoint_origin": "config/fleet.toml",
        "endpoint_scope": "workspace",
        "key": "FLEET_LM_API_KEY",
        "key_origin": "environment",
        "key_scope": "user",
        "key_sent": False,
        "reason": "the endpoint was set by a workspace file",
    }
    return KeyBinding(**(fields | changes))


def test_a_key_binding_renders_one_way_with_or_without_the_endpoint() -> None:
    withheld = _binding(key_used="FLEET_LM_API_KEY (.env, workspace)")
    assert withheld.describe() == (
        "root: api_base https://repo.example/v1 (from config/fleet.toml, workspace) key "
        "FLEET_LM_API_KEY (environment, user) — not sent: the endpoint was set by a workspace "
        "file; sending FLEET_LM_API_KEY (.env, workspace) instead"
    )
    assert (
        withheld.provenance()
        == withheld.describe(provenance=True)
        == (
            "llm.root.api_base from config/fleet.toml (workspace); key FLEET_LM_API_KEY "
            "(environment, user) not sent: the endpoint was set by a workspace file; sending "
            "FLEET_LM_API_KEY (.env, workspace) instead"
        )
    )
    trusted = _binding(key_sent=True, trusted=True, reason=None)
    assert trusted.describe().endswith("(environment, user) — sent: workspace trusted")
    assert trusted.provenance().endswith("(environment, user), sent: workspace trusted")
    keyless = _binding(endpoint=None, endpoint_source="default", key=None, key_scope=None)
    assert keyless.describe() == "root: no api_base, no key"
    assert keyless.provenance() == "llm.root.api_base: built-in default; no key"


def test_the_mode_and_the_route_are_each_defined_once() -> None:
    assert EXECUTION_MODES == get_args(ExecutionMode) == ("hybrid", "rlm", "flex")
    assert ROUTES == get_args(Route) == ("direct", "flex", "rlm")
    assert TurnRequest.model_fields["mode"].annotation == ExecutionMode | None


def test_the_protocol_and_the_label_check_use_the_core_modes_and_routes() -> None:
    for params in (protocol.SessionNewParams, protocol.TurnRunParams):
        assert get_type_hints(params)["mode"] == ExecutionMode | None
    assert get_type_hints(protocol.SetModeParams)["mode"] == ExecutionMode
    assert get_type_hints(protocol.TraceLabelParams)["route"] == Route | None
    with pytest.raises(protocol.ParamsError, match="'hybrid', 'rlm', 'flex'; got 'x'"):
        protocol.parse(protocol.SetModeParams, {"sessionId": "s", "mode": "x"})
    with pytest.raises(FleetError, match="'route' must be one of: direct, flex, rlm; got 'x'"):
        label_update(route="x")
