"""Blocking work off the event loop: every API call that touches the disk, the store or a
service runs its blocking part through :func:`in_thread`."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

import anyio.to_thread

T = TypeVar("T")


async def in_thread(func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``func(*args, **kwargs)`` in a worker thread."""
    return await anyio.to_thread.run_sync(partial(func, *args, **kwargs))
