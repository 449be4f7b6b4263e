"""Noise-aware winners: the objective's interval, and which configs tie with the best.

One rule, used by the Optuna sweeper's final report / best.yaml and by
``python -m sweep.report`` (``sweep.report.compare``, every format): two configs are **tied within noise** when the 95%
intervals of their objectives overlap. A config measured once has no interval
(a point): it ties only with an equal value, and the caller says that the
noise is unknown (``workload.repeats=N`` measures it). Overlapping 95%
intervals is the conservative reading -- two means can differ at 95% while
their intervals still touch -- so "tied" means "not shown to differ", never
"shown equal". That is the point: a 1% lead over a config whose interval
overlaps is not a winner.

The objective's interval comes from its cells' (``<metric>_ci``, a t-interval
over the repeats, ``sweep/bench/repeats.py``): for a weighted mean the cells'
standard errors combine as sqrt(sum (w_i se_i)^2) / sum w_i; a one-cell
objective (``cell``, ``tok_s_lowc``, ``tok_s_peak``, ``goodput``) takes that cell's interval;
``max_load`` the range of loads its repeats disagreed on (``max_load.value_ci``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Generic, Sequence, TypeVar

from sweep.compose.settings import Objective
from sweep.record.result import Cell, TrialResult
from sweep.score.metrics import headline_cell, ok_cells
from sweep.stats import standard_error, t975

K = TypeVar("K")


def _cell_ci(cell: Cell | None) -> tuple[float, float] | None:
    ci = cell.output_tok_s_ci if cell is not None else None
    return (float(ci[0]), float(ci[1])) if ci and len(ci) == 2 and None not in ci else None


def objective_interval(result: TrialResult, objective: Objective,
                       value: float | None) -> tuple[float, float] | None:
    """The 95% interval around the trial's objective ``value`` (``objective.objective_value``);
    None when it was measured once or has no value."""
    ok = ok_cells(result.cells)
    if value is None or not ok:
        return None
    metric = objective.measure  # tok_s_c1, the old name, reads as tok_s_lowc
    if metric == "tok_s_lowc":
        return _cell_ci(headline_cell(result.cells))
    if metric == "tok_s_peak":
        return _cell_ci(max(ok, key=lambda c: c.output_tok_s or 0.0))
    if metric == "goodput":
        ci = max(ok, key=lambda c: c.goodput_tok_s or 0.0).goodput_tok_s_ci
        return (float(ci[0]), float(ci[1])) if ci and len(ci) == 2 and None not in ci else None
    if metric == "max_load":  # the range of loads the repeats disagreed on (sweep/bench/maxload.py)
        ml = result.max_load
        ci = ml.value_ci if ml is not None else None
        return (float(ci[0]), float(ci[1])) if ci and len(ci) == 2 and None not in ci else None
    if metric == "cell":
        return _cell_ci(next((c for c in ok if c.context == objective.context
                              and c.concurrency == objective.concurrency), None))
    var = wsum = 0.0
    for c in ok:
        w = float(objective.weights.get(f"ctx{c.context}_c{c.concurrency}", 1.0))
        se = standard_error(c.output_tok_s_ci, c.repeats)
        if se is None:
            return None  # a cell measured once: the objective's noise is unknown
        var += (w * se) ** 2
        wsum += w
    if not wsum:
        return None
    dof = min(int(c.repeats or 2) for c in ok) - 1
    half = t975(max(1, dof)) * math.sqrt(var) / wsum
    return (value - half, value + half)


@dataclass(frozen=True)
class Candidate(Generic[K]):
    """One config's objective: ``key`` is the caller's handle (a trial number, a path)."""

    key: K
    value: float
    ci: tuple[float, float] | None = None

    @property
    def low(self) -> float:
        return self.ci[0] if self.ci else self.value

    @property
    def high(self) -> float:
        return self.ci[1] if self.ci else self.value


@dataclass(frozen=True)
class Ties(Generic[K]):
    best: Candidate[K]
    tied: list[Candidate[K]] = field(default_factory=list)  # runners-up, best first
    noise_known: bool = True  # False: the best was measured once (no interval)

    def line(self, name: Any = str, unit: str = "") -> str:
        """``tied within noise with 3, 9`` / ``clear winner`` / the unknown-noise note."""
        if not self.noise_known:
            return "measured once: noise unknown (workload.repeats=3 gives intervals)"
        if not self.tied:
            return "clear winner: no other config's 95% interval overlaps it"
        return "tied within noise with " + ", ".join(
            f"{name(c.key)} ({c.value:,.1f}{unit})" for c in self.tied)


def tied_within_noise(candidates: Sequence[Candidate[K]], direction: str = "maximize") -> Ties[K] | None:
    """The best candidate and the runners-up whose 95% intervals overlap its own (None: no candidate)."""
    cands = [c for c in candidates if c.value is not None and math.isfinite(c.value)]
    if not cands:
        return None
    sign = 1.0 if direction == "maximize" else -1.0
    ranked = sorted(cands, key=lambda c: -sign * c.value)
    best = ranked[0]
    tied = [c for c in ranked[1:] if c.high >= best.low and c.low <= best.high]
    return Ties(best=best, tied=tied, noise_known=best.ci is not None)
