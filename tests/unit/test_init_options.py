"""``initializationOptions.fleet`` as one typed model (``protocol.InitializationOptions``): good
options are applied, a bad one is ignored (its default applies, as before) and reported with a
message naming it."""

from __future__ import annotations

from typing import Any

import pytest
from lsprotocol import types

from fleet_lsp.protocol import PROTOCOL_VERSION, InitializationOptions, changed_settings
from fleet_lsp.server import FleetServer, create_server

GOOD = {
    "protocolVersion": 1,
    "client": "vscode",
    "turnEvents": True,
    "settings": {"llm": {"model": "openai/gpt-4.1-mini"}, "runtime.max_agent_depth": 2},
}


def test_good_options_are_read_as_they_were_sent() -> None:
    options, problems = InitializationOptions.read({"fleet": GOOD})
    assert problems == []
    assert options == InitializationOptions(
        protocol_version=1,
        client="vscode",
        turn_events=True,
        settings={"llm": {"model": "openai/gpt-4.1-mini"}, "runtime.max_agent_depth": 2},
    )


def test_a_bad_option_is_ignored_and_named_and_the_others_still_apply() -> None:
    raw = {**GOOD, "protocolVersion": "1", "turnEvents": "yes", "client": ""}
    options, problems = InitializationOptions.read({"fleet": raw})
    assert options.protocol_version == PROTOCOL_VERSION  # the defaults, as before
    assert options.turn_events is False
    assert options.client is None
    assert options.settings == GOOD["settings"]  # applied
    assert problems == [
        "'initializationOptions.fleet.protocolVersion' must be an integer, got a string; "
        "using 1 instead",
        "'initializationOptions.fleet.client' must not be empty; it is ignored",
        "'initializationOptions.fleet.turnEvents' must be true or false, got a string; "
        "using false instead",
    ]


def test_settings_that_are_not_an_object_are_refused() -> None:
    options, problems = InitializationOptions.read({"fleet": {"settings": ["llm.model"]}})
    assert options.settings == {}
    assert problems == [
        "'initializationOptions.fleet.settings' must be an object, got an array; using {} instead"
    ]


@pytest.mark.parametrize(
    "raw",
    [
        None,
        {},
        {"other": {"x": 1}},  # another tool's options
        {"fleet": None},
        {"fleet": {}},
        {"fleet": {"settings": [], "turnEvents": False}},  # Neovim: an empty Lua table is []
        {"fleet": {"futureOption": 1, "settings": None}},  # unknown and null: ignored quietly
    ],
)
def test_no_options_or_empty_ones_are_the_defaults_and_no_problem(raw: Any) -> None:
    options, problems = InitializationOptions.read(raw)
    assert problems == []
    assert options.turn_events is False and options.settings == {}
    assert options.protocol_version == PROTOCOL_VERSION


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ({"fleet": 5}, "'initializationOptions.fleet' must be an object, got a number"),
        ("fleet", "'initializationOptions' must be an object, got a string"),
    ],
)
def test_options_that_are_not_an_object_are_reported(raw: Any, problem: str) -> None:
    options, problems = InitializationOptions.read(raw)
    assert options == InitializationOptions()
    assert len(problems) == 1 and problems[0].startswith(problem)


def _initialize(server: FleetServer, fleet: Any) -> list[types.ShowMessageParams]:
    shown: list[types.ShowMessageParams] = []
    server.window_show_message = shown.append  # type: ignore[method-assign]
    server.on_initialize(
        types.InitializeParams(
            capabilities=types.ClientCapabilities(
                window=types.WindowClientCapabilities(work_done_progress=True)
            ),
            client_info=types.ClientInfo(name="Some Editor"),
            initialization_options={"fleet": fleet},
        )
    )
    server.report_option_problems()
    server.report_option_problems()  # once
    return shown


def test_the_server_applies_the_options_and_warns_of_a_bad_one() -> None:
    server = create_server()
    shown = _initialize(server, {**GOOD, "turnEvents": "yes"})
    assert server.client.name == "vscode"
    assert server.client.turn_events is False
    assert server.client.settings == GOOD["settings"]
    assert server.client.work_done_progress is True
    assert [(m.type, m.message) for m in shown] == [
        (
            types.MessageType.Warning,
            "Fleet ignored an initialization option: 'initializationOptions.fleet.turnEvents' "
            "must be true or false, got a string; using false instead",
        )
    ]


def test_without_a_client_name_the_editors_own_name_is_used() -> None:
    server = create_server()
    assert _initialize(server, {"turnEvents": True}) == []
    assert server.client.name == "Some Editor"
    assert server.client.turn_events is True


@pytest.mark.parametrize(
    ("settings", "overrides"),
    [
        ({"fleet": {"llm": {"model": "m"}}}, {"llm": {"model": "m"}}),  # VS Code
        ({"fleet": {"settings": {"llm.model": "m"}}}, {"llm.model": "m"}),  # the options' shape
        ({"llm.model": "m"}, {"llm.model": "m"}),
        ({"fleet": "x"}, None),
        (None, None),
    ],
)
def test_a_configuration_change_brings_the_same_overrides(
    settings: Any, overrides: dict[str, Any] | None
) -> None:
    assert changed_settings(settings) == overrides
