"""The small-model profile: which profile a configuration resolves to, which route a Turn takes
(no triage call with a selected dataset), and what the triage sees (engine/profile.py,
small.py); docs/engine.md#the-small-model-profile."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fleet_core.config import EngineSettings
from fleet_core.engine.profile import compact_manifest, resolve_profile
from fleet_core.engine.scripted_lm import action, fields, route, scripted_lm
from fleet_core.models import TurnRequest
from tests.engine.support import EXPECTED, PROGRAM, TASK, artifact_rows, fenced, quick_session

# --- profile resolution -----------------------------------------------------------------------


def test_auto_profile_is_small_only_on_the_embedded_model() -> None:
    auto = EngineSettings()
    assert resolve_profile(auto, embedded_root=True).small
    assert resolve_profile(auto, embedded_root=True).constrained  # llama.cpp: grammar on
    assert not resolve_profile(auto, embedded_root=False).small
    chosen = resolve_profile(EngineSettings(profile="small"), embedded_root=False)
    assert chosen.small and not chosen.constrained  # any endpoint: no llama.cpp-only knobs
    assert chosen.max_tokens == 300
    assert not resolve_profile(auto, embedded_root=True).grammar  # measured: no gain, slower
    grammar = EngineSettings(small_grammar=True)
    assert resolve_profile(grammar, embedded_root=True).grammar
    assert not resolve_profile(grammar, embedded_root=False).grammar
    assert not resolve_profile(EngineSettings(profile="default"), embedded_root=True).small


def test_profile_setting_from_the_environment(tmp_path: Path) -> None:
    from fleet_core.config import load_config

    config = load_config(environ={"FLEET_ENGINE_PROFILE": "small"}, cwd=tmp_path)
    assert config.settings.engine.profile == "small"
    assert config.sources["engine.profile"] == "env"


# --- cheap routing ----------------------------------------------------------------------------


async def test_small_profile_with_a_dataset_skips_triage(open_runtime, lms, tmp_path) -> None:
    runtime = await open_runtime(FLEET_ENGINE_PROFILE="small")
    await quick_session(runtime, tmp_path)
    lms.root = scripted_lm([fenced(PROGRAM)])
    events: list[Any] = []
    result = await runtime.run_turn(TurnRequest(session_id="s", task=TASK), on_event=events.append)
    assert result.status == "completed", result.error
    assert result.route == "flex"
    assert result.usage.calls_by_category == {"generation": 1}  # no routing call
    decision = next(e for e in events if e.kind == "triage_decision").data
    assert decision.override_reason == "selected_context"
    assert await artifact_rows(runtime) == EXPECTED
    assert "150.5" in result.answer and "250.5" in result.answer


async def test_default_profile_with_a_dataset_still_triages(open_runtime, lms, tmp_path) -> None:
    runtime = await open_runtime()
    await quick_session(runtime, tmp_path)
    lms.root = scripted_lm([route("rlm"), action(PROGRAM), action("SUBMIT(answer='x')")])
    result = await runtime.run_turn(TurnRequest(session_id="s", task=TASK))
    assert result.usage.calls_by_category.get("routing") == 1


async def test_small_triage_sees_names_and_sizes_only(open_runtime, lms, tmp_path) -> None:
    runtime = await open_runtime(FLEET_ENGINE_PROFILE="small")
    await quick_session(runtime, tmp_path, select=False)
    lms.root = scripted_lm([route("direct"), fields(reasoning="r", answer="hello")])
    result = await runtime.run_turn(TurnRequest(session_id="s", task="Say hello."))
    assert result.status == "completed", result.error
    triage = lms.root.engine_script.requests[0]
    assert "files/sales.csv (" in triage and "bytes)" in triage
    assert "sha256" not in triage and "north,100" not in triage  # no digests, no previews
    assert "SKILL.md" not in triage  # Skills: the catalog's names only
    assert len(triage) < 3_000


def test_compact_manifest_keeps_the_datasets_first_lines_only() -> None:
    manifest = (
        "files/sales.csv  (60 bytes, sha256 "
        + "a" * 64
        + ")\n"
        + "\n".join(f"    row{i}" for i in range(20))
        + "\nskills/csv/SKILL.md  (900 bytes, sha256 "
        + "b" * 64
        + ")\n    # CSV skill\n"
        + "files/other.txt  (5 bytes, sha256 "
        + "c" * 64
        + ")\n    hello"
    )
    text = compact_manifest(manifest, dataset_path="files/sales.csv")
    assert text.splitlines() == [
        "files/sales.csv (60 bytes)",
        *[f"    row{i}" for i in range(6)],
        "files/other.txt (5 bytes)",
    ]
