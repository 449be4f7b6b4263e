"""A per-load table checked against what it replaces: the dynamic config vs its family's static
budgets and the autoregressive baseline, load by load, with intervals.

A view over results, like the schedule: wherever a group of comparable trials (same box, model,
workload) holds a **dynamic** config (``spec.per_load`` set) and configs of its **family** (the
same config but for ``spec.budget``: :func:`sweep.report.dynamic.family_of`), per context:

* each arm's tok/s per load and per **round** -- a run of ``python -m sweep.verify_dynamic``
  measures every arm once per round, the order rotated (``.../round<r>/...`` in the result's
  path); copies outside rounds count as one round each, unpaired;
* the **best static** is the one budget of the family that does best over all the loads, each
  load counting once (the highest geometric mean over the loads of its mean tok/s): the config
  a user would otherwise deploy;
* per load, **dynamic / best static** and **dynamic / baseline** (and dynamic / the best static
  *at that load*: what a perfect table would get), each as the geometric mean over the rounds
  of the paired per-round ratios, with a 95% t-interval on their logs (rounds share the box's
  state, so pairing takes its drift out); without pairs, the ratio of the means with the two
  relative half-widths added in quadrature;
* the **geometric mean over the loads** of dynamic / best static (per round, then over the
  rounds, with its interval) and the **worst load**;
* the intervals follow the project's verdict rule (``sweep.score.noise.with_spread``): the box's
  **spread** -- measured here over every arm and load run in two or more rounds (the median
  relative standard deviation of one round's tok/s; a ``hardware.spread`` the trials declare when
  no cell has two rounds) -- sets a floor, z x sqrt(2) x spread / sqrt(rounds) on a ratio's log
  (two measurements in each ratio; over L loads, / sqrt(L) more); two rounds are judged with the
  wider of that and the pair's own scatter (normal quantile, not t = 12.7 on one degree of freedom);
  three or more with the t-interval, never narrower than the floor;
* a load **loses** where the interval lies below 1, **wins** above 1, else it is within noise.

A hand-written table is checked the same way: run it as the dynamic arm.
"""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass, field
from typing import Any, Sequence

from sweep.record.result import TrialResult
from sweep.report.dynamic import family_of
from sweep.score import configs as score_configs
from sweep.score.metrics import ok_cells
from sweep.score.speedup import baseline_key
from sweep.stats import Z975, interval

FORMAT = "specsweep.verify/1"
_ROUND = re.compile(r"(?:^|[/\\])round(\d+)(?:[/\\]|$)")


@dataclass
class Arm:
    """One config of the comparison: its runs per load, per round."""

    label: str                 # dynamic | b<k> | baseline
    name: str
    config_id: str
    budget: int | None         # None: the dynamic arm; 0: the baseline
    runs: dict[int, dict[int, list[float]]] = field(default_factory=dict)  # load -> round -> tok/s

    def values(self, load: int) -> list[float]:
        return [v for vs in self.runs.get(load, {}).values() for v in vs]

    def mean(self, load: int) -> float | None:
        vs = self.values(load)
        return statistics.fmean(vs) if vs else None

    def ci(self, load: int, spread: float | None = None) -> tuple[float, float] | None:
        """The 95% interval of its tok/s at ``load``; with the box's ``spread``, by the verdict rule
        (``sweep.score.noise.with_spread``: two runs are not a t-interval on one degree of freedom)."""
        vs = self.values(load)
        if spread is None or not vs:
            return interval(vs)
        from sweep.score.noise import Candidate, with_spread

        return with_spread(Candidate(self.label, statistics.fmean(vs), interval(vs), len(vs)), spread).ci

    def by_round(self, load: int) -> dict[int, float]:
        return {r: statistics.fmean(vs) for r, vs in self.runs.get(load, {}).items() if vs and r >= 0}


@dataclass
class Ratio:
    value: float
    ci: tuple[float, float] | None
    pairs: int  # rounds paired (0: ratio of the means)

    @property
    def verdict(self) -> str:
        if self.ci is None:
            return "no interval"
        return "loses" if self.ci[1] < 1 else "wins" if self.ci[0] > 1 else "within noise"

    def text(self) -> str:
        ci = f" [{self.ci[0]:.2f}-{self.ci[1]:.2f}]" if self.ci else ""
        return f"{self.value:.2f}x{ci}"

    def to_dict(self) -> dict[str, Any]:
        return {"ratio": round(self.value, 4), "ci": [round(self.ci[0], 4), round(self.ci[1], 4)] if self.ci else None,
                "rounds_paired": self.pairs, "verdict": self.verdict}


def _log_interval(logs: Sequence[float], sd: float | None = None) -> tuple[float, tuple[float, float] | None]:
    """exp of the mean of ``logs`` with its 95% interval; ``sd``: one log's standard deviation the
    box's spread gives (module doc: the floor, and how two rounds are judged)."""
    mean = statistics.fmean(logs)
    ci = interval(logs)
    n = len(logs)
    if sd is not None and sd > 0:
        from sweep.score.noise import judged_half

        half = judged_half(0.0 if ci is None else (ci[1] - ci[0]) / 2.0, n, Z975 * sd / math.sqrt(n))
        ci = (mean - half, mean + half)
    return math.exp(mean), (math.exp(ci[0]), math.exp(ci[1])) if ci else None


def box_spread(arms: Sequence[Arm]) -> tuple[float, int] | None:
    """The run-to-run spread of one round's tok/s, measured over every arm and load with two or more
    rounds: the median relative standard deviation (and over how many cells); None: no such cell."""
    cvs = []
    for a in arms:
        for load in a.runs:
            vs = [v for r, v in a.by_round(load).items() if r >= 0 and v > 0]
            if len(vs) > 1:
                cvs.append(statistics.stdev(vs) / statistics.fmean(vs))
    return (statistics.median(cvs), len(cvs)) if cvs else None


def ratio(a: Arm, b: Arm, load: int, spread: float | None = None) -> Ratio | None:
    """a / b at ``load``: paired by round where both measured it, else the ratio of the means;
    ``spread``: the box's (module doc)."""
    ra, rb = a.by_round(load), b.by_round(load)
    both = sorted(set(ra) & set(rb))
    if both and all(ra[r] > 0 and rb[r] > 0 for r in both):
        sd = math.sqrt(2.0) * spread if spread else None
        value, ci = _log_interval([math.log(ra[r] / rb[r]) for r in both], sd)
        return Ratio(value, ci, len(both))
    ma, mb = a.mean(load), b.mean(load)
    if not ma or not mb:
        return None
    ca, cb = a.ci(load), b.ci(load)
    ci = None
    if ca and cb:
        rel = math.hypot((ca[1] - ca[0]) / 2 / ma, (cb[1] - cb[0]) / 2 / mb)
        ci = (ma / mb * (1 - rel), ma / mb * (1 + rel))
    return Ratio(ma / mb, ci, 0)


def geomean_ratio(a: Arm, b: Arm, loads: Sequence[int], spread: float | None = None) -> Ratio | None:
    """The geometric mean over ``loads`` of a / b: per round (paired), then over the rounds."""
    rounds = set.intersection(*[set(a.by_round(x)) & set(b.by_round(x)) for x in loads]) if loads else set()
    if rounds:
        per = [statistics.fmean(math.log(a.by_round(x)[r] / b.by_round(x)[r]) for x in loads) for r in sorted(rounds)]
        sd = math.sqrt(2.0 / len(loads)) * spread if spread else None
        value, ci = _log_interval(per, sd)
        return Ratio(value, ci, len(rounds))
    rs = [ratio(a, b, x) for x in loads]
    if not rs or any(r is None for r in rs):
        return None
    return Ratio(math.exp(statistics.fmean(math.log(r.value) for r in rs if r is not None)), None, 0)


@dataclass
class LoadResult:
    load: int
    budget: int                     # the table's budget at this load
    vs_best: Ratio | None           # dynamic / the best static (over all loads)
    vs_load_best: Ratio | None      # dynamic / the static that is best at this load
    load_best: int | None           # that static's budget
    vs_baseline: Ratio | None


@dataclass
class Verification:
    """One dynamic config checked in one group and context."""

    hardware: str
    model: str
    workload: str
    context: int
    family: str
    per_load: list[list[int]]
    simulated: bool
    dynamic: Arm
    statics: dict[int, Arm]
    baseline: Arm | None
    loads: list[int] = field(default_factory=list)
    best_static: int | None = None
    results: list[LoadResult] = field(default_factory=list)
    geomean: Ratio | None = None
    geomean_baseline: Ratio | None = None
    rounds: int = 0
    spread: float | None = None     # the box's, per measurement (module doc)
    spread_source: str = ""         # "measured over N cells" | "hardware.spread" | ""
    noise_line: str = ""            # what judged the ratios (the campaign model's noise)

    @property
    def worst(self) -> LoadResult | None:
        rs = [r for r in self.results if r.vs_best is not None]
        return min(rs, key=lambda r: r.vs_best.value) if rs else None  # type: ignore[union-attr]

    @property
    def worst_baseline(self) -> LoadResult | None:
        rs = [r for r in self.results if r.vs_baseline is not None]
        return min(rs, key=lambda r: r.vs_baseline.value) if rs else None  # type: ignore[union-attr]

    @property
    def pays(self) -> bool:
        """Speculation pays here: the best static beats the baseline over the loads."""
        if self.best_static is None or self.baseline is None:
            return False
        g = geomean_ratio(self.statics[self.best_static], self.baseline, self.loads, self.spread)
        return g is not None and g.value > 1

    @property
    def title(self) -> str:
        return f"{self.hardware} · {self.model} · {self.workload} · ctx {self.context} · family {self.family}"

    def headline(self) -> str:
        """``dynamic vs best static: X.XXx geometric mean over loads (worst load Y.YYx); vs baseline:
        worst load Z.ZZx``."""
        g, w, wb = self.geomean, self.worst, self.worst_baseline
        gs = f"{g.value:.2f}x" if g else "-"
        ws = f"{w.vs_best.value:.2f}x" if w and w.vs_best else "-"
        bs = f"{wb.vs_baseline.value:.2f}x" if wb and wb.vs_baseline else "-"
        return (f"dynamic vs best static: {gs} geometric mean over loads (worst load {ws}); "
                f"vs baseline: worst load {bs}")

    def where_it_loses(self) -> list[str]:
        out = []
        for r in self.results:
            for what, rr in (("the best static", r.vs_best), ("the baseline", r.vs_baseline)):
                if rr is not None and rr.verdict == "loses":
                    out.append(f"concurrency {r.load}: loses to {what} ({rr.text()})")
        return out


def round_of(source: str) -> int:
    """The verification round a result belongs to (``.../round<r>/...``), -1: none."""
    m = _ROUND.search(source or "")
    return int(m.group(1)) if m else -1


def round_key(source: str) -> str | None:
    """Which run's round a result belongs to: its path up to ``round<r>`` (each run of
    ``python -m sweep.verify_dynamic`` has its own dir, ``verify/<run id>/round<r>/``, so the
    rounds of two runs are two rounds, never paired as one); None: outside the rounds."""
    m = _ROUND.search(source or "")
    return (source[:m.start()] + f"/round{int(m.group(1))}") if m else None


def verifications(docs: Sequence[TrialResult], sources: Sequence[str] | None = None) -> list[Verification]:
    """Every dynamic config's verification (module doc)."""
    srcs = list(sources) if sources is not None else [""] * len(docs)
    ok = [(d, s) for d, s in zip(docs, srcs) if d.ok and ok_cells(d.cells)]
    names = score_configs.names([d for d, _ in ok])
    groups: dict[Any, list[tuple[TrialResult, str]]] = {}
    for d, s in ok:
        groups.setdefault(baseline_key(d.config, d.simulated), []).append((d, s))
    runs_rounds = sorted({rk for _, src in ok if (rk := round_key(src)) is not None})
    numbered = {rk: n for n, rk in enumerate(runs_rounds, 1)}  # every run's every round: a round of its own
    out: list[Verification] = []
    for members in groups.values():
        dynamic = [d for d, _ in members if d.spec_value("per_load")]
        for cid in dict.fromkeys(score_configs.config_id(d) for d in dynamic):
            first = next(d for d in dynamic if score_configs.config_id(d) == cid)
            fam = family_of(first)
            tagged: list[tuple[str, int | None, TrialResult, int]] = []
            unpaired = 0
            for d, s in members:
                budget = d.spec_value("budget")
                if score_configs.config_id(d) == cid:
                    label, k = "dynamic", None
                elif d.spec_value("algorithm") == "none":
                    label, k = "baseline", 0
                elif not d.spec_value("per_load") and isinstance(budget, int) and family_of(d) == fam:
                    label, k = f"b{budget}", int(budget)
                else:
                    continue
                which = round_key(s)
                rnd = numbered[which] if which is not None else -1
                if rnd < 0:  # a copy outside the rounds: a measurement of its own, unpaired
                    unpaired -= 1
                    rnd = unpaired
                tagged.append((label, k, d, rnd))
            for ctx in sorted({c.context for d in dynamic if score_configs.config_id(d) == cid
                               for c in ok_cells(d.cells)}):
                arms: dict[str, Arm] = {}
                for label, k, d, rnd in tagged:
                    arm = arms.setdefault(label, Arm(label, names.get(score_configs.config_id(d), label),
                                                     score_configs.config_id(d), k))
                    for c in ok_cells(d.cells):
                        if c.context == ctx:
                            arm.runs.setdefault(int(c.concurrency), {}).setdefault(rnd, []).append(
                                float(c.output_tok_s or 0.0))
                statics = {a.budget: a for a in arms.values() if a.budget not in (None, 0)}
                if not statics:
                    continue
                v = _verify(first, fam, arms["dynamic"], statics, arms.get("baseline"), int(ctx))
                if v is not None:
                    out.append(v)
    return out


def _model_ratio(camp: Any, a: Arm, b: Arm, x: int) -> Ratio | None:
    """a / b at load ``x`` from the campaign model: config effects with the rounds as blocks (paired
    within them), the noise pooled over every arm and load; a 95% interval on the log."""
    if not a.values(x) or not b.values(x):
        return None
    v = camp.verdict(x, [a.label, b.label])
    got = v.ratio(a.label, b.label, _crit(camp))
    if got is None:
        return None
    pairs = len(set(a.by_round(x)) & set(b.by_round(x)))
    return Ratio(got[0], got[1], pairs)


def _crit(camp: Any) -> float:
    from sweep.stats import t975

    df = camp.noise.df
    return t975(max(1, int(df))) if math.isfinite(df) else Z975


def _model_geomean(camp: Any, a: Arm, b: Arm, loads: Sequence[int]) -> Ratio | None:
    """The geometric mean over ``loads`` of a / b from the model (the loads' log ratios averaged; their
    variances add, over L^2)."""
    logs, var = [], 0.0
    for x in loads:
        if not a.values(x) or not b.values(x):
            return None
        v = camp.verdict(x, [a.label, b.label])
        ea, eb = v.estimates.get(a.label), v.estimates.get(b.label)
        if ea is None or eb is None:
            return None
        logs.append(ea.log - eb.log)
        se = v.se_of(a.label, b.label)
        var = math.nan if se is None else var + se * se
    if not logs:
        return None
    mean = statistics.fmean(logs)
    pairs = len(set.intersection(*[set(a.by_round(x)) & set(b.by_round(x)) for x in loads]))
    if not math.isfinite(var):
        return Ratio(math.exp(mean), None, pairs)
    half = _crit(camp) * math.sqrt(var) / len(logs)
    return Ratio(math.exp(mean), (math.exp(mean - half), math.exp(mean + half)), pairs)


def _verify(doc: TrialResult, fam: str, dyn: Arm, statics: dict[int, Arm], base: Arm | None,
            ctx: int) -> Verification | None:
    loads = sorted(x for x in dyn.runs if all(s.values(x) for s in statics.values()))
    if not loads:
        return None
    hw = doc.config_section("hardware")
    v = Verification(hardware=str(hw.get("name") or doc.trial.hardware),
                     model=str(doc.config_section("model").get("name") or "?"),
                     workload=str(doc.config_section("workload").get("name") or "?"), context=ctx, family=fam,
                     per_load=[list(map(int, b)) for b in doc.spec_value("per_load")],
                     simulated=bool(doc.simulated),
                     dynamic=dyn, statics=dict(sorted(statics.items())), baseline=base, loads=loads)
    from sweep.compose.per_load import budget_at
    from sweep.score.campaign import Campaign, Obs

    def gm(a: Arm) -> float:
        return statistics.fmean(math.log(a.mean(x) or 1e-12) for x in loads)

    arms = [dyn, *statics.values(), *([base] if base is not None else [])]
    measured = box_spread(arms)
    declared = hw.get("spread")
    if measured is not None:
        v.spread, v.spread_source = measured[0], f"measured over {measured[1]} cells"
    elif isinstance(declared, (int, float)) and not isinstance(declared, bool) and 0 < declared < 1:
        v.spread, v.spread_source = float(declared), "hardware.spread"
    # the one model of the measurement (sweep/score/campaign.py): rounds are blocks, the noise pooled
    # over every arm and load; the declared hardware.spread only a prior where nothing ran twice
    prior = float(declared) if isinstance(declared, (int, float)) and not isinstance(declared, bool) \
        and 0 < declared < 1 else None
    camp = Campaign([Obs(a.label, x, f"round{r}", val) for a in arms for x, by in a.runs.items()
                     for r, vals in by.items() for val in vals if val > 0], prior=prior)
    v.noise_line = camp.noise.line()
    v.best_static = max(statics, key=lambda k: gm(statics[k]))
    best = statics[v.best_static]
    for x in loads:
        load_best = max(statics, key=lambda k: statics[k].mean(x) or 0.0)
        v.results.append(LoadResult(x, budget_at(v.per_load, x), _model_ratio(camp, dyn, best, x),
                                    _model_ratio(camp, dyn, statics[load_best], x), load_best,
                                    _model_ratio(camp, dyn, base, x) if base is not None and base.values(x) else None))
    v.geomean = _model_geomean(camp, dyn, best, loads)
    if base is not None and all(base.values(x) for x in loads):
        v.geomean_baseline = _model_geomean(camp, dyn, base, loads)
    v.rounds = len({r for x in loads for r in dyn.by_round(x)})
    return v
