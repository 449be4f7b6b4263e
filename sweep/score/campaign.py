"""One model of a measurement campaign: every verdict the product gives is asked of it.

Why: judging each cell alone by overlapping intervals threw away what the measurement design
knows. Rounds are interleaved -- every config measured once per round, the order rotated -- so
a round is a **block**: a shift shared by every cell measured in it (the box's load, its
thermal state, a neighbour's job). On the recorded vLLM landscape round 2 ran ~7% faster than
round 1 in 49 of 56 cells; counted as noise, that drift made every level open, and more rounds
could decide *less* (a t-interval on n-1 degrees of freedom per cell). Here, per level (a
context x load of one group, or a group's objective)::

    log(tok/s)[config, round] = config effect + round effect + error

fitted by least squares; comparisons are between config effects, so they are paired within
rounds. The error's variance is **pooled** over every level of one box and workload (the
group), with its degrees of freedom: many, not n-1. A box's ``hardware.spread`` is a *prior*,
used only where nothing was measured twice (then the verdict says so).

What is asked of a level (:meth:`Campaign.verdict`):

* **comparisons with the best** (Hsu's multiple comparisons with the best): each config's
  simultaneous interval for its difference from the best of the others, with the one-sided
  Dunnett quantile ``d`` for k-1 comparisons (never below the two-sided t, so a speedup interval
  beside a verdict never contradicts it). The **leader** is *decided* when it beats every other
  config beyond that noise;
* a **practical margin** ``margin`` (2% by default; ``objective.margin``): a config whose regret
  bound -- the most the true best may beat it by, at 95% -- is within the margin is as good as
  the best for any practical purpose. The **pick** is the cheapest such config (the baseline,
  then the smallest budget: ``cost``); the level is *equivalent* when that is not the decided
  leader. That is a decision, not an open level;
* **open** only when no config is within the margin of the best: the pick is then the config
  with the smallest regret bound, said with it ("b8: at most 3.1% below the best");
* **unknown** when there is no noise at all to judge with (each config measured once, no prior).

The speedup of the pick over the baseline and the tok/s of each config come with intervals on
the log scale (never below zero); "speculation stops paying" and crossovers are read from picks.
:func:`contenders` is the racing rule (``sweep.decide``): a config is dropped once it is shown
worse than the leader by more than the margin.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable, Generic, Hashable, Iterable, Mapping, Sequence, TypeVar

from sweep.stats import Z975, t975

K = TypeVar("K", bound=Hashable)
L = TypeVar("L", bound=Hashable)

ALPHA = 0.05
MARGIN = 0.02          # a practical margin: 2% of tok/s
MIN_POOLED_DF = 2      # fewer residual degrees of freedom than this: the prior (hardware.spread) judges


@dataclass(frozen=True)
class Obs(Generic[K, L]):
    """One measurement: ``config`` at ``level`` in ``block`` (a round), ``value`` tok/s (> 0)."""

    config: K
    level: L
    block: str
    value: float


@dataclass(frozen=True)
class Noise:
    """What the verdicts were judged with: one measurement's log-scale standard deviation."""

    sigma: float | None      # None: unknown
    df: float                # residual degrees of freedom (inf: a prior)
    source: str              # pooled | prior | unknown
    levels: int = 0          # levels whose residuals were pooled
    blocks: int = 0          # rounds seen

    @property
    def known(self) -> bool:
        return self.sigma is not None

    def line(self) -> str:
        """One line: what judged these verdicts."""
        if self.sigma is None:
            return ("noise unknown: every config measured once and the box's spread not known "
                    "(workload.repeats=3, the same command again, or python -m sweep.decide)")
        if self.source == "prior":
            return (f"noise {self.sigma:.1%} per measurement from the box's spread (a prior: nothing here was "
                    "measured twice)")
        return (f"noise {self.sigma:.1%} per measurement, pooled over {self.levels} level(s) "
                f"({self.df:g} degrees of freedom); rounds are blocks, configs compared within them")


@dataclass
class Estimate(Generic[K]):
    """A config at a level: its tok/s on the average round and the 95% interval."""

    config: K
    log: float
    se: float | None
    n: int

    @property
    def tok_s(self) -> float:
        return math.exp(self.log)


@dataclass
class Verdict(Generic[K]):
    """What a level says.

    ``state``: ``decided`` (the leader beats every other config beyond noise, and it is the
    pick), ``equivalent`` (the pick is within the margin of the best at 95%), ``open`` (no
    config is shown within the margin: the pick has the smallest regret bound), ``unknown`` (no
    noise to judge with), ``none`` (no candidate)."""

    state: str
    estimates: dict[K, Estimate[K]]
    leader: K | None = None
    pick: K | None = None
    regret: dict[K, float] = field(default_factory=dict)     # log-scale upper bound (0: may be the best)
    shown_worse: dict[K, float] = field(default_factory=dict)  # log-scale lower bound of (best - config) > 0
    contenders: list[K] = field(default_factory=list)        # not shown worse than the best by the margin
    crit: float = Z975
    cost: dict[K, Any] = field(default_factory=dict)  # the order "cheaper" goes by (lower first)
    noise: Noise | None = None
    margin: float = MARGIN
    _pair: Callable[[K, K], float | None] | None = None

    def regret_pct(self, key: K | None = None) -> float | None:
        """The most ``key`` (default: the pick) may be below the true best, as a fraction, at 95%."""
        k = self.pick if key is None else key
        if k is None or k not in self.regret:
            return None
        return 1.0 - math.exp(-self.regret[k])

    def se_of(self, a: K, b: K) -> float | None:
        return self._pair(a, b) if self._pair is not None else None

    def ratio(self, a: K, b: K, crit: float | None = None) -> tuple[float, tuple[float, float] | None] | None:
        """tok/s of ``a`` over ``b`` and its interval (log scale, so never below zero)."""
        ea, eb = self.estimates.get(a), self.estimates.get(b)
        if ea is None or eb is None:
            return None
        diff = ea.log - eb.log
        se = self.se_of(a, b)
        if se is None:
            return math.exp(diff), None
        c = self.crit if crit is None else crit
        return math.exp(diff), (math.exp(diff - c * se), math.exp(diff + c * se))

    def interval(self, key: K) -> tuple[float, float] | None:
        e = self.estimates.get(key)
        if e is None or e.se is None:
            return None
        c = t975(max(1, int(self.noise.df))) if self.noise is not None and math.isfinite(self.noise.df) else Z975
        return (math.exp(e.log - c * e.se), math.exp(e.log + c * e.se))

    @property
    def decided(self) -> bool:
        return self.state in ("decided", "equivalent")

    def pick_line(self, name: Callable[[K], str] = str) -> str:
        """``b8: at most 3.1% below the best`` / ``b8: the best``."""
        if self.pick is None:
            return "no pick"
        r = self.regret_pct()
        if r is None:
            return f"{name(self.pick)} (noise unknown: no bound)"
        if r <= 0.0005:
            return f"{name(self.pick)}: the best at 95%"
        return f"{name(self.pick)}: at most {r:.1%} below the best"

    def why(self, name: Callable[[K], str] = str) -> str:
        if self.state == "none":
            return "no config meets the SLO without failed requests here"
        if self.state == "unknown":
            return "measured once and the box's spread unknown: nothing can be called best"
        if self.state == "decided":
            return f"{name(self.pick) if self.pick is not None else '?'} beats every other config beyond noise"
        if self.state == "equivalent":
            others = [name(k) for k in self.contenders if k != self.pick]
            return (f"{self.pick_line(name)}, within the {self.margin:.0%} margin"
                    + (f" (the cheapest of {', '.join([name(self.pick), *others])})" if others and self.pick is not None
                       else ""))
        return (f"open: {', '.join(name(k) for k in self.contenders)} not told apart; pick "
                f"{self.pick_line(name)}")


# ------------------------------------------------------------------------------ the quantile


def _norm_cdf(x: Any) -> Any:
    """Phi(x) on arrays: erfc by its Chebyshev fit (relative error < 1.2e-7), numpy has no erf."""
    import numpy as np

    z = np.abs(np.asarray(x, dtype=float)) / math.sqrt(2.0)
    t = 1.0 / (1.0 + 0.5 * z)
    poly = (-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (
        -0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (
            -0.82215223 + t * 0.17087277)))))))))
    erfc = t * np.exp(poly)
    return np.where(np.asarray(x) >= 0, 1.0 - 0.5 * erfc, 0.5 * erfc)


@lru_cache(maxsize=512)
def dunnett_one_sided(m: int, df: float, alpha: float = ALPHA) -> float:
    """The one-sided Dunnett quantile for ``m`` comparisons with one (correlation 1/2, as for
    equal replication), ``df`` degrees of freedom (inf: normal): ``P(max_i T_i <= d) = 1 - alpha``.
    Computed by integrating ``E_S[ int phi(z) Phi(z + sqrt(2) d S)^m dz ]`` on a grid."""
    import numpy as np

    if m <= 0:
        return 0.0
    z = np.linspace(-8.0, 8.0, 641)
    wz = np.exp(-z * z / 2.0) / math.sqrt(2 * math.pi) * (z[1] - z[0])
    if math.isfinite(df) and df < 400:
        nu = float(df)
        hi = 1.0 + 12.0 / math.sqrt(nu)
        s = np.linspace(1e-4, max(3.0, hi), 400)
        logf = (nu / 2) * math.log(nu) - (nu / 2 - 1) * math.log(2) - math.lgamma(nu / 2) \
            + (nu - 1) * np.log(s) - nu * s * s / 2
        ws = np.exp(logf) * (s[1] - s[0])
        ws = ws / ws.sum()
    else:
        s = np.array([1.0])
        ws = np.array([1.0])
    cdf_cache: dict[float, float] = {}

    def prob(d: float) -> float:
        key = round(d, 10)
        if key not in cdf_cache:
            phi = _norm_cdf(z[:, None] + math.sqrt(2.0) * d * s[None, :]) ** m
            cdf_cache[key] = float((wz[:, None] * phi * ws[None, :]).sum())
        return cdf_cache[key]

    lo, hi_d = 0.0, 10.0
    for _ in range(50):
        mid = (lo + hi_d) / 2
        if prob(mid) < 1 - alpha:
            lo = mid
        else:
            hi_d = mid
    return (lo + hi_d) / 2


def critical(k: int, df: float, alpha: float = ALPHA) -> float:
    """The quantile the verdicts use with ``k`` configs: Hsu's one-sided Dunnett for k-1
    comparisons, never below the two-sided t (so a 95% interval shown beside a verdict agrees)."""
    t = t975(max(1, int(df))) if math.isfinite(df) else Z975
    if alpha != ALPHA:  # a stricter level for repeated looks (racing): scale the normal quantile
        t = _t_quantile(1 - alpha / 2, df)
    # the quantile changes little with df past a few dozen: integer df, normal past 200 (cached)
    nu = float(int(df)) if math.isfinite(df) and df < 200 else math.inf
    return max(t, dunnett_one_sided(max(1, k - 1), nu, alpha))


def _t_quantile(p: float, df: float) -> float:
    """A Student-t quantile (Cornish-Fisher from the normal one; good to ~1% for df >= 3)."""
    z = _norm_ppf(p)
    if not math.isfinite(df):
        return z
    g1 = (z ** 3 + z) / 4
    g2 = (5 * z ** 5 + 16 * z ** 3 + 3 * z) / 96
    g3 = (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / 384
    return z + g1 / df + g2 / df ** 2 + g3 / df ** 3


def _norm_ppf(p: float) -> float:
    lo, hi = -12.0, 12.0
    for _ in range(80):
        mid = (lo + hi) / 2
        if 0.5 * (1 + math.erf(mid / math.sqrt(2))) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


# ------------------------------------------------------------------------------ the fit


@dataclass
class _Fit(Generic[K]):
    configs: list[K]
    log: dict[K, float]
    cov: Any            # (k x k) unscaled covariance of the config effects (times sigma^2)
    n: dict[K, int]
    ssr: float
    df: int
    blocked: bool


def _fit(obs: Sequence[Obs[K, Any]]) -> _Fit[K] | None:
    """Least squares of log tok/s on config + block effects (blocks dropped where they make the
    configs' comparisons not estimable: a level whose rounds were not interleaved)."""
    import numpy as np

    configs: list[K] = []
    for o in obs:
        if o.config not in configs:
            configs.append(o.config)
    blocks = sorted({o.block for o in obs})
    if not configs:
        return None
    y = np.array([math.log(o.value) for o in obs])
    ci = {c: i for i, c in enumerate(configs)}
    bi = {b: i for i, b in enumerate(blocks)}
    k, nb = len(configs), len(blocks)
    n = {c: sum(1 for o in obs if o.config == c) for c in configs}

    def design(with_blocks: bool) -> Any:
        cols = k + (nb - 1 if with_blocks else 0)
        x = np.zeros((len(obs), cols))
        for r, o in enumerate(obs):
            x[r, ci[o.config]] = 1.0
            if with_blocks and bi[o.block] > 0:
                # block 0 is the reference; config effects are read "on the average round" below
                x[r, k + bi[o.block] - 1] = 1.0
        return x

    blocked = nb > 1
    x = design(blocked)
    if blocked and np.linalg.matrix_rank(x) < x.shape[1]:
        blocked = False
        x = design(False)
    xtx_inv = np.linalg.pinv(x.T @ x)
    beta = xtx_inv @ x.T @ y
    resid = y - x @ beta
    rank = int(np.linalg.matrix_rank(x))
    df = len(obs) - rank
    # config effects on the average round: mu_c + mean over rounds of the block effects
    a = np.zeros((k, x.shape[1]))
    for c in range(k):
        a[c, c] = 1.0
        if blocked:
            a[c, k:] = 1.0 / nb  # block 0 is the reference (effect 0)
    est = a @ beta
    cov = a @ xtx_inv @ a.T
    return _Fit(configs, {c: float(est[ci[c]]) for c in configs}, cov, n, float(resid @ resid), df, blocked)


# ------------------------------------------------------------------------------ the campaign


class Campaign(Generic[K, L]):
    """Measurements of one box and workload (a group): the fit per level, the pooled noise, and
    the verdicts.

    ``prior``: the box's spread (``hardware.spread``; relative sd of one measurement), used only
    where nothing was measured twice. ``cost``: the order in which configs are "cheaper" (lower
    first: the baseline, then the smallest budget); ties broken by the higher estimate.
    ``alpha``: the verdicts' level (a racing look passes a stricter one)."""

    def __init__(self, obs: Iterable[Obs[K, L]], *, prior: float | None = None,
                 margin: float = MARGIN, alpha: float = ALPHA,
                 cost: Mapping[K, Any] | None = None, maximize: bool = True) -> None:
        good = [o for o in obs if isinstance(o.value, (int, float)) and math.isfinite(o.value) and o.value > 0]
        if not maximize:  # judged on the reciprocal: lower is better
            good = [Obs(o.config, o.level, o.block, 1.0 / o.value) for o in good]
        self.maximize = maximize
        self.obs = good
        self.margin = margin
        self.alpha = alpha
        self.cost = dict(cost or {})
        self.prior = prior if prior is not None and 0 < prior < 1 else None
        self.by_level: dict[L, list[Obs[K, L]]] = {}
        for o in good:
            self.by_level.setdefault(o.level, []).append(o)
        self.fits: dict[L, _Fit[K]] = {}
        for lv, rows in self.by_level.items():
            f = _fit(rows)
            if f is not None:
                self.fits[lv] = f
        self.noise = self._noise()

    @property
    def levels(self) -> list[L]:
        return list(self.by_level)

    def _noise(self) -> Noise:
        ssr = sum(f.ssr for f in self.fits.values() if f.df > 0)
        df = sum(f.df for f in self.fits.values() if f.df > 0)
        pooled = sum(1 for f in self.fits.values() if f.df > 0)
        blocks = len({o.block for o in self.obs})
        if df >= MIN_POOLED_DF and ssr > 0:
            return Noise(math.sqrt(ssr / df), float(df), "pooled", pooled, blocks)
        if self.prior is not None:
            prior = math.log1p(self.prior)
            if df >= 1 and ssr > 0 and math.sqrt(ssr / df) > prior:
                # too few repeats to pool on, but what they show is more than the prior: theirs judges
                return Noise(math.sqrt(ssr / df), float(df), "pooled", pooled, blocks)
            return Noise(prior, math.inf, "prior", 0, blocks)
        if df >= 1 and ssr > 0:
            return Noise(math.sqrt(ssr / df), float(df), "pooled", pooled, blocks)
        return Noise(None, 0.0, "unknown", 0, blocks)

    def _cost(self, key: K, est: Mapping[K, Estimate[K]]) -> tuple[Any, ...]:
        c = self.cost.get(key)
        return (c if c is not None else (math.inf,), -est[key].log)

    def verdict(self, level: L, among: Sequence[K] | None = None) -> Verdict[K]:
        """The level's verdict among ``among`` (default: every config measured there)."""
        fit = self.fits.get(level)
        if fit is None:
            return Verdict("none", {}, margin=self.margin, noise=self.noise)
        keys = [c for c in fit.configs if among is None or c in among]
        idx = {c: i for i, c in enumerate(fit.configs)}
        sigma = self.noise.sigma
        est = {c: Estimate(c, fit.log[c], (sigma * math.sqrt(max(0.0, float(fit.cov[idx[c], idx[c]]))))
                           if sigma is not None else None, fit.n[c]) for c in keys}
        if not keys:
            return Verdict("none", {}, margin=self.margin, noise=self.noise)

        def pair(a: K, b: K) -> float | None:
            if sigma is None:
                return None
            i, j = idx[a], idx[b]
            v = float(fit.cov[i, i] + fit.cov[j, j] - 2 * fit.cov[i, j])
            return sigma * math.sqrt(max(v, 0.0))

        leader = max(keys, key=lambda c: est[c].log)
        crit = critical(len(keys), self.noise.df, self.alpha) if sigma is not None else Z975
        v: Verdict[K] = Verdict("unknown", est, leader=leader, pick=leader, crit=crit, noise=self.noise,
                                margin=self.margin, _pair=pair, cost={c: self._cost(c, est) for c in keys})
        if len(keys) == 1:
            v.state, v.regret, v.contenders = "decided", {leader: 0.0}, [leader]
            return v
        if sigma is None:
            v.contenders = list(keys)
            return v
        tol = math.log1p(self.margin)
        for c in keys:
            others = [o for o in keys if o != c]
            v.regret[c] = max(0.0, max(est[o].log - est[c].log + crit * (pair(o, c) or 0.0) for o in others))
            v.shown_worse[c] = max(est[o].log - est[c].log - crit * (pair(o, c) or 0.0) for o in others)
        v.contenders = sorted((c for c in keys if v.shown_worse[c] <= tol), key=lambda c: -est[c].log)
        best_shown = v.regret[leader] <= 0.0 and all(v.shown_worse[c] > 0 for c in keys if c != leader)
        within = [c for c in keys if v.regret[c] <= tol]
        if within:
            v.pick = min(within, key=lambda c: self._cost(c, est))
            v.state = "decided" if (best_shown and v.pick == leader) else "equivalent"
        else:
            v.pick = min(keys, key=lambda c: (v.regret[c], -est[c].log))
            v.state = "open"
        return v

    # ------------------------------------------------------------------ planning

    def rounds_needed(self, level: L, verdict: Verdict[K] | None = None, cap: int = 50) -> int | None:
        """How many more rounds of the contenders would likely settle the level (the pick's regret
        bound within the margin at the current gaps and noise); None: more than ``cap``."""
        v = verdict or self.verdict(level)
        if v.decided or v.state in ("none",) or self.noise.sigma is None:
            return 0 if v.decided else None
        fit = self.fits[level]
        tol = math.log1p(self.margin)
        sigma = self.noise.sigma
        now = min(fit.n[c] for c in v.contenders) if v.contenders else 1
        leader = v.leader
        crit = v.crit  # today's quantile: more rounds only lower it, so the count errs long
        for extra in range(1, cap + 1):
            n = now + extra
            se = sigma * math.sqrt(2.0 / n)
            for c in v.contenders:
                gap = v.estimates[leader].log - v.estimates[c].log if leader is not None else 0.0
                # c settles as the pick (within margin) or is dropped (shown worse beyond the margin)
                if gap + crit * se <= tol or gap - crit * se > tol:
                    continue
                break
            else:
                return extra
            # the leader itself shown best beyond noise settles too
            if leader is not None and all(
                    v.estimates[leader].log - v.estimates[c].log - crit * se > 0
                    for c in v.estimates if c != leader):
                return extra
        return None


def contenders(verdict: Verdict[K]) -> list[K]:
    """The racing rule: the configs still worth measuring at an undecided level -- those not shown
    worse than the best by more than the margin (empty when the level is decided or equivalent)."""
    if verdict.decided or verdict.state == "none":
        return []
    keep = list(verdict.contenders or verdict.estimates)
    if not verdict.shown_worse or verdict.leader is None:
        return keep
    # a config already shown worse than the best (by less than the margin) can still matter only as the
    # cheaper pick: measured again only when it is cheaper than the leader
    lead = verdict.cost.get(verdict.leader)
    return [c for c in keep if verdict.shown_worse.get(c, 0.0) <= 0.0 or c == verdict.leader
            or (lead is not None and verdict.cost.get(c) is not None and verdict.cost[c][0] < lead[0])]
