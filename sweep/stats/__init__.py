"""Confidence intervals of repeated measurements (stdlib only: a leaf every layer may use).

A cell measured N times (``workload.repeats``) is reported as its mean with a
95% Student-t interval, ``mean +- t(0.975, N-1) * s / sqrt(N)``: with the two to
five repeats a GPU budget allows, the normal quantile (1.96) would claim
intervals half as wide as they are (t = 4.30 at N = 3). The benchmark
(``sweep/bench``) and the tie rule (``sweep/score/noise.py``) both read it here.
"""

from __future__ import annotations

import math
import statistics
from typing import Sequence

# t(0.975, df) for df = 1..30 (standard tables); above 30 a Cornish-Fisher expansion.
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
         2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
         2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)
Z975 = 1.959964


def t975(df: int) -> float:
    """The two-sided 95% quantile of Student's t with ``df`` degrees of freedom."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    if df <= len(_T975):
        return _T975[df - 1]
    z = Z975
    return z + (z ** 3 + z) / (4 * df) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * df ** 2)


def interval(values: Sequence[float]) -> tuple[float, float] | None:
    """95% t-interval of the mean of ``values``; None for fewer than two."""
    xs = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    if len(xs) < 2:
        return None
    mean = statistics.fmean(xs)
    half = t975(len(xs) - 1) * statistics.stdev(xs) / math.sqrt(len(xs))
    return (mean - half, mean + half)


def standard_error(ci: Sequence[float] | None, n: int | None) -> float | None:
    """The standard error behind a 95% t-interval of ``n`` repeats (inverse of :func:`interval`)."""
    if ci is None or n is None or n < 2 or len(ci) != 2 or ci[0] is None or ci[1] is None:
        return None
    return (float(ci[1]) - float(ci[0])) / (2.0 * t975(n - 1))
