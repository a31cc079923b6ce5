"""A process that uses the embedded model (the supervisor's tests run it as a second process or
as an owner to kill): ``python -m tests.localmodel.owner '<json>'`` with ``home``, ``weights``
(a WeightsSpec's fields) and ``then``: ``release`` (exit cleanly after release), ``exit`` (exit
without release) or ``sleep`` (wait to be killed). Prints the endpoint as one JSON line."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from fleet_core.config import LocalModelSettings
from fleet_core.localmodel.supervisor import LocalModel
from fleet_core.localmodel.weights import WeightsSpec

FAKE_MODULE = "tests.localmodel.fake_llama_server"


def main() -> int:
    spec = json.loads(sys.argv[1])
    weights = WeightsSpec(
        **{**spec["weights"], "part_modules": tuple(spec["weights"]["part_modules"])}
    )
    settings = LocalModelSettings(server_module=FAKE_MODULE, start_timeout_seconds=30)
    model = LocalModel(settings, Path(spec["home"]), weights=weights, poll_seconds=0.2)
    endpoint = model.ensure(pin=spec.get("pin", False))
    seen = {"apiBase": endpoint.api_base, "guardPid": endpoint.guard_pid}
    seen |= {"serverPid": endpoint.server_pid, "reused": endpoint.reused}
    print(json.dumps(seen), flush=True)
    if spec["then"] == "release":
        model.release()
    elif spec["then"] == "sleep":
        time.sleep(600)
    return 0


if __name__ == "__main__":
    sys.exit(main())
