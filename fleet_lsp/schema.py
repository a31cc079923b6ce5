"""One protocol source for every client: the JSON Schema of the ``fleet/*`` protocol, generated
from :mod:`fleet_lsp.protocol`, and the TypeScript types generated from that schema.

``uv run python -m fleet_lsp.schema`` rewrites both committed files
(``docs/schema/protocol.schema.json`` and ``editor-clients/vscode/src/protocol.generated.ts``);
``--check`` only reports whether they are stale (exit 1). ``tests/unit/test_protocol_schema.py``
runs the same check, so the normal test run fails when protocol.py, the schema, the TypeScript
types or docs/protocol.md drift apart.

The schema is derived from the same tables the server dispatches on: ``METHODS`` (params, attrs
classes whose field metadata carries the JSON names and bounds :func:`fleet_lsp.protocol.parse`
enforces), ``RESULTS`` (``TypedDict``\\ s) and ``NOTIFICATIONS``; ``fleet/turn/didEmit`` reuses
the Turn event schema of :mod:`fleet_core.event_payloads`. Params accept unknown fields and
``null`` for every optional field, exactly as ``parse`` does; results may gain fields (the
protocol extends, it never breaks), so no object is closed.
"""

from __future__ import annotations

import argparse
import inspect
import json
import re
import sys
import types
import typing
from pathlib import Path
from typing import Any, Literal, NotRequired, Required, Union, get_args, get_origin, is_typeddict

import attrs

from fleet_lsp import protocol

SCHEMA_ID = "https://fleet-lsp.dev/schema/protocol.schema.json"
SCHEMA_PATH = Path("docs/schema/protocol.schema.json")
TS_PATH = Path("editor-clients/vscode/src/protocol.generated.ts")
COMMAND = "uv run python -m fleet_lsp.schema"
_NONE = type(None)


# ---------------------------------------------------------------------------------------------
# Python types -> JSON Schema
# ---------------------------------------------------------------------------------------------


class _Builder:
    """Turns protocol.py's annotations into schemas, collecting named definitions."""

    def __init__(self) -> None:
        self.defs: dict[str, Any] = {}

    def ref(self, cls: type) -> dict[str, Any]:
        name = cls.__name__
        if name not in self.defs:
            self.defs[name] = {}  # placeholder first: recursive shapes terminate
            self.defs[name] = self._params(cls) if attrs.has(cls) else self._typeddict(cls)
        return {"$ref": f"#/$defs/{name}"}

    def of(self, tp: Any) -> dict[str, Any]:
        origin = get_origin(tp)
        if tp is Any:
            return {}
        if tp is None or tp is _NONE:
            return {"type": "null"}
        if origin in (Union, types.UnionType):
            schemas = [self.of(a) for a in get_args(tp) if a is not _NONE]
            if _NONE in get_args(tp):
                schemas.append({"type": "null"})
            return schemas[0] if len(schemas) == 1 else {"anyOf": schemas}
        if origin is Literal:
            values = list(get_args(tp))
            kinds = {type(v) for v in values}
            base = {"type": "string"} if kinds == {str} else {}
            return {**base, "enum": values}
        if origin is list:
            args = get_args(tp)
            return {"type": "array", **({"items": self.of(args[0])} if args else {})}
        if origin is dict:
            args = get_args(tp)
            value_schema = self.of(args[1]) if args else {}
            extra = {"additionalProperties": value_schema} if value_schema else {}
            return {"type": "object", **extra}
        if isinstance(tp, type) and (attrs.has(tp) or is_typeddict(tp)):
            return self.ref(tp)
        simple = {str: "string", bool: "boolean", int: "integer", float: "number"}
        if tp in simple:
            return {"type": simple[tp]}
        raise TypeError(f"no JSON Schema for {tp!r}")  # a new kind of annotation: teach this

    def _params(self, cls: type) -> dict[str, Any]:
        hints = typing.get_type_hints(cls)
        properties: dict[str, Any] = {}
        required: list[str] = []
        for field in attrs.fields(cls):
            name = protocol.json_name(field)
            schema = _bounded(self.of(hints[field.name]), field.metadata)
            if field.default is attrs.NOTHING:
                required.append(name)
            else:
                schema = _nullable(schema)  # parse() treats null as absent
                if field.default is not None and _is_json(field.default):
                    schema["default"] = field.default
            properties[name] = schema
        return _object(cls, properties, required)

    def _typeddict(self, cls: type) -> dict[str, Any]:
        hints = typing.get_type_hints(cls, include_extras=True)
        properties: dict[str, Any] = {}
        required: list[str] = []
        for name, tp in hints.items():
            if get_origin(tp) is NotRequired:
                tp = get_args(tp)[0]
            else:
                if get_origin(tp) is Required:
                    tp = get_args(tp)[0]
                required.append(name)
            properties[name] = self.of(tp)
        return _object(cls, properties, required)


def _object(cls: type, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object"}
    doc = cls.__doc__
    if doc and not doc.startswith(f"{cls.__name__}("):  # attrs/TypedDict default docs
        schema["description"] = _plain(inspect.cleandoc(doc))
    schema["properties"] = properties
    if required:
        schema["required"] = required
    return schema


def _plain(text: str) -> str:
    """A docstring as one paragraph of plain text (reST literals unquoted)."""
    return re.sub(r"\s+", " ", text.replace("``", "`")).strip()


def _is_json(value: Any) -> bool:
    return isinstance(value, str | int | float | bool)


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    options = schema.get("anyOf", [schema])
    if {"type": "null"} in options:
        return dict(schema)
    if "anyOf" in schema:
        return {**schema, "anyOf": [*options, {"type": "null"}]}
    return {"anyOf": [schema, {"type": "null"}]}


def _bounded(schema: dict[str, Any], meta: Any) -> dict[str, Any]:
    """Apply a field's bounds (``_f(min=..., max_len=...)``) where ``parse`` applies them."""
    if "anyOf" in schema:
        return {**schema, "anyOf": [_bounded(s, meta) for s in schema["anyOf"]]}
    schema = dict(schema)
    kind = schema.get("type")
    if kind == "string":
        if "min_len" in meta:
            schema["minLength"] = meta["min_len"]
        if "max_len" in meta:
            schema["maxLength"] = meta["max_len"]
    elif kind == "array" and "max_len" in meta:
        schema["maxItems"] = meta["max_len"]
    elif kind in ("integer", "number"):
        if "min" in meta:
            schema["minimum"] = meta["min"]
        if "max" in meta:
            schema["maximum"] = meta["max"]
    return schema


def _turn_event(defs: dict[str, Any]) -> dict[str, Any]:
    """``fleet/turn/didEmit`` params from fleet_core.event_payloads, its definitions merged."""
    from fleet_core.event_payloads import json_schema

    event = json_schema()
    for name, definition in event.pop("$defs").items():
        if name in defs and defs[name] != definition:
            raise ValueError(f"definition {name!r} is both a protocol type and an event payload")
        defs[name] = definition
    event.pop("$schema", None)
    event.pop("title", None)
    return event


def json_schema() -> dict[str, Any]:
    """The protocol's JSON Schema: one entry per request (params and result), notification and
    command, the error codes, and every shape under ``$defs``."""
    builder = _Builder()
    requests: dict[str, Any] = {}
    for method in sorted(protocol.METHODS):
        result = protocol.RESULTS.get(method, Any)
        requests[method] = {
            "params": builder.ref(protocol.METHODS[method]),
            "result": builder.of(result),
        }
    notifications: dict[str, Any] = {}
    for method in sorted(protocol.NOTIFICATIONS):
        params = protocol.NOTIFICATIONS[method]
        if params == "TurnEvent":
            builder.defs["TurnEvent"] = _turn_event(builder.defs)
            notifications[method] = {"params": {"$ref": "#/$defs/TurnEvent"}}
        else:
            notifications[method] = {"params": builder.of(params)}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": f"fleet-lsp protocol (version {protocol.PROTOCOL_VERSION})",
        "description": (
            "Every fleet/* request (params, result), notification and command, and the error "
            f"codes. Generated from fleet_lsp/protocol.py by `{COMMAND}`; do not edit. "
            "docs/protocol.md documents it."
        ),
        "protocolVersion": protocol.PROTOCOL_VERSION,
        "requests": requests,
        "notifications": notifications,
        "commands": dict(sorted(protocol.COMMANDS.items())),
        "errorCodes": {
            **dict(sorted(protocol.ERROR_CODES.items())),
            "other": protocol.FLEET_ERROR,
        },
        "$defs": dict(sorted(builder.defs.items())),
    }


def schema_text() -> str:
    """The schema as committed: two-space indented JSON with a final newline."""
    return json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n"


# ---------------------------------------------------------------------------------------------
# JSON Schema -> TypeScript
# ---------------------------------------------------------------------------------------------

_IDENT = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$]*$")


def _key(name: str) -> str:
    return name if _IDENT.match(name) else json.dumps(name)


def _literal(value: Any) -> str:
    return "null" if value is None else json.dumps(value, ensure_ascii=False)


def _comment(text: str | None, indent: str = "") -> list[str]:
    if not text:
        return []
    safe = re.sub(r"\s+", " ", text).replace("*/", "*\\/")
    return [f"{indent}/** {safe} */"]


def _ts(schema: Any, indent: str = "") -> str:
    """The TypeScript type of a (sub)schema."""
    if schema is True or schema == {}:
        return "unknown"
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[1]
    if "const" in schema:
        return _literal(schema["const"])
    if "enum" in schema:
        return " | ".join(_literal(v) for v in schema["enum"])
    for combinator, sep in (("anyOf", " | "), ("oneOf", " | "), ("allOf", " & ")):
        if combinator in schema and "properties" not in schema:
            parts = list(dict.fromkeys(_ts(s, indent) for s in schema[combinator]))
            return sep.join(parts)
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(_ts({**schema, "type": k}, indent) for k in kind)
    if kind == "array":
        item = _ts(schema.get("items", {}), indent)
        return f"Array<{item}>" if not _IDENT.match(item) else f"{item}[]"
    if kind == "object" or "properties" in schema:
        if "properties" in schema:
            return _ts_object(schema, indent)
        extra = schema.get("additionalProperties")
        value = _ts(extra, indent) if isinstance(extra, dict) else "unknown"
        return f"Record<string, {value}>"
    simple = {"string": "string", "integer": "number", "number": "number", "boolean": "boolean"}
    if kind in simple:
        return simple[kind]
    if kind == "null":
        return "null"
    if kind is None:  # annotations only (title, description, default): any JSON value
        return "unknown"
    raise ValueError(f"no TypeScript type for schema {schema!r}")


def _ts_object(schema: dict[str, Any], indent: str = "") -> str:
    inner = indent + "  "
    required = set(schema.get("required", []))
    lines = ["{"]
    for name, prop in schema.get("properties", {}).items():
        lines += _comment(prop.get("description"), inner)
        optional = "" if name in required else "?"
        lines.append(f"{inner}{_key(name)}{optional}: {_ts(prop, inner)};")
    lines.append(indent + "}")
    return "\n".join(lines)


def _ts_definition(name: str, schema: dict[str, Any]) -> list[str]:
    lines = _comment(schema.get("description"))
    branches = schema.get("oneOf")
    if "properties" in schema and branches:  # a discriminated union (the TurnEvent)
        base = {k: v for k, v in schema.items() if k not in ("oneOf", "description")}
        lines += [f"export interface {name}Base {_ts_object(base)}", ""]
        variants = []
        for branch in branches:
            props = branch.get("properties", {})
            fields = "; ".join(f"{_key(k)}: {_ts(v)}" for k, v in props.items())
            variants.append(f"  | {name}Base & {{ {fields} }}")
        lines += [f"export type {name} =", *variants]
        lines[-1] += ";"
        return lines
    if "properties" in schema:
        return [*lines, f"export interface {name} {_ts_object(schema)}"]
    return [*lines, f"export type {name} = {_ts(schema)};"]


def typescript(schema: dict[str, Any]) -> str:
    """The TypeScript module generated from the schema (deterministic: same schema, same text)."""
    out = [
        "// The fleet-lsp protocol's types, generated from docs/schema/protocol.schema.json",
        f"// (itself generated from fleet_lsp/protocol.py) by `{COMMAND}`. Do not edit.",
        "/* eslint-disable */",
        "",
        f"export const FLEET_PROTOCOL_VERSION = {int(schema['protocolVersion'])};",
        "",
    ]
    for name, definition in schema["$defs"].items():
        out += [*_ts_definition(name, definition), ""]
    out.append("/** Every `fleet/*` request: its params and its result. */")
    out.append("export interface FleetRequests {")
    for method, entry in schema["requests"].items():
        out.append(
            f"  {json.dumps(method)}: {{ params: {_ts(entry['params'])}; "
            f"result: {_ts(entry['result'])} }};"
        )
    out += ["}", ""]
    out.append("/** Every server -> client notification and its params. */")
    out.append("export interface FleetNotifications {")
    for method, entry in schema["notifications"].items():
        out.append(f"  {json.dumps(method)}: {_ts(entry['params'])};")
    out += ["}", ""]
    out += [
        "export type FleetMethod = keyof FleetRequests;",
        "export type FleetParams<M extends FleetMethod> = FleetRequests[M]['params'];",
        "export type FleetResult<M extends FleetMethod> = FleetRequests[M]['result'];",
        "export type FleetNotification = keyof FleetNotifications;",
        "",
        "export const FLEET_METHODS = [",
        *[f"  {json.dumps(m)}," for m in schema["requests"]],
        "] as const;",
        "",
        "/** `workspace/executeCommand` commands and the request each wraps. */",
        "export const FLEET_COMMANDS = {",
        *[f"  {json.dumps(c)}: {json.dumps(m)}," for c, m in schema["commands"].items()],
        "} as const satisfies Record<string, FleetMethod>;",
        "",
        "/** Fleet error kinds and their JSON-RPC codes (`other`: any kind not listed). */",
        "export const FLEET_ERROR_CODES = {",
        *[f"  {_key(k)}: {v}," for k, v in schema["errorCodes"].items()],
        "} as const;",
    ]
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------


def repo_root() -> Path:
    """The checkout this module sits in (the files are committed there), else the cwd."""
    here = Path(__file__).resolve().parents[1]
    return here if (here / "docs" / "schema").is_dir() else Path.cwd()


def outputs() -> dict[Path, str]:
    """Every generated file and its expected text."""
    text = schema_text()
    return {SCHEMA_PATH: text, TS_PATH: typescript(json.loads(text))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m fleet_lsp.schema",
        description="Regenerate docs/schema/protocol.schema.json and the VS Code types.",
    )
    parser.add_argument("--check", action="store_true", help="exit 1 when a file is stale")
    parser.add_argument("--root", type=Path, default=None, help="the checkout (default: this)")
    args = parser.parse_args(argv)
    root: Path = args.root or repo_root()
    stale = []
    for relative, text in outputs().items():
        path = root / relative
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current == text:
            continue
        stale.append(str(relative))
        if not args.check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    verb = "stale" if args.check else "written"
    for name in stale:
        print(f"{verb}: {name}", file=sys.stderr)
    if args.check and stale:
        print(f"regenerate with: {COMMAND}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
