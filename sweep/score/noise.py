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
from sweep.stats import Z975, standard_error, t975

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
    """One config's objective: ``key`` is the caller's handle (a trial number, a path).
    ``n``: measurements behind ``value`` (a pooled config's copies and repeats)."""

    key: K
    value: float
    ci: tuple[float, float] | None = None
    n: int = 1

    @property
    def low(self) -> float:
        return self.ci[0] if self.ci else self.value

    @property
    def high(self) -> float:
        return self.ci[1] if self.ci else self.value


def spread_of(result: TrialResult) -> float | None:
    """The box's measured run-to-run spread: the relative standard deviation of one measurement of a
    cell's tok/s (``hardware.spread``, from repeats or a recorded landscape; on the simulator its own
    noise, ``server.sim.noise``). None: unknown. Used to judge ties of configs measured once."""
    if result.simulated:
        sim = result.config_section("server").get("sim")
        noise = sim.get("noise") if isinstance(sim, dict) else None
        return float(noise) if isinstance(noise, (int, float)) and noise > 0 else None
    spread = result.config_section("hardware").get("spread")
    return float(spread) if isinstance(spread, (int, float)) and 0 < spread < 1 else None


def with_spread(c: Candidate[K], spread: float | None) -> Candidate[K]:
    """The candidate's interval where the box's spread is known.

    Measured once: the interval the spread gives one measurement. Measured twice: a t-interval of
    two values rests on one degree of freedom (t = 12.7) and says little either way; the box's
    spread, measured over many cells, is the better estimate of one measurement's scatter -- so the
    interval is the wider of the spread's and the two values' own (both with the normal quantile,
    over sqrt(2)). Three or more: the t-interval, never narrower than the spread's."""
    if spread is None:
        return c
    n = max(1, c.n)
    floor = Z975 * spread * abs(c.value) / math.sqrt(n)
    if c.ci is None:
        return Candidate(c.key, c.value, (c.value - floor, c.value + floor), c.n)
    half = judged_half((c.ci[1] - c.ci[0]) / 2.0, n, floor)
    return Candidate(c.key, c.value, (c.value - half, c.value + half), c.n)


def judged_half(own: float, n: int, floor: float) -> float:
    """The verdict rule on a half-width: ``own`` (a t-interval's, 0 when none) over ``n`` values
    against the ``floor`` the box's spread gives -- two values with the normal quantile, never
    narrower than the floor. Shared by :func:`with_spread` and ratios on logs (report/verify)."""
    if n == 2:
        own = own / t975(1) * Z975  # the pair's own scatter with the normal quantile
    return max(own, floor)


@dataclass(frozen=True)
class Ties(Generic[K]):
    """A verdict: the leader, the runners-up it does not beat beyond noise, and on what noise.

    ``state``: ``decided`` (no runner-up's interval overlaps the leader's: it is the best),
    ``tied`` (some do: undecided between them), ``unknown`` (the leader has no interval and the box
    no spread: measured once, nothing can be called best)."""

    best: Candidate[K]
    tied: list[Candidate[K]] = field(default_factory=list)  # runners-up, best first
    noise_known: bool = True  # False: the leader was measured once and the box's spread is unknown
    basis: str = "95% intervals"  # what the intervals come from
    others: int = 0  # candidates besides the leader

    @property
    def leader(self) -> Candidate[K]:
        return self.best

    @property
    def state(self) -> str:
        if not self.noise_known and self.others:
            return "unknown"
        return "tied" if self.tied else "decided"

    @property
    def decided(self) -> bool:
        return self.state == "decided"

    def line(self, name: Any = str, unit: str = "") -> str:
        """``clear winner ...`` / ``undecided: tied within noise with 3, 9 ...`` / the unknown-noise note."""
        if not self.others:
            return "the only feasible config of its group" + (
                "" if self.noise_known else " (measured once: noise unknown)")
        if self.state == "unknown":
            return ("measured once: noise unknown, so no config is called best "
                    "(workload.repeats=3 or the same command again gives intervals; hardware.spread "
                    "judges single measurements)")
        if not self.tied:
            return f"clear winner: no other config's interval overlaps it ({self.basis})"
        return "undecided: tied within noise with " + ", ".join(
            f"{name(c.key)} ({c.value:,.1f}{unit})" for c in self.tied) + f" ({self.basis})"


def _basis(cands: Sequence[Candidate[K]], spread: float | None) -> str:
    own = [c for c in cands if c.ci is not None]
    if own and len(own) == len(cands):
        n = sorted({c.n for c in own})
        counts = f"{n[0]}" if len(n) == 1 else f"{n[0]}-{n[-1]}"
        return f"95% intervals over {counts} measurements"
    if spread is not None and own:
        return (f"95% intervals over the measurements, at least the box's spread ({spread:.1%} per "
                "measurement)")
    if spread is not None:
        return (f"95% intervals; configs measured once judged with the box's spread "
                f"({spread:.1%} per measurement)")
    return "95% intervals"


def tied_within_noise(candidates: Sequence[Candidate[K]], direction: str = "maximize",
                      spread: float | None = None) -> Ties[K] | None:
    """The leader and the runners-up whose 95% intervals overlap its own (None: no candidate).

    A candidate measured once has the interval the box's ``spread`` gives it (:func:`with_spread`),
    else none: then only an equal value ties with it, and a leader without an interval is no
    verdict (``state == "unknown"``)."""
    raw = [c for c in candidates if c.value is not None and math.isfinite(c.value)]
    if not raw:
        return None
    cands = [with_spread(c, spread) for c in raw]
    sign = 1.0 if direction == "maximize" else -1.0
    ranked = sorted(cands, key=lambda c: -sign * c.value)
    best = ranked[0]
    tied = [c for c in ranked[1:] if c.high >= best.low and c.low <= best.high]
    return Ties(best=best, tied=tied, noise_known=best.ci is not None, basis=_basis(raw, spread),
                others=len(ranked) - 1)
