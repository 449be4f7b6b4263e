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
    """A verdict: the leader, the runners-up it is not told apart from, the pick, and on what noise.

    ``state`` (the campaign model's, :mod:`sweep.score.campaign`): ``decided`` (the leader beats
    every other beyond noise), ``equivalent`` (the pick -- the cheapest config -- is within the
    practical margin of the best at 95%), ``open`` (none is: the pick has the smallest regret
    bound), ``unknown`` (measured once, the box's spread unknown: nothing can be called best)."""

    best: Candidate[K]
    tied: list[Candidate[K]] = field(default_factory=list)  # runners-up still in contention, best first
    noise_known: bool = True  # False: the leader was measured once and the box's spread is unknown
    basis: str = "95% intervals"  # what the intervals come from
    others: int = 0  # candidates besides the leader
    verdict: str | None = None  # the campaign model's state (None: from the fields, as older callers made it)
    pick: Candidate[K] | None = None  # what to run (decided/equivalent: the decision; open: smallest regret)
    regret: float | None = None  # the most the pick may be below the true best (a fraction, 95%)
    margin: float = 0.02

    @property
    def leader(self) -> Candidate[K]:
        return self.best

    @property
    def state(self) -> str:
        if self.verdict is not None:
            return self.verdict if self.others else "decided"
        if not self.noise_known and self.others:
            return "unknown"
        return "open" if self.tied else "decided"

    @property
    def decided(self) -> bool:
        return self.state in ("decided", "equivalent")

    @property
    def chosen(self) -> Candidate[K]:
        """The config to run: the pick where there is one, else the leader."""
        return self.pick if self.pick is not None else self.best

    def line(self, name: Any = str, unit: str = "") -> str:
        """``clear winner ...`` / ``equivalent: ...`` / ``open: ...`` / the unknown-noise note."""
        if not self.others:
            return "the only feasible config of its group" + (
                "" if self.noise_known else " (measured once: noise unknown)")
        if self.state == "unknown":
            return ("measured once: noise unknown, so no config is called best "
                    "(workload.repeats=3 or the same command again gives intervals; hardware.spread "
                    "judges single measurements)")
        bound = "" if self.regret is None else (
            "the best at 95%" if self.regret <= 0.0005 else f"at most {self.regret:.1%} below the best")
        if self.state == "decided":
            return f"clear winner: it beats every other config beyond noise ({self.basis})"
        if self.state == "equivalent":
            return (f"{name(self.chosen.key)}: {bound}, within the {self.margin:.0%} margin -- the cheapest such "
                    f"config ({self.basis})")
        return "open: not told apart from " + ", ".join(
            f"{name(c.key)} ({c.value:,.1f}{unit})" for c in self.tied) + (
            f"; pick {name(self.chosen.key)}: {bound}" if bound else "") + f" ({self.basis})"


def _basis(cands: Sequence[Candidate[K]], spread: float | None, pooled: Any = None) -> str:
    if pooled is not None and pooled.sigma is not None and pooled.source == "pooled":
        return (f"noise {pooled.sigma:.1%} per measurement pooled over the configs' repeats "
                f"({pooled.df:g} degrees of freedom)")
    if spread is not None:
        return f"the box's spread, {spread:.1%} per measurement (a prior: nothing was measured twice)"
    return "95% intervals"


def _pseudo(c: Candidate[K]) -> list[float]:
    """Values with the candidate's mean and the spread its interval says (all the model reads)."""
    if c.ci is None or not c.value > 0:
        return [float(c.value)]
    from sweep.stats import t975 as _t

    n = c.n if c.n >= 2 else 3  # an interval whose count was not kept: the docs' workload.repeats=3
    sd = (c.ci[1] - c.ci[0]) / 2.0 / _t(n - 1) * math.sqrt(n)
    z = [i - (n - 1) / 2 for i in range(n)]
    scale = math.sqrt(sum(x * x for x in z) / (n - 1))
    values = [c.value + sd * x / scale for x in z]
    return values if min(values) > 0 else [float(c.value)]


def tied_within_noise(candidates: Sequence[Candidate[K]], direction: str = "maximize",
                      spread: float | None = None, cost: Any = None, margin: float | None = None) -> Ties[K] | None:
    """The campaign model's verdict over configs known by their summaries (value, 95% interval over n
    measurements): the noise pooled over every candidate's repeats (the box's ``spread`` a prior where
    nothing was measured twice), Hsu's comparisons with the best, the practical margin, the pick
    (``cost``: key -> order, cheaper first) and its regret bound. None: no candidate."""
    from sweep.score.campaign import MARGIN, Campaign, Obs

    raw = [c for c in candidates if c.value is not None and math.isfinite(c.value) and c.value > 0]
    if not raw:
        return None
    idx = {i: c for i, c in enumerate(raw)}
    obs = [Obs(i, "objective", "all", v) for i, c in idx.items() for v in _pseudo(c)]
    costs = {i: (cost(c.key) if cost is not None else None) for i, c in idx.items()}
    camp = Campaign(obs, prior=spread, margin=MARGIN if margin is None else margin,
                    cost={i: v for i, v in costs.items() if v is not None}, maximize=direction == "maximize")
    v = camp.verdict("objective")
    if v.leader is None:
        return None
    lead = idx[v.leader]
    cands = [with_spread(c, spread) for c in raw]
    shown = {id(r): c for r, c in zip(raw, cands)}
    tied = [shown[id(idx[k])] for k in v.contenders if k != v.leader] if v.state in ("open", "unknown") else []
    tied.sort(key=lambda c: -c.value if direction == "maximize" else c.value)
    pick = idx[v.pick] if v.pick is not None else None
    return Ties(best=shown[id(lead)], tied=tied, noise_known=camp.noise.known, basis=_basis(raw, spread, camp.noise),
                others=len(raw) - 1, verdict=v.state, pick=shown[id(pick)] if pick is not None else None,
                regret=v.regret_pct(), margin=camp.margin)
