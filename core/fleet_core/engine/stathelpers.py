"""Statistics helpers defined for a code-first program before it runs (docs/engine.md).

A small model gets common tests subtly wrong (issue 22: a sample tested against itself, a
t-test's result unpacked as ``(p_value, significant)``, a "p-value" that is the correlation
again). These helpers return plain dicts of floats, so there is nothing to unpack wrongly.
The code-first host runs this file's source as a host cell in the sandbox (after its prelude),
so it imports nothing of fleet_core and only scipy, numpy and pandas, lazily. ``HELP`` is what
the prompt says about them.
"""

from __future__ import annotations

import math
from typing import Any

HELP = (
    "Helpers already defined (each returns a dict of floats; use them for these statistics): "
    "normality(x) -> {'statistic', 'p_value', 'normal', 'test'} (Shapiro-Wilk, normal when "
    "p >= 0.05); ttest(a, b, equal_var=True) -> {'statistic', 'p_value', 'significant'} (two "
    "independent samples; ttest(a, mu=m) tests one sample's mean); correlation(x, y, "
    "method='pearson'|'spearman') -> {'r', 'p_value', 'n'}; linear_fit(x, y) -> {'slope', "
    "'intercept', 'r_squared', 'p_value'}; regression_metrics(y_true, y_pred) -> "
    "{'r_squared', 'rmse', 'mae', 'mse'}. Each drops missing values."
)


class Result(dict):  # type: ignore[type-arg]
    """A helper's named results: ``result['p_value']``. Unpacking it (``r, p = ...``) would
    silently give its keys, so iterating over it raises and says how to read it."""

    def __iter__(self) -> Any:
        keys = ", ".join(repr(k) for k in self.keys())
        raise TypeError(
            f"this helper returns named results, not a tuple: read them as result['p_value'] "
            f"(its keys: {keys})"
        )


def _scipy_stats() -> Any:
    from scipy import stats  # type: ignore[import-untyped]  # imported on first use

    return stats


def _floats(values: Any) -> list[float]:
    out: list[float] = []
    for value in list(values):
        try:
            number = float(value)
        except (TypeError, ValueError):
            continue
        if not math.isnan(number):
            out.append(number)
    return out


def _pairs(x: Any, y: Any) -> tuple[list[float], list[float]]:
    xs, ys = list(x), list(y)
    if len(xs) != len(ys):
        raise ValueError(f"x and y differ in length ({len(xs)} and {len(ys)})")
    kept = [(a, b) for a, b in zip(_floats_or_nan(xs), _floats_or_nan(ys), strict=True)]
    kept = [(a, b) for a, b in kept if not (math.isnan(a) or math.isnan(b))]
    return [a for a, _ in kept], [b for _, b in kept]


def _floats_or_nan(values: list[Any]) -> list[float]:
    out: list[float] = []
    for value in values:
        try:
            out.append(float(value))
        except (TypeError, ValueError):
            out.append(math.nan)
    return out


def normality(x: Any, alpha: float = 0.05) -> Result:
    """Shapiro-Wilk (D'Agostino-Pearson above 5,000 values) on one sample."""
    stats = _scipy_stats()

    values = _floats(x)
    if len(values) < 3:
        raise ValueError(f"normality needs at least 3 values, got {len(values)}")
    if len(values) <= 5000:
        result, test = stats.shapiro(values), "shapiro"
    else:
        result, test = stats.normaltest(values), "dagostino"
    p_value = float(result.pvalue)
    return Result(
        {
            "statistic": float(result.statistic),
            "p_value": p_value,
            "normal": p_value >= alpha,
            "test": test,
        }
    )


def ttest(
    a: Any, b: Any = None, *, mu: float | None = None, equal_var: bool = True, alpha: float = 0.05
) -> Result:
    """Two independent samples (Student's, or Welch's with ``equal_var=False``), or one
    sample's mean against ``mu``; two-sided."""
    stats = _scipy_stats()

    first = _floats(a)
    if b is None:
        result = stats.ttest_1samp(first, 0.0 if mu is None else mu)
    else:
        result = stats.ttest_ind(first, _floats(b), equal_var=equal_var)
    p_value = float(result.pvalue)
    return Result(
        {
            "statistic": float(result.statistic),
            "p_value": p_value,
            "significant": p_value < alpha,
        }
    )


def correlation(x: Any, y: Any, method: str = "pearson") -> Result:
    """Pearson's (or Spearman's) r between two columns and the two-sided p-value."""
    stats = _scipy_stats()

    xs, ys = _pairs(x, y)
    if method == "spearman":
        result = stats.spearmanr(xs, ys)
    elif method == "pearson":
        result = stats.pearsonr(xs, ys)
    else:
        raise ValueError("method is 'pearson' or 'spearman'")
    return Result(r=float(result.statistic), p_value=float(result.pvalue), n=len(xs))


def linear_fit(x: Any, y: Any) -> Result:
    """The least-squares line y = slope * x + intercept, its R² and the slope's p-value."""
    stats = _scipy_stats()

    xs, ys = _pairs(x, y)
    result = stats.linregress(xs, ys)
    return Result(
        {
            "slope": float(result.slope),
            "intercept": float(result.intercept),
            "r_squared": float(result.rvalue) ** 2,
            "p_value": float(result.pvalue),
            "n": len(xs),
        }
    )


def regression_metrics(y_true: Any, y_pred: Any) -> Result:
    """R² (1 - SS_res/SS_tot), RMSE, MAE and MSE of predictions."""
    ys, ps = _pairs(y_true, y_pred)
    if not ys:
        raise ValueError("no pairs of values")
    mean = sum(ys) / len(ys)
    residual = sum((y - p) ** 2 for y, p in zip(ys, ps, strict=True))
    total = sum((y - mean) ** 2 for y in ys)
    mse = residual / len(ys)
    return Result(
        {
            "r_squared": 1 - residual / total if total else math.nan,
            "rmse": math.sqrt(mse),
            "mae": sum(abs(y - p) for y, p in zip(ys, ps, strict=True)) / len(ys),
            "mse": mse,
        }
    )
