"""The prelude's log helper (engine/loghelpers.py): an access log's and a logfmt line's named
fields, None for a line of neither kind, and no name of it clashing with the statistics
helpers' (both sources run in one namespace in the sandbox)."""

from __future__ import annotations

import ast
from pathlib import Path

from fleet_core.engine import loghelpers, stathelpers
from fleet_core.engine.loghelpers import log_fields, log_kind

COMBINED = (
    '10.0.3.7 - frank [04/Mar/2025:08:00:12 +0000] "GET /api/v1/cart?page=2 HTTP/1.1" 503 - '
    '"https://shop.example/" "curl/8.5.0" rt=2.010 upstream="10.1.0.2:80"'
)


def test_an_access_log_line_has_its_named_fields() -> None:
    assert log_fields(COMBINED) == {
        "ip": "10.0.3.7",
        "user": "frank",
        "time": "04/Mar/2025:08:00:12 +0000",
        "method": "GET",
        "path": "/api/v1/cart",
        "query": "page=2",
        "protocol": "HTTP/1.1",
        "status": 503,
        "size": 0,
        "referrer": "https://shop.example/",
        "agent": "curl/8.5.0",
        "rt": 2.01,
        "upstream": "10.1.0.2:80",
    }
    common = '127.0.0.1 - - [10/Oct/2000:13:55:36 -0700] "GET /a.gif HTTP/1.0" 200 2326\n'
    fields = log_fields(common)
    assert fields is not None and fields["status"] == 200 and "agent" not in fields
    assert log_kind(common).startswith("a web server access log")


def test_a_logfmt_line_has_its_pairs_and_other_lines_none() -> None:
    line = 'ts=2025-01-01T00:00:00Z level=error msg="disk full" took=12'
    assert log_fields(line) == {
        "ts": "2025-01-01T00:00:00Z",
        "level": "error",
        "msg": "disk full",
        "took": 12,
    }
    assert log_kind(line) == "key=value pairs (logfmt)"
    for other in ("2025-01-01 08:00:12 ERROR disk full", "", "only=one pair", "a,b,c"):
        assert log_fields(other) is None and log_kind(other) == ""


def _top_level_names(module: object) -> set[str]:
    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))  # type: ignore[attr-defined]
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def test_the_log_and_statistics_helpers_define_no_name_twice() -> None:
    """Seen while building it: a second ``_pairs`` replaced the statistics helpers' own."""
    assert not _top_level_names(loghelpers) & _top_level_names(stathelpers)
