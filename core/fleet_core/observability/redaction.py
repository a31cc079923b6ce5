"""Credential redaction and size bounds for everything that leaves the process.

Applied to spans, events, log lines, replays and error messages. It removes:

- ``Bearer <token>`` / ``Basic <token>`` authorization values;
- ``<key> = <value>`` / ``"<key>": "<value>"`` where the key names a credential (password, secret,
  token, api_key, apikey, credential, authorization, access_key, private_key), in the value's own
  quoting: a JSON answer stays valid JSON (``"passwd": "[redacted]"``);
- ``sk-...``-style provider keys (``sk-``, ``sk-proj-``, ``sk-ant-``, ``pk-``/``rk-`` live keys),
  Databricks ``dapi...`` tokens, GitHub ``ghp_``/``github_pat_`` tokens, AWS access key ids, and
  JWTs;
- passwords inside URLs (``scheme://user:password@host``);
- every *configured* secret value (``EffectiveConfig.secrets.values()``), wherever it appears,
  including inside file names and JSON keys;
- every secret made at run time and registered with :func:`register_secret` (the embedded
  model's per-start API key), by every ``Redactor``, also one made before it was registered.

Redaction is pattern based: it is a safety net, not a data-loss-prevention boundary (see
docs/observability.md). A ``Redactor`` is immutable and cheap to share between threads.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

REDACTED = "[redacted]"
MIN_SECRET_CHARS = 4
# "token" but not token counts (input_tokens, tokenUsage, max_tokens, tokenizer).
_CREDENTIAL_WORDS = (
    r"password|passwd|secret|token(?!s|_?usage|_?count|iz)|api[_-]?key|apikey|credential|"
    r"authorization|access[_-]?key|private[_-]?key|database_url"
)
_KEY_RE = re.compile(rf"({_CREDENTIAL_WORDS})", re.IGNORECASE)
_JSON_LITERALS = frozenset({"null", "true", "false"})


def _assignment(match: re.Match[str]) -> str:
    """A credential's value replaced in the value's own quoting, so the text keeps its format:
    ``"passwd": "x"`` stays a JSON string (``"passwd": "[redacted]"``), ``'x'`` a Python or YAML
    string, ``KEY=x`` an env/INI assignment. A bare value of a JSON member (a number) becomes a
    JSON string; empty strings and JSON's ``null``/``true``/``false`` carry no secret and stay."""
    key, value = match.group("key"), match.group("value")
    if value[0] in "\"'":
        return match.group(0) if len(value) == 2 else f"{key}{value[0]}{REDACTED}{value[0]}"
    if key.startswith('"') and key.rstrip().endswith(":"):  # a JSON member
        return match.group(0) if value in _JSON_LITERALS else f'{key}"{REDACTED}"'
    return key + REDACTED


_PATTERNS: tuple[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]], ...] = (
    # Authorization headers.
    (
        re.compile(r"\b(Bearer|Basic|Token)\s+[A-Za-z0-9._~+/=\-]{6,}", re.IGNORECASE),
        r"\1 " + REDACTED,
    ),
    # key=value, key: value, "key": "value" (value quoted or bare): see _assignment.
    (
        re.compile(
            # A key starts where a name starts and is at most 64 characters around the word:
            # unanchored, [\w.\-]* made every long word run cost quadratic time.
            rf"""(?<![\w.\-])(?P<key>["']?[\w.\-]{{0,64}}(?:{_CREDENTIAL_WORDS})"""
            rf"""[\w.\-]{{0,64}}["']?\s*[:=]\s*)"""
            r"""(?P<value>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|[^\s,;&}\]\)"']+)""",
            re.IGNORECASE,
        ),
        _assignment,
    ),
    # Passwords in URLs: scheme://user:password@host
    (
        re.compile(r"(?P<head>\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^/\s:@]*:)[^@\s/]+@"),
        r"\g<head>" + REDACTED + "@",
    ),
    # Provider key shapes.
    (re.compile(r"\b(?:sk|pk|rk)-(?:[A-Za-z]+-)?[A-Za-z0-9_\-]{16,}"), REDACTED),
    (re.compile(r"\bdapi[0-9a-f]{20,}\b"), REDACTED),
    (
        re.compile(r"\b(?:ghp|gho|ghs|ghu|ghr)_[A-Za-z0-9]{20,}\b|\bgithub_pat_[A-Za-z0-9_]{20,}"),
        REDACTED,
    ),
    (re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), REDACTED),
    (re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"), REDACTED),
)
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")

# Secrets made at run time rather than configured (register_secret); bounded: the oldest go.
_RUNTIME_MAX = 64
_RUNTIME_LOCK = threading.Lock()
_runtime_secrets: tuple[str, ...] = ()
_runtime_re: re.Pattern[str] | None = None


def register_secret(value: str) -> None:
    """Redact ``value`` from now on wherever this process redacts (every ``Redactor``, the log
    filter): a secret the process made or read at run time, not one from the configuration
    (the embedded model server's per-start API key, docs/local-model.md)."""
    global _runtime_secrets, _runtime_re
    if not value or len(value) < MIN_SECRET_CHARS:
        return
    with _RUNTIME_LOCK:
        if value in _runtime_secrets:
            return
        found = (*_runtime_secrets, value)[-_RUNTIME_MAX:]
        ordered = sorted(found, key=len, reverse=True)
        _runtime_re = re.compile("|".join(re.escape(v) for v in ordered))
        _runtime_secrets = found


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds applied while redacting a structure."""

    max_string: int = 20_000
    max_items: int = 50
    max_depth: int = 8
    max_nodes: int = 2_000


SPAN_LIMITS = Limits()
EVENT_LIMITS = Limits(max_string=20_000, max_items=100, max_depth=6, max_nodes=1_000)
PREVIEW_LIMITS = Limits(max_string=4_000, max_items=20, max_depth=4, max_nodes=80)


@dataclass(frozen=True)
class Redactor:
    """Redacts credentials and configured secret values; see the module docstring."""

    secrets: tuple[str, ...] = ()
    _secret_re: re.Pattern[str] | None = field(default=None, repr=False, compare=False)

    @classmethod
    def from_values(cls, values: Iterable[str]) -> Redactor:
        """A redactor for these secret values (values shorter than 4 characters are ignored)."""
        unique = sorted(
            {v for v in values if v and len(v) >= MIN_SECRET_CHARS}, key=len, reverse=True
        )
        pattern = re.compile("|".join(re.escape(v) for v in unique)) if unique else None
        return cls(tuple(unique), pattern)

    @classmethod
    def from_config(cls, config: Any, extra: Iterable[str] = ()) -> Redactor:
        """A redactor for every secret of an ``EffectiveConfig`` (plus ``extra`` values)."""
        return cls.from_values([*config.secrets.values(), *extra])

    def text(self, value: str, limit: int | None = 20_000) -> str:
        """Redact one string, strip control characters and cap its length."""
        if self._secret_re is not None:
            value = self._secret_re.sub(REDACTED, value)
        runtime = _runtime_re
        if runtime is not None:
            value = runtime.sub(REDACTED, value)
        for pattern, replacement in _PATTERNS:
            value = pattern.sub(replacement, value)
        value = _CONTROL_RE.sub("", value)
        if limit is not None and len(value) > limit:
            value = value[:limit] + f"... [truncated {len(value) - limit} chars]"
        return value

    def contains_secret(self, value: str | bytes) -> bool:
        """Whether a configured (or registered, :func:`register_secret`) secret value occurs in
        ``value``."""
        if isinstance(value, bytes):
            return any(s.encode() in value for s in (*self.secrets, *_runtime_secrets))
        runtime = _runtime_re
        return (self._secret_re is not None and self._secret_re.search(value) is not None) or (
            runtime is not None and runtime.search(value) is not None
        )

    def value(self, value: Any, limits: Limits = SPAN_LIMITS) -> Any:
        """Redact and bound any JSON-like structure (other objects become their ``repr``)."""
        budget = [limits.max_nodes]
        return self._walk(value, limits, 0, budget)

    def _walk(self, value: Any, limits: Limits, depth: int, budget: list[int]) -> Any:
        budget[0] -= 1
        if budget[0] < 0:
            return "[omitted: size limit]"
        if value is None or isinstance(value, bool | int | float):
            return value
        if isinstance(value, str):
            return self.text(value, limits.max_string)
        if isinstance(value, bytes | bytearray):
            return f"[{len(value)} bytes omitted]"
        if depth >= limits.max_depth:
            return "[omitted: depth limit]"
        if isinstance(value, Mapping):
            out: dict[str, Any] = {}
            for index, (key, item) in enumerate(value.items()):
                if index >= limits.max_items:
                    out["..."] = f"[{len(value) - limits.max_items} more keys]"
                    break
                name = self.text(str(key), 200)
                if _KEY_RE.search(name) and not isinstance(item, Mapping | list | tuple):
                    out[name] = REDACTED if item not in (None, "", False) else item
                else:
                    out[name] = self._walk(item, limits, depth + 1, budget)
            return out
        if isinstance(value, list | tuple | set | frozenset):
            items = list(value)
            walked = [self._walk(v, limits, depth + 1, budget) for v in items[: limits.max_items]]
            if len(items) > limits.max_items:
                walked.append(f"[{len(items) - limits.max_items} more items]")
            return walked
        if hasattr(value, "model_dump"):
            return self._walk(value.model_dump(mode="json"), limits, depth, budget)
        return self.text(repr(value), limits.max_string)

    def error(self, exc: BaseException, limit: int = 2_000) -> str:
        """A redacted one-line description of an exception."""
        return self.text(f"{type(exc).__name__}: {exc}", limit)


NO_SECRETS = Redactor.from_values(())


class RedactingFilter(logging.Filter):
    """A logging filter that redacts every record's message (install it on your handlers)."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self.redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a broken format string: keep what we have
            message = str(record.msg)
        record.msg = self.redactor.text(message)
        record.args = None
        if record.exc_info and record.exc_info[1] is not None:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
            record.exc_info = None
        # Also when an earlier filter (another handler's, another secret set) already turned the
        # exception into text: each filter in a chain redacts its own secrets from it.
        if record.exc_text:
            record.exc_text = self.redactor.text(record.exc_text)
        if record.stack_info:
            record.stack_info = self.redactor.text(record.stack_info)
        return True


def redact_event(event: Any, redactor: Redactor) -> Any:
    """A copy of a ``TurnEvent`` with its payload redacted and bounded (for streams and logs)."""
    return event.model_copy(update={"payload": redactor.value(event.payload, EVENT_LIMITS)})


_LOG_FILTER: RedactingFilter | None = None
_LOG_LOCK = threading.Lock()
FLEET_LOGGERS = ("fleet_core", "fleet_lsp")


def install_log_redaction(
    redactor: Redactor, *, prefixes: tuple[str, ...] = FLEET_LOGGERS
) -> RedactingFilter:
    """Redact log records of the fleet loggers (and whatever reaches the root handlers).

    One process-wide ``RedactingFilter`` whose secrets are the union of every redactor installed
    so far. Logging filters are not inherited, so it is attached to every existing logger under
    ``prefixes`` (call again after importing more modules; it is idempotent and cheap) and to the
    root logger's handlers, which see every propagated record.
    """
    global _LOG_FILTER
    with _LOG_LOCK:
        if _LOG_FILTER is None:
            _LOG_FILTER = RedactingFilter(redactor)
        elif not set(redactor.secrets) <= set(_LOG_FILTER.redactor.secrets):
            _LOG_FILTER.redactor = Redactor.from_values(
                [*_LOG_FILTER.redactor.secrets, *redactor.secrets]
            )
        active = _LOG_FILTER
    manager = logging.Logger.manager
    targets: list[logging.Filterer] = [logging.getLogger(p) for p in prefixes]
    for name, logger in list(manager.loggerDict.items()):
        if isinstance(logger, logging.Logger) and name.startswith(tuple(f"{p}." for p in prefixes)):
            targets.append(logger)
    targets += list(logging.getLogger().handlers)
    for target in targets:
        if active not in target.filters:
            target.addFilter(active)
    return active
