"""One protocol source: protocol.py, docs/schema/protocol.schema.json, docs/protocol.md and the
VS Code extension's generated types must not drift apart (regenerate: python -m fleet_lsp.schema).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import attrs
import pytest
from jsonschema import Draft202012Validator

from fleet_lsp import protocol, schema

REPO = Path(__file__).resolve().parents[2]
HINT = "stale: regenerate with `uv run python -m fleet_lsp.schema` and commit the result"


@pytest.fixture(scope="module")
def committed() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((REPO / schema.SCHEMA_PATH).read_text(encoding="utf-8"))
    return loaded


def test_committed_schema_is_the_regeneration_from_protocol_py() -> None:
    assert (REPO / schema.SCHEMA_PATH).read_text(encoding="utf-8") == schema.schema_text(), HINT


def test_committed_typescript_is_the_regeneration_from_the_committed_schema(
    committed: dict[str, Any],
) -> None:
    text = (REPO / schema.TS_PATH).read_text(encoding="utf-8")
    assert text == schema.typescript(committed), HINT


def test_check_mode_reports_a_stale_file_and_writes_nothing(tmp_path: Path) -> None:
    (tmp_path / schema.SCHEMA_PATH).parent.mkdir(parents=True)
    (tmp_path / schema.SCHEMA_PATH).write_text("{}\n")
    assert schema.main(["--check", "--root", str(tmp_path)]) == 1
    assert (tmp_path / schema.SCHEMA_PATH).read_text() == "{}\n"
    assert schema.main(["--root", str(tmp_path)]) == 0
    assert schema.main(["--check", "--root", str(tmp_path)]) == 0
    assert (tmp_path / schema.TS_PATH).read_text().startswith("// The fleet-lsp protocol")


def test_the_schema_is_valid_json_schema_and_covers_every_method(
    committed: dict[str, Any],
) -> None:
    Draft202012Validator.check_schema(committed)
    assert set(committed["requests"]) == set(protocol.METHODS)
    assert set(committed["notifications"]) == set(protocol.NOTIFICATIONS)
    assert committed["commands"] == protocol.COMMANDS
    missing = sorted(set(protocol.METHODS) - set(protocol.RESULTS))
    assert not missing, f"add the result shape of {missing} to protocol.RESULTS"


def _validator(committed: dict[str, Any], pointer: str) -> Draft202012Validator:
    return Draft202012Validator({**committed, "$ref": pointer})


def _escape(method: str) -> str:
    return method.replace("~", "~0").replace("/", "~1")


def _sample(prop: dict[str, Any]) -> Any:
    """A valid value for a params property (the first option of a union)."""
    prop = prop.get("anyOf", [prop])[0]
    if "enum" in prop:
        return prop["enum"][0]
    kind = prop.get("type")
    if kind == "integer":
        return int(prop.get("minimum", 1))
    return {"string": "x", "boolean": True, "array": [], "object": {}}.get(kind, "x")


@pytest.mark.parametrize("method", sorted(protocol.METHODS))
def test_params_schema_requires_and_bounds_what_parse_does(
    committed: dict[str, Any], method: str
) -> None:
    cls = protocol.METHODS[method]
    definition = committed["$defs"][cls.__name__]
    check = _validator(committed, f"#/requests/{_escape(method)}/params")
    names = [protocol.json_name(f) for f in attrs.fields(cls)]
    assert list(definition["properties"]) == names
    # the smallest valid params: accepted by both; without any required field, by neither
    base = {
        name: _sample(definition["properties"][name]) for name in definition.get("required", [])
    }
    protocol.parse(cls, base)
    assert check.is_valid(base)
    for name in base:
        smaller = {k: v for k, v in base.items() if k != name}
        assert not check.is_valid(smaller)
        with pytest.raises(protocol.ParamsError):
            protocol.parse(cls, smaller)
    for field in attrs.fields(cls):
        name = protocol.json_name(field)
        if (
            "object" in json.dumps(definition["properties"][name])
            or not definition["properties"][name]
        ):
            continue  # Any, or an object is a right value
        wrong = {**base, name: {"not": "right"}}  # the wrong type: refused by both
        assert not check.is_valid(wrong)
        with pytest.raises(protocol.ParamsError):
            protocol.parse(cls, wrong)
        for bound in ("max_len", "max"):  # one past a bound: refused by both
            limit = field.metadata.get(bound)
            if limit is None or limit > 10_000:
                continue
            over = {**base, name: "x" * (int(limit) + 1) if bound == "max_len" else int(limit) + 1}
            assert not check.is_valid(over), (method, name, bound)
            with pytest.raises(protocol.ParamsError):
                protocol.parse(cls, over)


def test_null_optional_params_are_accepted_like_parse_does(committed: dict[str, Any]) -> None:
    check = _validator(committed, "#/requests/fleet~1turn~1run/params")
    params = {"sessionId": "s1", "task": "t", "mode": None, "recordReplay": None}
    protocol.parse(protocol.TurnRunParams, params)
    assert check.is_valid(params)
    assert not check.is_valid({"sessionId": "s1", "task": "t", "mode": "fast"})


def _documented(text: str) -> tuple[set[str], set[str]]:
    table = set(re.findall(r"^\| `(fleet/[A-Za-z]+/[A-Za-z]+)`", text, flags=re.MULTILINE))
    anywhere = set(re.findall(r"fleet/[A-Za-z]+/[A-Za-z]+", text))
    return table, anywhere


def test_every_method_is_documented_and_every_documented_method_exists(
    committed: dict[str, Any],
) -> None:
    table, anywhere = _documented((REPO / "docs" / "protocol.md").read_text(encoding="utf-8"))
    requests = set(committed["requests"])
    notifications = set(committed["notifications"])
    assert requests - table == set(), "add these requests to docs/protocol.md's Requests table"
    assert notifications - anywhere == set(), "document these notifications in docs/protocol.md"
    unknown = anywhere - requests - notifications
    assert unknown == set(), f"docs/protocol.md names methods the protocol lacks: {unknown}"


def test_the_drift_check_catches_an_undocumented_and_a_phantom_method() -> None:
    text = "| `fleet/session/new` | x |\nsee fleet/ghost/method and fleet/turn/didEmit\n"
    table, anywhere = _documented(text)
    assert table == {"fleet/session/new"}
    assert "fleet/ghost/method" in anywhere - set(protocol.METHODS)


def test_typescript_names_every_definition_method_and_command(committed: dict[str, Any]) -> None:
    text = schema.typescript(committed)
    for name in committed["$defs"]:
        assert re.search(rf"export (interface|type) {name}\b", text), name
    for method in committed["requests"]:
        assert f'  "{method}": {{ params: ' in text
    assert 'kind: "child_spawned"; payload: ChildSpawnedPayload' in text
    assert "takeFocus?: boolean | null;" in text  # optional params accept null
    assert "sessionId: string;" in text
