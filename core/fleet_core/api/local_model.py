"""The embedded offline model's control for the faces (``fleet-lsp model``, doctor, demo): no
store or runtime needed. Blocking (seconds to minutes when a server starts or weights are
assembled), so call from a thread where an event loop runs."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from fleet_core.config import EffectiveConfig

if TYPE_CHECKING:
    from fleet_core.localmodel.supervisor import LocalEndpoint, LocalModel, LocalModelStatus


def status(config: EffectiveConfig) -> LocalModelStatus:
    """The embedded model: installed, assembled, running (where, RSS, users); starts
    nothing."""
    from fleet_core.localmodel.supervisor import LocalModel

    return LocalModel.from_config(config).status()


def serve(
    config: EffectiveConfig,
    *,
    progress: Callable[[int, int], None] | None = None,
    on_start: Callable[[str], None] | None = None,
) -> LocalEndpoint:
    """Start the embedded server (or find it running) and pin it: it keeps running after
    this process exits, until :func:`stop`. Blocking (seconds to minutes: the
    weights are assembled first, with ``progress``)."""
    from fleet_core.localmodel.supervisor import LocalModel

    model = LocalModel.from_config(config)
    endpoint = model.ensure(pin=True, progress=progress, on_start=on_start)
    model.release()
    return endpoint


def prepare(config: EffectiveConfig, *, progress: Callable[[int, int], None] | None = None) -> bool:
    """Assemble the embedded model's weights when a Turn would use it (no endpoint for the
    root role) and they are not yet; ``True`` when the embedded model will be used. For a
    face that shows the progress itself (``fleet-lsp demo``)."""
    from fleet_core.localmodel.weights import assemble

    model = root_embedded_model(config)
    if model is None:
        return False
    assemble(model.weights, model.home, progress=progress)
    return True


@contextmanager
def hold(
    config: EffectiveConfig,
    *,
    progress: Callable[[int, int], None] | None = None,
    on_start: Callable[[str], None] | None = None,
) -> Iterator[LocalEndpoint | None]:
    """For a face that runs Turns in another process (``fleet-lsp demo``): when the root role
    uses the embedded model, start it (or reuse a running one) and keep it running while the
    block runs; on leaving, this process lets go and the server stops unless another process
    uses it or it is pinned (a kill -9 of this process is reaped by the guard). Yields
    ``None`` and starts nothing when an endpoint is configured. Blocking on entry."""
    model = root_embedded_model(config)
    if model is None:
        yield None
        return
    try:
        yield model.ensure(progress=progress, on_start=on_start)
    finally:
        model.release()


def stop(config: EffectiveConfig) -> bool:
    """Stop the embedded server whoever started it; ``False`` when none was running."""
    from fleet_core.localmodel.supervisor import LocalModel

    return LocalModel.from_config(config).stop()


def root_embedded_model(config: EffectiveConfig) -> LocalModel | None:
    """The embedded model when the root role would use it (no endpoint configured), else None."""
    from fleet_core.engine.lm import ConfiguredLmProvider
    from fleet_core.localmodel.supervisor import LocalModel

    model = LocalModel.from_config(config)
    if not ConfiguredLmProvider.from_config(config, embedded=model).uses_embedded("root"):
        return None
    return model
