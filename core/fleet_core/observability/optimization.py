"""An optimization run in MLflow: the gate's metrics, the report, the plot, scores per pass."""

from __future__ import annotations

from typing import Any


def record_optimization_run(
    backend: Any, manifest: Any, report: str, plot_svg: str, series: dict[str, list[float]]
) -> str:
    """One run ``fleet-gepa-<version>`` in the evaluation experiment; returns its id."""
    run_id: str = backend.start_run(
        "evaluation",
        f"fleet-gepa-{manifest.version}",
        tags={"fleet.version": manifest.version, "fleet.session": manifest.session_id},
    )
    backend.log_run(
        run_id,
        params={
            "validation_passes": 3,
            "search_budget": manifest.search.get("budget"),
            "search_metric_calls": manifest.search.get("metric_calls"),
            "candidate_digest": manifest.candidate_digest,
            "incumbent_digest": manifest.identity.incumbent_digest,
        },
        metrics={"gate_passed": 1.0 if manifest.gate.passed else 0.0},
        texts={
            "report.md": report,
            "scores.svg": plot_svg,
            "manifest.json": manifest.model_dump_json(indent=1),
        },
    )
    backend.log_metric_steps(run_id, series)
    backend.end_run(run_id)
    return run_id
