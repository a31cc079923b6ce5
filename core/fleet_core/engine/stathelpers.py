"""Statistics helpers defined for a code-first program before it runs (docs/engine.md).

A small model gets common tests subtly wrong (issue 22: a sample tested against itself, a
t-test's result unpacked as ``(p_value, significant)``, a "p-value" that is the correlation
again). Each helper returns its main figures as a tuple in a documented order (``r, p_value =
correlation(x, y)``), each also named (``.p_value``, ``['p_value']``, scipy's ``.pvalue``):
the first measured run refused tuple unpacking, and the model did not recover from that.
The code-first host runs this file's source as a host cell in the sandbox (after its prelude),
so it imports nothing of fleet_core and only scipy, numpy and pandas, lazily. ``SIGNATURES`` is
what the prompt says about them (engine/statprompt.py picks the ones a task needs).
"""

from __future__ import annotations

import math
from typing import Any

SIGNATURES = {  # each helper as the prompt shows it
    "normality": "stat, p_value = normality(x) (Shapiro-Wilk; also .normal: p >= 0.05, .test)",
    "ttest": (
        "t, p_value = ttest(a, b, equal_var=True) (two independent samples; ttest(a, mu=m) "
        "tests one sample's mean; also .significant: p < 0.05)"
    ),
    "correlation": "r, p_value = correlation(x, y, method='pearson'|'spearman') (also .n)",
    "linear_fit": "slope, intercept, r_squared, p_value = linear_fit(x, y)",
    "regression_metrics": "r_squared, rmse, mae, mse = regression_metrics(y_true, y_pred)",
    "iqr_fences": (
        "q1, q3, iqr, low, high = iqr_fences(x, k=1.5) (quartiles by linear interpolation, as "
        "pandas' quantile; low = q1 - k*iqr, high = q3 + k*iqr; outlier rows: "
        "df[(df[c] < low) | (df[c] > high)])"
    ),
}
HELP_INTRO = (
    "Helpers already defined (do not import them; use them for these statistics; each result "
    "unpacks in the order shown and its parts are also named, c.p_value or c['p_value']): "
)
HELP = HELP_INTRO + "; ".join(SIGNATURES.values()) + ". Each drops missing values."


class Result(tuple):  # type: ignore[type-arg]
    """A helper's results: a tuple of its main figures in their documented order (``r, p =
    correlation(x, y)``), each also named (``result.p_value``, ``result['p_value']``, and
    scipy's ``.statistic`` / ``.pvalue``); ``extra`` holds named figures outside the tuple."""

    _names: tuple[str, ...]
    _extra: dict[str, Any]
    _label: str

    def __new__(  # the annotation is a string: the sandbox runs this source without __future__
        cls, named: dict[str, Any], *, extra: dict[str, Any] | None = None, label: str = ""
    ) -> "Result":  # noqa: UP037
        self = super().__new__(cls, tuple(named.values()))
        self._names = tuple(named)
        self._extra = dict(extra or {})
        self._label = label
        return self

    def _fields(self) -> dict[str, Any]:
        fields = dict(zip(self._names, tuple.__iter__(self), strict=True))
        return {**fields, **self._extra}

    def keys(self) -> list[str]:
        """Every name, so ``dict(result)`` holds all of them."""
        return list(self._fields())

    def get(self, key: str, default: Any = None) -> Any:
        return self._fields().get(_ALIASES.get(key, key), default)

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            fields = self._fields()
            name = _ALIASES.get(key, key)
            if name not in fields and key == "statistic" and self._names:
                name = self._names[0]
            if name not in fields:
                raise KeyError(f"{key!r}: this result holds {', '.join(map(repr, fields))}")
            return fields[name]
        return tuple.__getitem__(self, key)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self._fields().items())
        return f"{self._label}({inner})"


#: scipy's names for the same figures (``res.pvalue``) and other spellings a model writes.
_ALIASES = {"pvalue": "p_value", "p": "p_value", "rvalue": "r", "r2": "r_squared"}


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
        {"statistic": float(result.statistic), "p_value": p_value},
        extra={"normal": p_value >= alpha, "test": test},
        label="normality",
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
        {"statistic": float(result.statistic), "p_value": p_value},
        extra={"significant": p_value < alpha},
        label="ttest",
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
    return Result(
        {"r": float(result.statistic), "p_value": float(result.pvalue)},
        extra={"n": len(xs)},
        label="correlation",
    )


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
        },
        extra={"r": float(result.rvalue), "n": len(xs)},
        label="linear_fit",
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
        },
        label="regression_metrics",
    )


def iqr_fences(x: Any, k: float = 1.5) -> Result:
    """The first and third quartiles (linear interpolation between order statistics, pandas'
    and numpy's default), the IQR, and the fences ``k`` IQRs below and above them."""
    values = sorted(_floats(x))
    if len(values) < 2:
        raise ValueError(f"iqr_fences needs at least 2 values, got {len(values)}")

    def quantile(q: float) -> float:
        position = (len(values) - 1) * q
        low, high = math.floor(position), math.ceil(position)
        return values[low] + (values[high] - values[low]) * (position - low)

    q1, q3 = quantile(0.25), quantile(0.75)
    iqr = q3 - q1
    return Result(
        {"q1": q1, "q3": q3, "iqr": iqr, "low": q1 - k * iqr, "high": q3 + k * iqr},
        label="iqr_fences",
    )
