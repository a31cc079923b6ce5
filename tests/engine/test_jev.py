"""Optional TypeSafe Jev through a local fake of its API: triage, Skill preloading, the sandbox's
``jev_decide_batched`` (code really runs in the LocalSandbox), the fallback to the sub LM when
Jev fails (HTTP 500, timeout), budgets charged by category, and the key kept out of everything."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleet_core.engine.scripted_lm import action, fields, route, scripted_lm, submit
from tests.engine.support import payloads, run_turn
from tests.fake_jev import KEY, fake_jev

TASK = "What is 6*7?"


def _jev_env(fake, **more: str) -> dict[str, str]:
    return {"FLEET_JEV_API_KEY": KEY, "FLEET_JEV_BASE_URL": fake.url, **more}


def _assert_no_key(result, events) -> None:
    text = json.dumps([e.payload for e in events]) + result.model_dump_json()
    assert KEY not in text


async def test_jev_decides_triage_and_charges_routing(open_runtime, lms) -> None:
    with fake_jev(route="direct") as fake:
        runtime = await open_runtime(**_jev_env(fake))
        await runtime.new_session("s")
        # the root model has no triage reply: only Jev can have chosen the direct route
        lms.root = scripted_lm([fields(reasoning="Arithmetic.", answer="42")])
        result, events = await run_turn(runtime, "s", TASK)
    assert result.status == "completed", result.error
    assert result.route == "direct" and result.answer == "42"
    evidence = payloads(events, "triage_decision")[0].evidence
    assert evidence.backend == "jev" and evidence.model == "jev-fake-1"
    assert evidence.probabilities["direct"] == 0.9 and evidence.confidence == 0.9
    assert result.usage.calls_by_category == {"routing": 1, "generation": 1}
    assert result.usage.jev_decisions_by_category == {"routing": 1}
    [call] = fake.systemone_calls()
    assert call["state"]["items"] == ["What is 6*7?"]
    assert set(call["questions"]["item-0"]["criteria"]) == {"direct", "flex", "rlm"}
    assert fake.requests[0]["headers"]["authorization"] == f"Bearer {KEY}"
    [decision] = payloads(events, "jev_decision")
    assert decision.category == "routing" and decision.backend == "jev" and decision.ok
    _assert_no_key(result, events)


def _user_skill(root: Path, name: str, description: str) -> None:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: {description}\n---\nInstructions of {name}: step one.\n"
    )


async def test_preloading_classifies_20_skills_in_one_call_and_appends_3(
    open_runtime, lms, tmp_path: Path
) -> None:
    skills = tmp_path / ".fleet" / "skills"
    for i in range(22):  # + 3 bundled = 25 in the catalog: only the first 20 are classified
        relevant = "jev-relevant " if i in (1, 4, 6, 9, 21) else ""
        _user_skill(skills, f"aa-skill-{i:02d}", f"{relevant}does thing {i}")
    with fake_jev(route="rlm") as fake:
        runtime = await open_runtime(**_jev_env(fake))
        await runtime.new_session("s")
        lms.root = scripted_lm([action("x = 6 * 7\nprint(x)"), submit("str(x)")])
        result, events = await run_turn(runtime, "s", TASK)
    assert result.status == "completed", result.error
    assert result.route == "rlm" and result.answer == "42"
    calls = fake.systemone_calls()
    assert len(calls) == 2  # triage, then ONE batch for the Skills
    batch = calls[1]
    assert len(batch["state"]["items"]) == 20 and len(batch["questions"]) == 20
    assert batch["state"]["task"] == "What is 6*7?"
    [selection] = payloads(events, "skill_selection")
    assert len(selection.decisions) == 20
    relevant = [d.skill for d in selection.decisions if d.decision == "relevant"]
    assert relevant == ["aa-skill-01", "aa-skill-04", "aa-skill-06", "aa-skill-09"]
    assert selection.selected == ["aa-skill-01", "aa-skill-04", "aa-skill-06"]
    prompt = lms.root.engine_script.requests[0]
    assert prompt.count("<preloaded_skill name=") == 3
    assert "Instructions of aa-skill-04: step one." in prompt
    assert "Instructions of aa-skill-09" not in prompt  # the 4th relevant one is not appended
    assert result.usage.calls_by_category["skill_selection"] == 20
    assert result.usage.calls_by_category["routing"] == 1
    assert result.usage.jev_decisions_by_category == {"routing": 1, "skill_selection": 20}
    _assert_no_key(result, events)


async def test_without_a_key_there_is_no_preloading_and_no_jev(engine_runtime, lms) -> None:
    await engine_runtime.new_session("s")
    lms.root = scripted_lm([route("rlm"), submit("'ok'")])
    result, events = await run_turn(engine_runtime, "s", TASK)
    assert result.status == "completed" and result.answer == "ok"
    assert payloads(events, "triage_decision")[0].evidence.backend == "generative"
    assert not payloads(events, "skill_selection") and not payloads(events, "jev_decision")
    assert "<preloaded_skill" not in lms.root.engine_script.requests[1]
    assert result.usage.jev_decisions_by_category == {}


DECIDE = (
    "r = jev_decide_batched(['apple', 'banana', 'egg'], 'Does it start with a vowel?', "
    "['yes', 'no'])\nprint(r)"
)
SUBMIT_DECISIONS = submit("repr([(d['decision'], d['backend'], sorted(d)) for d in r])")
SHAPE = ["backend", "confidence", "decision", "item", "model", "probabilities", "raw_choice"]


def _sub_decides() -> object:
    """The sub LM as the fallback decider: 'yes' for a vowel, by the item in its prompt."""

    def reply(text: str) -> str:
        item = text.rsplit("[[ ## item ## ]]", 1)[1].split("[[ ##", 1)[0].strip()
        return fields(decision="yes" if item[:1] in "aeiou" else "no")

    return scripted_lm(rules={"Does it start with a vowel?": reply})


async def test_sandbox_jev_decide_batched_uses_jev(open_runtime, lms) -> None:
    with fake_jev() as fake:
        runtime = await open_runtime(**_jev_env(fake))
        await runtime.new_session("s", mode="rlm")
        lms.root = scripted_lm([action(DECIDE), SUBMIT_DECISIONS])
        result, events = await run_turn(runtime, "s", TASK)
    assert result.status == "completed", result.error
    expected = [("yes", "jev", SHAPE), ("no", "jev", SHAPE), ("yes", "jev", SHAPE)]
    assert result.answer == repr(expected)
    preloading, decide = fake.systemone_calls()  # the Skills' batch, then the sandbox's
    assert len(decide["state"]["items"]) == 3  # three items, one call
    assert len(preloading["state"]["items"]) == 3  # the three bundled Skills
    assert result.usage.calls_by_category["other_decisions"] == 3
    assert result.usage.jev_decisions_by_category == {"skill_selection": 3, "other_decisions": 3}
    _assert_no_key(result, events)


@pytest.mark.parametrize("failure", ["500", "slow"])
async def test_jev_failure_falls_back_to_the_sub_lm_with_the_same_shape(
    open_runtime, lms, failure: str
) -> None:
    with fake_jev(mode=failure, slow_seconds=2.0) as fake:
        runtime = await open_runtime(**_jev_env(fake, FLEET_JEV__TIMEOUT_SECONDS="0.5"))
        await runtime.new_session("s")  # hybrid: triage falls back too
        lms.sub = _sub_decides()
        lms.sub.engine_script._rules.append(("least expensive route", route("rlm")))
        lms.root = scripted_lm([action(DECIDE), SUBMIT_DECISIONS])
        result, events = await run_turn(runtime, "s", TASK)
    assert result.status == "completed", result.error
    expected = [("yes", "generative", SHAPE), ("no", "generative", SHAPE)]
    assert result.answer == repr([expected[0], expected[1], expected[0]])
    triage = payloads(events, "triage_decision")[0].evidence
    assert triage.backend == "generative" and result.route == "rlm"
    reason = "did not answer within 0.5 seconds" if failure == "slow" else "answered HTTP 500"
    assert reason in triage.jev_error
    decisions = payloads(events, "jev_decision")
    failed = [d for d in decisions if d.backend == "jev"]
    assert failed and all(not d.ok and reason in d.error for d in failed)
    [fallback] = [d for d in decisions if d.category == "other_decisions" and d.ok]
    assert fallback.backend == "generative" and reason in fallback.fallback_from
    # a failed Jev call gives its units back: one unit per decision, whoever made it
    assert result.usage.calls_by_category["other_decisions"] == 3
    assert result.usage.calls_by_category["routing"] == 1
    assert result.usage.jev_decisions_by_category == {}
    assert not payloads(events, "skill_selection")  # preloading fell back to the plain catalog
    _assert_no_key(result, events)


async def test_jev_decide_batched_refuses_bad_arguments(engine_runtime, lms) -> None:
    await engine_runtime.new_session("s", mode="rlm")
    code = (
        "try:\n    jev_decide_batched(['a'], 'q?', ['x', 'x'])\n"
        "except Exception as e:\n    err = str(e)\nprint(err)"
    )
    lms.root = scripted_lm([action(code), submit("err")])
    result, _ = await run_turn(engine_runtime, "s", TASK)
    assert result.status == "completed" and "choices must be unique" in result.answer
    assert "other_decisions" not in result.usage.calls_by_category
