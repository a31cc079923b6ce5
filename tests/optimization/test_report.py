"""The report's markdown keeps model-written component text inside its code block."""

from __future__ import annotations

from markdown_it import MarkdownIt

from fleet_core.optimization import candidates as cands
from fleet_core.optimization.gate import evaluate_gate
from fleet_core.optimization.program import ProgramState
from fleet_core.optimization.report import markdown

from .test_gate_and_approval import DEV, HOLD, observations


def _report(text: str) -> str:
    program = ProgramState(components={"triage": text})
    obs = observations()
    manifest = cands.Manifest(
        version=cands.new_version("s-1"),
        session_id="s-1",
        created_at=cands.now(),
        candidate_digest=program.digest(),
        identity=cands.Identity(
            incumbent_digest="i", configuration_digest="c", code_digest="d", dependencies={}
        ),
        dataset={},
        search={},
        changed_components=["triage"],
        evaluation=obs,
        gate=evaluate_gate(obs, changed=["triage"], dev_ids=DEV, holdout_ids=HOLD),
    )
    return markdown(manifest, program)


def test_backtick_runs_in_a_component_never_close_its_code_block() -> None:
    for fence in ("```", "````", "``````", "`````\n```"):
        text = f"Prefer rlm.\n{fence}\n# Injected heading\n[link](javascript:x)\n{fence}\nend"
        tokens = MarkdownIt("commonmark").parse(_report(text))
        headings = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]
        assert "Injected heading" not in headings, fence
        blocks = [t.content for t in tokens if t.type == "fence"]
        assert any("# Injected heading" in b and "Prefer rlm." in b for b in blocks), fence
        assert not any(t.type == "inline" and "javascript:" in t.content for t in tokens), fence
