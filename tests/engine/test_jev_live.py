"""The real Jev API: opt in with FLEET_LIVE_TESTS=1 (or --live) and FLEET_JEV_API_KEY, like the
live Daytona test; skipped otherwise. One choice decision and the model list, through the same
client the engine uses; the key appears in no answer or error."""

from __future__ import annotations

import pytest

from fleet_core.config import load_config
from fleet_core.engine.jev import ChoiceQuestion, JevError, jev_client
from tests.conftest import live_secret


@pytest.mark.live
def test_live_jev_decides_and_lists_models(pytestconfig: pytest.Config) -> None:
    key = live_secret(pytestconfig, "FLEET_JEV_API_KEY", "Jev")
    client = jev_client(load_config())
    assert client is not None
    try:
        models = client.models(remaining_seconds=30)
        answers = client.decide(
            {"items": ["What is 2 + 2?"]},
            {
                "item-0": ChoiceQuestion(
                    "For the item at index 0 of `items`: is it arithmetic or poetry?",
                    {"arithmetic": None, "poetry": None},
                )
            },
            remaining_seconds=30,
        )
    except JevError as exc:
        raise AssertionError(exc.message.replace(key, "<key>")) from None
    assert models
    answer = answers.answers["item-0"]
    assert answer.choice == "arithmetic"
    assert set(answer.probabilities) <= {"arithmetic", "poetry"}
    assert key not in repr(answers) + repr(models)
