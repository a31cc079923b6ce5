"""A log-line helper defined for a code-first program before it runs (docs/engine.md).

A small model picks the wrong field of a split log line: in every tune run of ``log_status``
the status code was read from ``line.split('"')[3]`` (the referrer) or a field that differs on
every line (``rt=...``). ``log_fields(line)`` names the fields of the two line formats logs most
often come in: a web server's access log (the common and combined log formats, with any
``key=value`` pairs appended) and ``key=value`` lines (logfmt). The first prompt shows what it
returns for the input's first line (engine/textinputs.py), so the model reads ``f['status']``
instead of counting fields. The code-first host runs this file's source as a host cell in the
sandbox (after its prelude), so it imports only ``re``.
"""

from __future__ import annotations

import re
from typing import Any

LOG_HELPER = "log_fields"

_LOG_ACCESS = re.compile(
    r'^(?P<ip>\S+) (?P<ident>\S+) (?P<user>\S+) \[(?P<time>[^\]]+)\] "(?P<request>[^"]*)" '
    r"(?P<status>\d{3}) (?P<size>\d+|-)"
    r'(?: "(?P<referrer>[^"]*)" "(?P<agent>[^"]*)")?(?P<rest>.*)$'
)
_LOG_PAIR = re.compile(r'(?<![^\s])(?P<key>[A-Za-z_][\w.-]*)=(?P<value>"[^"]*"|\S*)')
_LOGFMT_MIN_PAIRS = 2  # a line of fewer key=value pairs is not taken for logfmt


def _log_value(text: str) -> Any:
    """A pair's value: unquoted, and a number where it reads as one."""
    if len(text) >= 2 and text[0] == text[-1] == '"':
        return text[1:-1]
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _log_pairs(text: str) -> dict[str, Any]:
    return {m.group("key"): _log_value(m.group("value")) for m in _LOG_PAIR.finditer(text)}


def _log_access(match: re.Match[str]) -> dict[str, Any]:
    request = match.group("request").split()
    target = request[1] if len(request) >= 2 else ""
    path, _, query = target.partition("?")
    size = match.group("size")
    fields: dict[str, Any] = {
        "ip": match.group("ip"),
        "user": match.group("user"),
        "time": match.group("time"),
        "method": request[0] if request else "",
        "path": path,
        "query": query,
        "protocol": request[2] if len(request) >= 3 else "",
        "status": int(match.group("status")),
        "size": 0 if size == "-" else int(size),
    }
    if match.group("agent") is not None:
        fields["referrer"] = match.group("referrer")
        fields["agent"] = match.group("agent")
    extra = _log_pairs(match.group("rest"))
    fields.update({k: v for k, v in extra.items() if k not in fields})
    return fields


def log_fields(line: str) -> dict[str, Any] | None:
    """The named fields of one log line: an access log's (ip, user, time, method, path, query,
    protocol, status, size, referrer, agent, and any key=value pairs after them) or a logfmt
    line's key=value pairs; None for a line of neither kind (a blank or malformed line)."""
    text = line.strip()
    match = _LOG_ACCESS.match(text)
    if match is not None:
        return _log_access(match)
    pairs = _log_pairs(text)
    return pairs if len(pairs) >= _LOGFMT_MIN_PAIRS else None


def log_kind(line: str) -> str:
    """What kind of log line ``log_fields`` recognized (for the prompt), or ""."""
    if _LOG_ACCESS.match(line.strip()):
        return "a web server access log (the common or combined log format)"
    return "key=value pairs (logfmt)" if log_fields(line) else ""
