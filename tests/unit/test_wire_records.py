"""The protocol's wire TypedDicts name exactly the fields the core records send (``.wire()``),
so the schema and the generated TypeScript types cannot silently miss one."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from fleet_core import models
from fleet_lsp import protocol


def _aliases(record: type[BaseModel]) -> set[str]:
    """The fields ``.wire()`` sends (an excluded field, like a failed Turn's traceback kept for
    its trace only, is not on the wire)."""
    return {f.alias or name for name, f in record.model_fields.items() if not f.exclude}


@pytest.mark.parametrize(
    ("record", "wire"),
    [
        (models.TurnResult, protocol.TurnResultWire),
        (models.TurnSummary, protocol.TurnSummaryWire),
        (models.Usage, protocol.UsageWire),
        (models.TurnError, protocol.TurnErrorWire),
    ],
)
def test_wire_type_names_every_field_of_its_record(record: type[BaseModel], wire: type) -> None:
    assert set(wire.__annotations__) == _aliases(record)


def test_a_missing_wire_field_is_caught() -> None:
    class Extended(models.TurnSummary):
        surprise: int = 0

    assert _aliases(Extended) - set(protocol.TurnSummaryWire.__annotations__) == {"surprise"}
