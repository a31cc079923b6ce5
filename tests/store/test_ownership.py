"""Session ownership (store/ownership.py): one process owns a Session at a time, through
FleetRuntime, on both databases. Connection loss and takeover: tests/reliability/test_db_faults.py.
"""

from __future__ import annotations

import pytest

from fleet_core.api import FleetRuntime
from fleet_core.config import EffectiveConfig
from fleet_core.errors import SessionOwned


async def test_two_runtimes_cannot_own_the_same_session(fleet_config: EffectiveConfig) -> None:
    first = await FleetRuntime.open(fleet_config)
    second = await FleetRuntime.open(fleet_config)
    try:
        await first.new_session("owned")
        with pytest.raises(SessionOwned, match="owned by another fleet-lsp process"):
            await second.load_session("owned")
        with pytest.raises(SessionOwned):
            await second.write_file("owned", "files/x.txt", b"x")
        await first.close_session("owned")
        assert (await second.load_session("owned")).session_id == "owned"
        with pytest.raises(SessionOwned):
            await first.set_mode("owned", "rlm")
    finally:
        await first.close()
        await second.close()
