"""Judging the twin on points it was not fitted to: held-out splits of a recorded landscape.

A split names the points to fit on and the points to predict. For each
held-out point the twin (fitted with ``python -m sweep.calibrate``'s MAP fit on
the rest) predicts the value and an ``level`` prediction interval (default
80%: the calibration's posterior covariance pushed through the prediction plus
its residual scatter, :func:`sweep.sim.fit.band`); the figures of merit are
the held-out |error| and the **coverage** -- the share of held-out points inside
their interval, which should be about ``level`` if the bands are honest.

Splits (:func:`splits`): leave one config out (its acceptance and speed come
from the other configs: for an n-gram config, the workload's repetition fitted
on the other budgets and minimum lengths), leave one concurrency out, fit on
the lowest concurrency only and predict the rest, fit on half the configs.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any, Callable, Mapping, Sequence

from sweep.sim.constants import Calibration
from sweep.sim.measured import Point, predict_point

LEVEL = 0.8


@dataclass
class Split:
    name: str
    group: str                     # which family of splits (loco, locco, one_concurrency, half_configs)
    train: list[int]
    test: list[int]


@dataclass
class Outcome:
    split: str
    group: str
    point: Point
    predicted: float
    low: float
    high: float

    @property
    def error(self) -> float:
        return self.predicted / self.point.measured - 1.0

    @property
    def inside(self) -> bool:
        return self.low <= self.point.measured <= self.high

    @property
    def width(self) -> float:
        """How wide the band is: high / low (1 = a point; 2 = a factor of two from end to end)."""
        return self.high / self.low if self.low > 0 else float("inf")


@dataclass
class Report:
    outcomes: list[Outcome] = field(default_factory=list)
    fits: int = 0

    def select(self, group: str | None = None, kind: str | None = None) -> list[Outcome]:
        return [o for o in self.outcomes if (group is None or o.group == group)
                and (kind is None or o.point.kind == kind)]

    @staticmethod
    def summary(outs: Sequence[Outcome]) -> tuple[float, float, int]:
        """(median |error| %, coverage %, n)."""
        if not outs:
            return float("nan"), float("nan"), 0
        return (100 * statistics.median(abs(o.error) for o in outs),
                100 * sum(o.inside for o in outs) / len(outs), len(outs))

    @staticmethod
    def width(outs: Sequence[Outcome]) -> float:
        """The median band width (high / low) of these outcomes."""
        return statistics.median(o.width for o in outs) if outs else float("nan")


def splits(points: Sequence[Point]) -> list[Split]:
    """The held-out splits of a landscape's points (see the module doc)."""
    out: list[Split] = []
    idx = list(range(len(points)))
    configs = sorted({p.config for p in points})
    for cid in configs:
        test = [i for i in idx if points[i].config == cid]
        out.append(Split(f"config {cid}", "loco", [i for i in idx if i not in test], test))
    concs = sorted({p.concurrency for p in points})
    if len(concs) > 1:
        for conc in concs:
            test = [i for i in idx if points[i].concurrency == conc]
            out.append(Split(f"concurrency {conc}", "locco", [i for i in idx if i not in test], test))
        low = concs[0]
        out.append(Split(f"fit C={low} only", "one_concurrency", [i for i in idx if points[i].concurrency == low],
                         [i for i in idx if points[i].concurrency != low]))
    if len(configs) > 3:
        half = set(configs[::2])
        out.append(Split("fit half the configs", "half_configs", [i for i in idx if points[i].config in half],
                         [i for i in idx if points[i].config not in half]))
    return out


ROW = {"output_tok_s": "output_tok_s", "ttft_ms": "ttft_ms_p50", "accept_len": "accept_len"}


def predicted(point: Point, cal: Calibration, level: float = LEVEL,
              cache: dict[tuple[int, int], dict[str, Any]] | None = None) -> tuple[float, float, float]:
    """(value, low, high) of a measured figure as ``sweep.sim.predict`` gives it with this
    calibration -- the user's path, from the point's composed config (its box's recorded figures,
    engine, dtype, workload, repeats) --; a coding problem (no cell) through the fit's own function."""
    if point.composed and point.kind in ROW:
        from sweep.sim.predict import predict

        key = (id(point.composed), id(cal))
        if cache is None or key not in cache:
            got = predict(point.composed, calibration=cal, band=True, level=level)
            if cache is not None:
                cache[key] = got
        else:
            got = cache[key]
        cell = got["cells"][0]
        row = ROW[point.kind]
        return float(cell[row]), float(cell[f"{row}_low"]), float(cell[f"{row}_high"])
    from sweep.sim.fit import band
    from sweep.sim.scatter import noise_key

    z = NormalDist().inv_cdf(0.5 + level / 2.0)

    def one(values: Mapping[str, float]) -> tuple[float]:
        return (predict_point(point, values),)

    (value, low, high), = band(one, cal, z, kind=noise_key(point), repeats=point.repeats)
    return value, low, high


def evaluate(points: Sequence[Point], chosen: Sequence[Split], *, level: float = LEVEL,
             progress: Callable[[str], None] | None = None, full: Any = None) -> Report:
    """Fit on each split's train points, predict its test points with a ``level`` interval
    through :func:`predicted` (``sweep.sim.predict``, as a user runs it). ``full``: the fit on
    every point, if already made (its constants start each split's fit)."""
    from sweep.sim.fit import fit

    full = full if full is not None else fit(points)
    start = {prm.key: float(v) for prm, v in zip(full.params, full.z)}
    report = Report(fits=1)
    for sp in chosen:
        if progress:
            progress(sp.name)
        train = [points[i] for i in sp.train]
        if not train:
            continue
        f = fit(train, start=start)
        report.fits += 1
        cache: dict[tuple[int, int], dict[str, Any]] = {}
        for i in sp.test:
            pt = points[i]
            cal = f.calibrations.get(pt.box)
            if cal is None:
                continue
            value, low, high = predicted(pt, cal, level, cache)
            report.outcomes.append(Outcome(sp.name, sp.group, pt, value, low, high))
    return report


def in_sample(points: Sequence[Point], cal_of: Callable[[Point], Calibration | None], *,
              level: float = LEVEL) -> Report:
    """Every point predicted with a calibration that saw it (``cal_of``: the shipped one, say)."""
    report = Report()
    cache: dict[tuple[int, int], dict[str, Any]] = {}
    for pt in points:
        cal = cal_of(pt)
        if cal is None:
            continue
        value, low, high = predicted(pt, cal, level, cache)
        report.outcomes.append(Outcome("in-sample", "in_sample", pt, value, low, high))
    return report
