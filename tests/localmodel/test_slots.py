"""The embedded server's KV state across restarts (slot save/restore beside the weights, keyed by
the system prompt and the runtime's version) and the per-Turn time split (the server's timings on
TurnResult.usage and in the CLI's line), on the stand-in server started by the real supervisor."""

from __future__ import annotations

import json
from pathlib import Path

from fleet_core.api import FleetRuntime
from fleet_core.config import load_config
from fleet_core.engine.lm import ConfiguredLmProvider
from fleet_core.localmodel.slots import SlotKeeper, metrics_delta, parse_metrics, response_timings
from fleet_core.localmodel.supervisor import LocalEndpoint, LocalModel, verify_server
from fleet_core.models import TurnRequest
from fleet_lsp.cli.support import time_line

SYSTEM = "You write one Python program."


def _keeper(endpoint: LocalEndpoint, *, fresh: bool, version: str = "1.0") -> SlotKeeper:
    server = (endpoint.port, endpoint.server_pid, endpoint.server_start)
    return SlotKeeper(
        base_url=endpoint.api_base.removesuffix("/v1"),
        api_key=endpoint.api_key,
        directory=Path(endpoint.slot_dir),
        model=endpoint.model_id,
        runtime=endpoint.runtime,
        version=version,
        n_ctx=8192,
        fresh=fresh,
        prove=lambda: verify_server(*server),
    )


def _lines(record: Path) -> list[str]:
    return record.read_text().splitlines()


def _slot_requests(record: Path) -> list[tuple[str, str]]:
    lines = [json.loads(line) for line in _lines(record)]
    return [
        (line["path"].rsplit("=", 1)[1], line["body"]["filename"])
        for line in lines
        if line["event"] == "request" and line["path"].startswith("/slots/")
    ]


def test_the_state_is_saved_once_and_restored_only_into_a_new_server_of_the_same_runtime(
    local_model: LocalModel, record: Path
) -> None:
    endpoint = local_model.ensure()
    assert endpoint.slot_dir == str(local_model.home / "slots")  # beside the weights
    first = _keeper(endpoint, fresh=True)
    first.before(SYSTEM)  # nothing saved yet: nothing restored
    first.after(SYSTEM)
    first.after(SYSTEM)  # saved once
    name = first.file_name(SYSTEM)
    assert (Path(endpoint.slot_dir) / name).is_file() and list(first.saved) == [name]
    assert _slot_requests(record) == [("save", name)]
    # a server this process started: its first call restores the state; later calls do not
    restarted = _keeper(endpoint, fresh=True)
    restarted.before(SYSTEM)
    restarted.before(SYSTEM)
    assert list(restarted.restored) == [name]
    # a server found running keeps its own cache; another runtime version has its own state
    _keeper(endpoint, fresh=False).before(SYSTEM)
    other = _keeper(endpoint, fresh=True, version="2.0")
    other.before(SYSTEM)
    assert other.file_name(SYSTEM) != name and not other.restored
    assert _keeper(endpoint, fresh=True).file_name("another prompt") != name
    assert _slot_requests(record) == [("save", name), ("restore", name)]


def test_a_slot_request_to_a_server_that_is_not_proven_sends_nothing(
    local_model: LocalModel, record: Path
) -> None:
    endpoint = local_model.ensure()
    keeper = _keeper(endpoint, fresh=True)

    def refuse() -> None:
        raise RuntimeError("not the server we started")

    keeper.prove = refuse
    keeper.after(SYSTEM)  # a lost reuse, never an error of the call
    assert not keeper.saved and keeper.metrics() == {}
    assert _slot_requests(record) == []


def test_timings_are_read_from_a_response_and_from_the_servers_counters() -> None:
    body = {"timings": {"prompt_n": 12, "cache_n": 1838, "prompt_ms": 1366.5,
                        "predicted_n": 64, "predicted_ms": 22633.0}}  # fmt: skip
    timings = response_timings(body)
    assert timings is not None and timings.prompt_ms == 1366.5
    assert timings.generation_ms == 22633.0 and timings.cached_tokens == 1838
    assert response_timings({"choices": []}) is None and response_timings(None) is None
    before = parse_metrics("llamacpp:prompt_seconds_total 1.5\nllamacpp:tokens_predicted_total 9\n")
    after = parse_metrics(
        "# HELP x\nllamacpp:prompt_seconds_total 4.0\nllamacpp:tokens_predicted_total 19\n"
    )
    delta = metrics_delta(before, after)
    assert delta is not None and delta.prompt_ms == 2500.0 and delta.generated_tokens == 10
    assert metrics_delta({}, after) is None


def test_the_cli_line_splits_a_turns_time() -> None:
    result = {
        "durationSeconds": 41.2,
        "usage": {"modelSeconds": 38.9, "promptSeconds": 30.1, "generationSeconds": 8.2,
                  "sandboxSeconds": 1.1},
    }  # fmt: skip
    assert time_line(result) == (
        "time: 41.2 s = model 38.9 s (prompt 30.1 s, generation 8.2 s) + sandbox 1.1 s + host 1.2 s"
    )
    hosted = {"durationSeconds": 3.0, "usage": {"modelSeconds": 2.0}}  # no server timings
    assert time_line(hosted) == "time: 3.0 s = model 2.0 s + sandbox 0.0 s + host 1.0 s"
    assert time_line({"usage": {}}) == ""
    # the embedded server started inside the Turn: its start is its own part, not the host's
    started = {
        "durationSeconds": 10.0,
        "usage": {"modelSeconds": 5.0, "sandboxSeconds": 0.5, "modelStartSeconds": 4.0},
    }
    assert time_line(started) == (
        "time: 10.0 s = model 5.0 s + model start 4.0 s + sandbox 0.5 s + host 0.5 s"
    )  # fmt: skip


async def test_a_turn_on_the_embedded_model_reports_its_time_split_and_saves_the_state(
    tmp_path: Path, local_model: LocalModel, record: Path
) -> None:
    environ = {"FLEET_STATE_DIR": str(tmp_path / "state"), "FLEET_MLFLOW_DESTINATION": "off"}
    runtime = await FleetRuntime.open(load_config(environ=environ, cwd=tmp_path),
                                      local_model=local_model)  # fmt: skip
    try:
        await runtime.new_session("t")
        result = await runtime.run_turn(
            TurnRequest(session_id="t", task="What is 6 * 7?", mode="flex")
        )
    finally:
        await runtime.close()
    chats = [
        entry
        for entry in map(json.loads, _lines(record))
        if entry["event"] == "request" and entry["path"] == "/v1/chat/completions"
    ]
    assert chats and result.usage.model_calls == len(chats)
    # every call "took" 400 ms of prompt and 250 ms of generation on the stand-in server
    assert result.usage.prompt_seconds == round(0.4 * len(chats), 3)
    assert result.usage.generation_seconds == round(0.25 * len(chats), 3)
    assert result.usage.model_seconds is not None and result.usage.model_seconds > 0
    assert result.duration_seconds is not None
    # getting the model (the stand-in server's start) is timed apart from the host's time
    start = result.usage.model_start_seconds
    assert start is not None and start > 0
    assert result.duration_seconds >= result.usage.model_seconds + start
    # the system prompt's state was saved beside the weights after the first call
    saves = [name for action, name in _slot_requests(record) if action == "save"]
    assert saves and (local_model.home / "slots" / saves[0]).is_file()
    wire = result.wire()["usage"]
    assert {"modelSeconds", "promptSeconds", "generationSeconds", "modelStartSeconds"} <= set(wire)


def test_the_provider_shares_one_keeper_per_server(tmp_path: Path, local_model: LocalModel) -> None:
    environ = {"FLEET_STATE_DIR": str(tmp_path / "state"), "FLEET_MLFLOW_DESTINATION": "off"}
    provider = ConfiguredLmProvider.from_config(
        load_config(environ=environ, cwd=tmp_path), embedded=local_model
    )
    root, sub = provider.lm("root"), provider.lm("sub")
    keeper = getattr(root, "fleet_slots", None)
    assert keeper is not None and getattr(sub, "fleet_slots", None) is keeper
    assert keeper.fresh  # this process started the server
    assert root.copy(temperature=0.5).fleet_slots is keeper  # copies share it


def test_at_most_max_files_states_are_kept_the_oldest_removed(
    local_model: LocalModel, record: Path
) -> None:
    from fleet_core.localmodel.slots import MAX_FILES

    endpoint = local_model.ensure()
    keeper = _keeper(endpoint, fresh=False)
    prompts = [f"system prompt {n}" for n in range(MAX_FILES + 2)]
    for prompt in prompts:
        keeper.after(prompt)
    kept = {path.name for path in Path(endpoint.slot_dir).glob("*.bin")}
    assert len(kept) == MAX_FILES
    assert keeper.file_name(prompts[-1]) in kept  # the newest stays
