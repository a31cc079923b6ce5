"""At run time Fleet reaches only the endpoints the user configured (standard library only).

Three libraries reach for the network by themselves, on first use, unless told not to:

- LiteLLM downloads its model cost map when it is imported (MLflow imports it to price LM spans,
  and so does ``mlflow ui``): several seconds of retries on a machine without a network.
- DSPy 3.4's model metadata (``dspy.clients.model_metadata``, read to estimate each model call's
  cost) fetches the same map on first use and, offline, logs "Model metadata refresh failed
  (URLError); using bundled snapshot." on every process's first Turn. It honours the same
  ``LITELLM_LOCAL_MODEL_COST_MAP`` setting.
- MLflow sends usage telemetry and fetches its telemetry configuration.

:func:`apply_offline_defaults` sets the libraries' own switches, as defaults a user's environment
may override, before any of them is imported: ``fleet_core/__init__.py`` calls it, so every
process that imports Fleet (the server, the CLI, tests) has them; :func:`offline_environ` is the
environment for child processes that import them without Fleet (``python -m mlflow ui``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, MutableMapping

#: The libraries' settings that keep them off the network (``setdefault``: a user's value wins).
OFFLINE_DEFAULTS: dict[str, str] = {
    # LiteLLM and DSPy's model metadata: the bundled cost map / snapshot, never a download.
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    # MLflow: no usage telemetry, no telemetry configuration fetch.
    "MLFLOW_DISABLE_TELEMETRY": "true",
}

#: DSPy's logger for model metadata; a failed refresh is not the user's concern.
DSPY_METADATA_LOGGER = "dspy.clients.model_metadata"


class DemoteToDebug(logging.Filter):
    """Turn a logger's warnings into debug records: shown only when debug logging is on."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno > logging.DEBUG and record.levelno < logging.ERROR:
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)
        return True


def apply_offline_defaults(environ: MutableMapping[str, str] | None = None) -> None:
    """Set :data:`OFFLINE_DEFAULTS` where unset, and demote DSPy's metadata-refresh warning.

    Idempotent and cheap (no library is imported). With the defaults DSPy never tries the
    refresh; a user who opts back in (``LITELLM_LOCAL_MODEL_COST_MAP=False``) sees a failed
    refresh only at debug level.
    """
    _set_defaults(os.environ if environ is None else environ)
    logger = logging.getLogger(DSPY_METADATA_LOGGER)
    if not any(isinstance(f, DemoteToDebug) for f in logger.filters):
        logger.addFilter(DemoteToDebug())


def offline_environ(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """A copy of ``base`` (default: this process's environment) with :data:`OFFLINE_DEFAULTS`
    where unset: the environment for a child process that imports the libraries itself
    (``python -m mlflow ui``, which imports LiteLLM)."""
    environ = dict(os.environ if base is None else base)
    _set_defaults(environ)
    return environ


def _set_defaults(environ: MutableMapping[str, str]) -> None:
    for name, value in OFFLINE_DEFAULTS.items():
        environ.setdefault(name, value)
