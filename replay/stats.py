"""Statistics of a counterfactual over seeds: rates with intervals, means with spreads,
effects against the baseline with intervals. Plain Python: a handful of numbers each."""

from __future__ import annotations

import math
from dataclasses import dataclass

Z95 = 1.959964
# two-sided 95% quantiles of Student's t, by degrees of freedom (1..30); beyond: normal
_T95 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


def t95(df: float) -> float:
    """The 95% two-sided quantile of t with ``df`` degrees of freedom (rounded down)."""
    k = int(math.floor(df))
    if k < 1:
        return math.inf
    return _T95[k - 1] if k <= len(_T95) else Z95


def wilson(k: int, n: int) -> tuple[float, float]:
    """95% Wilson score interval of a rate of ``k`` in ``n`` (honest at n = 5 and at 0/n
    or n/n, where the normal interval collapses to a point)."""
    if n == 0:
        return (0.0, 1.0)
    p, z2 = k / n, Z95 * Z95
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = Z95 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


@dataclass
class Spread:
    n: int
    mean: float | None
    sd: float | None  # sample standard deviation (n - 1); None below 2 values


def spread(values: list[float | None]) -> Spread:
    v = [x for x in values if x is not None and math.isfinite(x)]
    if not v:
        return Spread(0, None, None)
    mean = sum(v) / len(v)
    if len(v) < 2:
        return Spread(len(v), mean, None)
    sd = math.sqrt(sum((x - mean) ** 2 for x in v) / (len(v) - 1))
    return Spread(len(v), mean, sd)


def mean_difference(a: Spread, b: Spread) -> tuple[float, float, float] | None:
    """``a.mean - b.mean`` with its 95% Welch interval (None: fewer than 2 values on a
    side)."""
    if a.mean is None or b.mean is None or a.sd is None or b.sd is None:
        return None
    va, vb = a.sd**2 / a.n, b.sd**2 / b.n
    diff = a.mean - b.mean
    se = math.sqrt(va + vb)
    if se == 0:
        return (diff, diff, diff)
    df = (va + vb) ** 2 / (va**2 / (a.n - 1) + vb**2 / (b.n - 1))
    h = t95(df) * se
    return (diff, diff - h, diff + h)


def rate_difference(k1: int, n1: int, k2: int, n2: int) -> tuple[float, float, float]:
    """``k1/n1 - k2/n2`` with Newcombe's 95% interval (from the two Wilson intervals)."""
    p1, p2 = k1 / n1, k2 / n2
    l1, u1 = wilson(k1, n1)
    l2, u2 = wilson(k2, n2)
    d = p1 - p2
    lo = d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)
    hi = d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
    return (d, max(-1.0, lo), min(1.0, hi))
