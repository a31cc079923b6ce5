"""The promotion gate, recomputed from stored observations (never a saved verdict).

A candidate passes only when every check holds:

1. ``passes``: exactly three passes for baseline and candidate, each covering every dev and
   holdout example; every score and quality value finite and in [0, 1].
2. ``usage``: usage was measured in every rollout (``usage_available == 1``).
3. ``holdout_errors``: no candidate holdout rollout failed.
4. ``critical``: the candidate has critical holdout cases in every pass and each passes (all
   quality checks) in every pass; a dataset without critical holdout cases never passes.
5. ``dev_improved``: the candidate's mean dev score is strictly above the baseline's.
6. ``holdout_no_regression``: mean holdout score not below the baseline's.
7. ``quality_no_regression``: mean quality not below the baseline's on dev and on holdout.
8. ``changed``: at least one instruction or the Flex code changed.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from fleet_core.optimization.validation import PASSES, Observation

GATE_POLICY = 1


class GateCheck(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    passed: bool
    detail: str


class GateVerdict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    policy: int = GATE_POLICY
    passed: bool
    checks: list[GateCheck]

    def failures(self) -> list[GateCheck]:
        return [c for c in self.checks if not c.passed]


def _mean(values: Sequence[float]) -> float:
    return statistics.fmean(values) if values else float("nan")


def _none(name: str, found: Sequence[Observation], what: str, fine: str) -> GateCheck:
    """A check that passes when no observation was ``found``."""
    return GateCheck(name=name, passed=not found, detail=f"{len(found)} {what}" if found else fine)


def evaluate_gate(
    observations: Sequence[Observation],
    *,
    changed: Sequence[str],
    dev_ids: Sequence[str],
    holdout_ids: Sequence[str],
) -> GateVerdict:
    checks: list[GateCheck] = []
    obs = list(observations)

    def pick(stage: str, split: str | None = None) -> list[Observation]:
        return [o for o in obs if o.stage == stage and (split is None or o.split == split)]

    expected = {("dev", i) for i in dev_ids} | {("holdout", i) for i in holdout_ids}
    problems: list[str] = []
    for stage in ("baseline", "candidate"):
        passes = sorted({o.pass_index for o in pick(stage)})
        if passes != list(range(PASSES)):
            problems.append(f"{stage} has passes {passes}, not {PASSES}")
            continue
        for index in passes:
            seen = [(o.split, o.example_id) for o in pick(stage) if o.pass_index == index]
            if sorted(seen) != sorted(expected):
                problems.append(f"{stage} pass {index + 1} does not cover dev + holdout once")
    bad = [
        o for o in obs if not all(math.isfinite(v) and 0 <= v <= 1 for v in (o.score, o.quality))
    ]
    if bad:
        problems.append(f"{len(bad)} score(s) or quality value(s) are not finite values in [0, 1]")
    checks.append(
        GateCheck(
            name="passes",
            passed=not problems and bool(expected),
            detail="; ".join(problems)
            or f"{PASSES} passes each, every score and quality in [0, 1]",
        )
    )
    unmeasured = [o for o in obs if o.usage_available != 1.0]
    checks.append(
        _none(
            "usage",
            unmeasured,
            "rollout(s) without measured usage",
            "usage measured in every rollout",
        )
    )
    errors = [o for o in pick("candidate", "holdout") if o.error]
    checks.append(
        _none(
            "holdout_errors",
            errors,
            "candidate holdout rollout(s) failed",
            "no candidate holdout errors",
        )
    )
    critical = [o for o in pick("candidate", "holdout") if o.critical]
    per_pass = {o.pass_index for o in critical}
    failing = [o for o in critical if o.error or o.quality != 1.0]
    if not critical:
        detail, ok = (
            "no critical holdout cases: the dataset cannot produce an approvable one",
            False,
        )
    elif per_pass != set(range(PASSES)):
        detail, ok = "critical holdout cases are missing from some passes", False
    elif failing:
        ids = sorted({o.example_id for o in failing})
        detail, ok = f"critical case(s) failed in some pass: {', '.join(ids)}", False
    else:
        n = len({o.example_id for o in critical})
        detail, ok = f"{n} critical holdout case(s) passed in every pass", True
    checks.append(GateCheck(name="critical", passed=ok, detail=detail))
    means = {
        (stage, split): _mean([o.score for o in pick(stage, split)])
        for stage in ("baseline", "candidate")
        for split in ("dev", "holdout")
    }
    b_dev, c_dev = means[("baseline", "dev")], means[("candidate", "dev")]
    checks.append(
        GateCheck(
            name="dev_improved",
            passed=c_dev > b_dev,
            detail=f"mean dev {c_dev:.4f} vs baseline {b_dev:.4f}",
        )
    )
    b_hold, c_hold = means[("baseline", "holdout")], means[("candidate", "holdout")]
    checks.append(
        GateCheck(
            name="holdout_no_regression",
            passed=c_hold >= b_hold,
            detail=f"mean holdout {c_hold:.4f} vs baseline {b_hold:.4f}",
        )
    )
    quality_ok, parts = True, []
    for split in ("dev", "holdout"):
        b = _mean([o.quality for o in pick("baseline", split)])
        c = _mean([o.quality for o in pick("candidate", split)])
        quality_ok = quality_ok and c >= b
        parts.append(f"{split} quality {c:.3f} vs {b:.3f}")
    checks.append(
        GateCheck(name="quality_no_regression", passed=quality_ok, detail="; ".join(parts))
    )
    checks.append(
        GateCheck(
            name="changed",
            passed=bool(changed),
            detail=f"changed: {', '.join(sorted(changed))}" if changed else "nothing changed",
        )
    )
    return GateVerdict(passed=all(c.passed for c in checks), checks=checks)
