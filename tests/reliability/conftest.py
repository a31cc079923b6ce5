"""Reliability suites (issue 13): short variants run in CI; ``@pytest.mark.long`` variants run
only with ``FLEET_LONG_TESTS=1`` and record their figures in docs/reliability.md."""

from __future__ import annotations

import os

import pytest

LONG = os.environ.get("FLEET_LONG_TESTS") == "1"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if LONG:
        return
    skip = pytest.mark.skip(reason="long variant: set FLEET_LONG_TESTS=1")
    for item in items:
        if item.get_closest_marker("long") is not None:
            item.add_marker(skip)
