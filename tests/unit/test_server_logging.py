"""What the server logs and says of bad params (issue 19): a `$/cancelRequest` for an id it no
longer knows (its answer won the race) is DEBUG, not one WARNING line per cancel under a flood;
a list past its bound says the bound."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest

from fleet_lsp.server import configure_logging


@pytest.fixture
def server_log() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    saved = (root.handlers[:], root.level, logging.getLogger("pygls").level)
    stream = io.StringIO()
    configure_logging(logging.WARNING)
    root.handlers[-1].setStream(stream)  # type: ignore[attr-defined]
    yield stream
    root.handlers[:], root.level = saved[0], saved[1]
    logging.getLogger("pygls").setLevel(saved[2])


def test_unknown_cancels_are_not_warnings(server_log: io.StringIO) -> None:
    pygls = logging.getLogger("pygls.protocol.json_rpc")
    for number in range(200):
        pygls.warning('Cancel notification for unknown message id "%s"', number)
    pygls.warning("something else went wrong")
    lines = server_log.getvalue().splitlines()
    assert len(lines) == 1 and "something else went wrong" in lines[0]


def test_a_list_past_its_bound_says_the_bound() -> None:
    from fleet_lsp.protocol import ParamsError, TraceLabelParams, parse

    with pytest.raises(ParamsError, match="'values' has 101 items; at most 100 are allowed"):
        parse(TraceLabelParams, {"traceId": "tr-1", "values": [str(n) for n in range(101)]})
    with pytest.raises(ParamsError, match="'values' must be a list or an object, got a string"):
        parse(TraceLabelParams, {"traceId": "tr-1", "values": "x"})
