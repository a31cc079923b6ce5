"""Models that follow the server's current configuration.

``TurnService`` takes its ``LmProvider`` once, when the first Turn runs. The language server can
change ``[llm]`` at run time (``workspace/didChangeConfiguration`` swaps ``runtime.config``), so
it gives the runtime a :class:`FollowingLmProvider`: every Turn asks it for models, and it
rebuilds its ``ConfiguredLmProvider`` whenever the current ``[llm]`` settings or model keys
differ from the ones it was built from. A running Turn keeps the models it started with.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fleet_core.config import EffectiveConfig
    from fleet_core.engine.lm import ConfiguredLmProvider, Role


def _fingerprint(config: EffectiveConfig) -> str:
    secrets = config.secrets
    keys = [
        secrets.lm_api_key,
        *(secrets.role_api_keys.get(r) for r in sorted(secrets.role_api_keys)),
    ]
    material = config.settings.llm.model_dump_json() + "".join(
        "\0" + (k.get_secret_value() if k is not None else "") for k in keys
    )
    return hashlib.sha256(material.encode()).hexdigest()


class FollowingLmProvider:
    """An ``LmProvider`` over ``config_of()``, rebuilt when the model settings change."""

    def __init__(self, config_of: Callable[[], EffectiveConfig]) -> None:
        self._config_of = config_of
        self._lock = threading.Lock()
        self._fingerprint: str | None = None
        self._provider: ConfiguredLmProvider | None = None

    def current(self) -> ConfiguredLmProvider:
        from fleet_core.engine.lm import ConfiguredLmProvider

        config = self._config_of()
        fingerprint = _fingerprint(config)
        with self._lock:
            if self._provider is None or fingerprint != self._fingerprint:
                self._provider = ConfiguredLmProvider.from_config(config)
                self._fingerprint = fingerprint
            return self._provider

    def check(self, *roles: Role) -> None:
        self.current().check(*roles)

    def lm(self, role: Role) -> Any:
        return self.current().lm(role)
