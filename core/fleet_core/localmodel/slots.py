"""The embedded server's KV state across restarts, and each call's time split.

**Slot save/restore.** Every Turn on the embedded model starts with the same system prompt, and
a new server would process it again (tens of seconds on 2 cores). llama.cpp's server can save its
slot's KV cache to a file (``POST /slots/0?action=save``, into ``--slot-save-path``) and restore
it (``action=restore``). :class:`SlotKeeper` does both, beside the weights (``<home>/slots``):

- after the first call with a system prompt whose state is not on disk, it saves the slot (the
  system prompt, the call's prompt and its reply) as ``<digest>.bin``; the digest covers the system
  prompt, the model, the runtime and its version and the context size, so a state is never
  restored into another runtime's or version's server;
- before the first call of a server this process started, when a state for that call's system
  prompt exists, it restores it: llama.cpp then reuses the longest common prefix (at least the
  system prompt) instead of processing it again.

A failed save or restore costs nothing but the reuse (the server's answer is logged, never
raised). At most :data:`MAX_FILES` states are kept (the oldest are removed).

**Timings.** llama.cpp's server reports each completion's ``timings`` (``prompt_ms``,
``predicted_ms``, ``prompt_n``, ``cache_n``, ``predicted_n``); :func:`response_timings` reads them
from a response, and :meth:`SlotKeeper.metrics` reads the server's cumulative counters
(``/metrics``) for a call whose response the caller does not see. Standard library only.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)
MAX_FILES = 4  # a state is 28 KB per token: 4 states of a full 8k context are under 1 GB
SUFFIX = ".bin"


@dataclass(frozen=True, slots=True)
class CallTimings:
    """One completion's time on the server, in milliseconds, and its tokens."""

    prompt_ms: float = 0.0  # prompt processing
    generation_ms: float = 0.0  # token generation
    prompt_tokens: int = 0  # processed (not reused from the cache)
    cached_tokens: int = 0  # reused from the KV cache
    generated_tokens: int = 0

    def __add__(self, other: CallTimings) -> CallTimings:
        return CallTimings(
            self.prompt_ms + other.prompt_ms,
            self.generation_ms + other.generation_ms,
            self.prompt_tokens + other.prompt_tokens,
            self.cached_tokens + other.cached_tokens,
            self.generated_tokens + other.generated_tokens,
        )


def response_timings(body: Any) -> CallTimings | None:
    """The ``timings`` of a llama.cpp completion (a response's JSON body), or ``None``."""
    timings = body.get("timings") if isinstance(body, dict) else None
    if not isinstance(timings, dict):
        return None

    def number(key: str) -> float:
        value = timings.get(key)
        return float(value) if isinstance(value, int | float) else 0.0

    return CallTimings(
        prompt_ms=number("prompt_ms"),
        generation_ms=number("predicted_ms"),
        prompt_tokens=int(number("prompt_n")),
        cached_tokens=int(number("cache_n")),
        generated_tokens=int(number("predicted_n")),
    )


_METRICS = {
    "llamacpp:prompt_seconds_total": "prompt",
    "llamacpp:tokens_predicted_seconds_total": "generation",
    "llamacpp:prompt_tokens_total": "prompt_tokens",
    "llamacpp:tokens_predicted_total": "generated_tokens",
}


def parse_metrics(text: str) -> dict[str, float]:
    found: dict[str, float] = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name in _METRICS:
            try:
                found[_METRICS[name]] = float(value.strip())
            except ValueError:
                continue
    return found


def metrics_delta(before: dict[str, float], after: dict[str, float]) -> CallTimings | None:
    """The time and tokens between two readings of ``/metrics`` (one call when nothing else used
    the server meanwhile), or ``None`` when either reading is missing."""
    if not before or not after:
        return None

    def delta(key: str) -> float:
        return max(0.0, after.get(key, 0.0) - before.get(key, 0.0))

    return CallTimings(
        prompt_ms=delta("prompt") * 1000,
        generation_ms=delta("generation") * 1000,
        prompt_tokens=int(delta("prompt_tokens")),
        generated_tokens=int(delta("generated_tokens")),
    )


def state_digest(system: str, *, model: str, runtime: str, version: str, n_ctx: int) -> str:
    identity = json.dumps([system, model, runtime, version, n_ctx], ensure_ascii=False)
    return hashlib.sha256(identity.encode()).hexdigest()[:32]


@dataclass
class SlotKeeper:
    """Saves and restores the slot's KV state of one server (see the module docstring)."""

    base_url: str  # http://127.0.0.1:PORT (no /v1)
    api_key: str = field(repr=False)
    directory: Path  # the server's --slot-save-path
    model: str
    runtime: str
    version: str
    n_ctx: int
    fresh: bool  # the server was started by this process: nothing of it is cached yet
    prove: Callable[[], None] = lambda: None  # the identity check before every request
    restored: dict[str, float] = field(default_factory=dict)  # digest -> restore ms
    saved: dict[str, float] = field(default_factory=dict)  # digest -> save ms
    _first: bool = True
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __deepcopy__(self, memo: dict[int, Any]) -> SlotKeeper:
        return self  # one keeper per server, shared by every copy of its LMs

    def __getstate__(self) -> dict[str, Any]:
        state = {name: getattr(self, name) for name in self.__dataclass_fields__}
        state.pop("_lock")
        state.pop("prove")
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        # a copy made by pickling cannot prove the server: it sends nothing (see _unproven)
        self.__dict__.update(state, _lock=threading.Lock(), prove=_unproven)

    def file_name(self, system: str) -> str:
        digest = state_digest(
            system, model=self.model, runtime=self.runtime, version=self.version, n_ctx=self.n_ctx
        )
        return digest + SUFFIX

    def before(self, system: str) -> None:
        """Before a call: on this server's first call, restore the state for ``system``."""
        with self._lock:
            first, self._first = self._first, False
            if not (first and self.fresh and system):
                return
            name = self.file_name(system)
            if not (self.directory / name).is_file():
                return
            answer = self._slot("restore", name)
            if answer is not None:
                self.restored[name] = _elapsed_ms(answer)
                (self.directory / name).touch()  # the most recently used is kept longest

    def after(self, system: str) -> None:
        """After a successful call: save the state for ``system`` unless it is on disk."""
        if not system:
            return
        with self._lock:
            name = self.file_name(system)
            if name in self.saved or (self.directory / name).is_file():
                return
            answer = self._slot("save", name)
            if answer is not None:
                self.saved[name] = _elapsed_ms(answer)
                self._prune()

    def metrics(self) -> dict[str, float]:
        """The server's cumulative time and token counters ({} when unavailable)."""
        try:
            self.prove()
            request = urllib.request.Request(  # noqa: S310 - loopback, proven
                f"{self.base_url}/metrics", headers={"Authorization": f"Bearer {self.api_key}"}
            )
            with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
                return parse_metrics(response.read(200_000).decode("utf-8", "replace"))
        except Exception:
            return {}

    def _slot(self, action: str, name: str) -> dict[str, Any] | None:
        started = time.perf_counter()
        try:
            self.prove()
            request = urllib.request.Request(  # noqa: S310 - loopback, proven
                f"{self.base_url}/slots/0?action={action}",
                data=json.dumps({"filename": name}).encode(),
                headers={
                    "Authorization": f"Bearer {self.api_key}",
                    "Content-Type": "application/json",
                },
                method="POST",
            )
            with urllib.request.urlopen(request, timeout=120) as response:  # noqa: S310
                body = json.loads(response.read(100_000) or b"{}")
        except Exception as exc:
            log.info("embedded model: slot %s of %s failed: %s", action, name, exc)
            return None
        body = body if isinstance(body, dict) else {}
        body.setdefault("_elapsed_ms", (time.perf_counter() - started) * 1000)
        return body

    def _prune(self) -> None:
        states = sorted(
            self.directory.glob(f"*{SUFFIX}"), key=lambda path: path.stat().st_mtime, reverse=True
        )
        for stale in states[MAX_FILES:]:
            stale.unlink(missing_ok=True)


def _unproven() -> None:
    raise RuntimeError("this slot keeper was copied by pickling and cannot prove its server")


def _elapsed_ms(answer: dict[str, Any]) -> float:
    timings = answer.get("timings")
    for key in ("restore_ms", "save_ms"):
        if isinstance(timings, dict) and isinstance(timings.get(key), int | float):
            return float(timings[key])
    return float(answer.get("_elapsed_ms", 0.0))
