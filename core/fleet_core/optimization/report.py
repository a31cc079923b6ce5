"""The optimization report: markdown and an SVG plot of scores per validation pass.

The markdown escapes text that came from models or users (component texts are shown in fenced
blocks with any fence in them broken; feedback is not shown).
"""

from __future__ import annotations

import html
import statistics
from collections.abc import Sequence

from fleet_core.optimization.candidates import Manifest
from fleet_core.optimization.program import ProgramState
from fleet_core.optimization.validation import PASSES, Observation

MAX_COMPONENT_SHOWN = 4_000


def _mean(values: Sequence[float]) -> float:
    return statistics.fmean(values) if values else float("nan")


def pass_means(obs: Sequence[Observation]) -> dict[tuple[str, str], list[float]]:
    out: dict[tuple[str, str], list[float]] = {}
    for stage in ("baseline", "candidate"):
        for split in ("dev", "holdout"):
            out[(stage, split)] = [
                _mean(
                    [
                        o.score
                        for o in obs
                        if o.stage == stage and o.split == split and o.pass_index == i
                    ]
                )
                for i in range(PASSES)
            ]
    return out


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _fence(text: str) -> str:
    return text[:MAX_COMPONENT_SHOWN].replace("```", "`\u200b``")


def markdown(manifest: Manifest, program: ProgramState) -> str:
    obs = manifest.evaluation
    lines = [
        f"# Optimization {manifest.version}",
        "",
        f"Session `{manifest.session_id}`, created {manifest.created_at}. "
        f"Gate: **{'PASSED' if manifest.gate.passed else 'FAILED'}**.",
        "",
        f"- Candidate digest: `{manifest.candidate_digest}`",
        f"- Incumbent digest: `{manifest.identity.incumbent_digest}`",
        f"- Configuration digest: `{manifest.identity.configuration_digest}`",
        f"- Code digest: `{manifest.identity.code_digest}`",
        f"- Dataset: {manifest.dataset.get('sizes')} (lineage "
        f"`{str(manifest.dataset.get('digest', ''))[:16]}`, seed {manifest.dataset.get('seed')})",
        f"- Search: {manifest.search.get('metric_calls')} rollouts of a budget of "
        f"{manifest.search.get('budget')}",
        "",
        "## Baseline vs candidate",
        "",
        "| split | baseline | candidate | delta |",
        "|---|---|---|---|",
    ]
    for split in ("dev", "holdout"):
        b = _mean([o.score for o in obs if o.stage == "baseline" and o.split == split])
        c = _mean([o.score for o in obs if o.stage == "candidate" and o.split == split])
        lines.append(f"| {split} | {b:.4f} | {c:.4f} | {c - b:+.4f} |")
    lines += ["", "## Holdout examples", "", "| example | critical | baseline | candidate |"]
    lines.append("|---|---|---|---|")
    for example_id in sorted({o.example_id for o in obs if o.split == "holdout"}):
        rows = [o for o in obs if o.split == "holdout" and o.example_id == example_id]

        def scores(stage: str, rows: list[Observation] = rows) -> str:
            return ", ".join(f"{o.score:.2f}" for o in rows if o.stage == stage)

        critical = "yes" if rows and rows[0].critical else "no"
        lines.append(
            f"| {_cell(example_id)} | {critical} | {scores('baseline')} | {scores('candidate')} |"
        )
    lines += ["", "## Gate", ""]
    for check in manifest.gate.checks:
        lines.append(
            f"- {'PASS' if check.passed else 'FAIL'} `{check.name}`: {_cell(check.detail)}"
        )
    lines += ["", "## Changed components", ""]
    if not manifest.changed_components:
        lines.append("None.")
    for name in manifest.changed_components:
        lines += [
            f"### `{name}`",
            "",
            "```text",
            _fence(program.components.get(name, "")),
            "```",
            "",
        ]
    if manifest.gate.passed:
        lines += [
            "",
            f"Approve with `fleet-lsp optimize --session {manifest.session_id} "
            f"--approve {manifest.version}`.",
        ]
    lines += [
        "",
        "Passing the gate is not proof of general improvement beyond the evaluated workload.",
        "",
    ]
    return "\n".join(lines)


def svg_plot(obs: Sequence[Observation], width: int = 480, height: int = 240) -> str:
    """Mean score per validation pass for each stage and split (a small line chart)."""
    series = pass_means(obs)
    colors = {
        ("baseline", "dev"): "#888888",
        ("baseline", "holdout"): "#bbbbbb",
        ("candidate", "dev"): "#1f77b4",
        ("candidate", "holdout"): "#2ca02c",
    }
    left, top, plot_w, plot_h = 50, 20, width - 170, height - 60
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="sans-serif" font-size="11">',
        f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" '
        'stroke="#333"/>',
    ]
    for tick in (0.0, 0.5, 1.0):
        y = top + plot_h * (1 - tick)
        parts.append(f'<text x="{left - 30}" y="{y + 4:.1f}">{tick:.1f}</text>')
    for i in range(PASSES):
        x = left + plot_w * (i / max(1, PASSES - 1))
        parts.append(f'<text x="{x - 14:.1f}" y="{top + plot_h + 16}">pass {i + 1}</text>')
    for n, (key, values) in enumerate(series.items()):
        points = [
            (left + plot_w * (i / max(1, PASSES - 1)), top + plot_h * (1 - v))
            for i, v in enumerate(values)
            if v == v
        ]
        if points:
            path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
            parts.append(
                f'<polyline points="{path}" fill="none" stroke="{colors[key]}" stroke-width="2"/>'
            )
        label = html.escape(f"{key[0]} {key[1]}")
        ly = top + 14 * n + 10
        parts.append(
            f'<line x1="{left + plot_w + 10}" y1="{ly}" x2="{left + plot_w + 30}" y2="{ly}" '
            f'stroke="{colors[key]}" stroke-width="2"/>'
        )
        parts.append(f'<text x="{left + plot_w + 34}" y="{ly + 4}">{label}</text>')
    parts.append("</svg>")
    return "\n".join(parts)
