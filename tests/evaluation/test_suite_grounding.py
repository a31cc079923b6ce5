"""The trace suite and grounded SUBMIT: a SUBMIT refused as ungrounded is not a sandbox error."""

from __future__ import annotations

from fleet_core.evaluation.runner import suite_from_trace
from tests.evaluation.test_suite import cell, result, view


def test_rejected_submits_are_not_sandbox_errors_in_the_trace_suite() -> None:
    rejected = view(
        cell("total = sum(range(1000))"),
        cell("SUBMIT(answer='The total is 499500')", outcome="submit_rejected"),
        cell("SUBMIT(answer='The total is 499500')", outcome="submitted"),
    )
    failing = view(
        cell("total = sum(range(1000))"),
        cell("1 / 0", outcome="error"),
        cell("SUBMIT(answer='The total is 499500')", outcome="submitted"),
    )
    assert suite_from_trace(rejected, result())["trace_efficiency"] == 1.0
    assert suite_from_trace(failing, result())["trace_efficiency"] < 1.0
