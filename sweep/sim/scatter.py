"""What a fit's residuals say beyond its constants: one run's measured noise, and the model's error.

A recorded landscape measures every cell in several rounds, so the spread of ONE run is measured
(:func:`measured_noise`), apart from the misfit the model cannot remove (:func:`model_error`):
a band for a new measurement adds the second, and the first over the measurement's repeats
(:func:`sweep.sim.fit.band`). The residual scatter a calibration used to push into every band
whole counted the box's noise as the model's error and never divided it by the repeats.

``prob`` below is a :class:`sweep.sim.fit.Problem` (points, their noise, the constants' reach).
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

from sweep.sim import constants as K
from sweep.sim.measured import Point


def _noise(kind: str) -> float:
    """The prior noise of one measurement of this kind (log sd), where none was measured."""
    table = K.priors()["noise"]
    return float(table.get(kind) or table["tok_s"])


def _log_sd(values: Sequence[float]) -> float | None:
    runs = [math.log(v) for v in values if v and v > 0]
    if len(runs) < 2:
        return None
    mean = sum(runs) / len(runs)
    return math.sqrt(sum((r - mean) ** 2 for r in runs) / (len(runs) - 1))


def noise_key(p: Point) -> str:
    """Which figures share one noise and one model error: a kind of point, and for accept lengths
    the drafter's family too (a target drafting for itself repeats exactly; an n-gram lookup on a
    cell's few prompts does not)."""
    from sweep.sim.accept import family

    return f"{p.kind}:{family(p.spec)}" if p.kind == "accept_len" else p.kind


# The median of a chi distribution with d degrees of freedom over sqrt(d): one point's sample sd of
# d + 1 repeats is this many sigmas at its median (chi-square medians for d = 1..4; Wilson-Hilferty beyond).
_CHI2_MEDIAN = {1: 0.454937, 2: 1.386294, 3: 2.365974, 4: 3.356694}


def _sd_median(dof: int) -> float:
    med = _CHI2_MEDIAN.get(dof) or dof * (1.0 - 2.0 / (9.0 * dof)) ** 3
    return math.sqrt(med / dof)


def measured_noise(points: Sequence[Point]) -> dict[tuple[str, str], float]:
    """(box, noise key) -> the run-to-run spread of ONE measurement (log sd), measured from the
    points measured more than once (a recorded landscape's rounds). Robust, as the residual
    scatter is: the median over those points of their sample sd, scaled by the sd's own median
    (a shared box has quiet and loud minutes; a mean of squares would let a few rounds set every
    band). Keys without enough repeats are left out (their noise is not measured)."""
    acc: dict[tuple[str, str], list[float]] = {}
    for p in points:
        sd = _log_sd(p.runs)
        if sd is not None:
            acc.setdefault((p.box, noise_key(p)), []).append(sd / _sd_median(len(p.runs) - 1))
    return {k: max(NOISE_FLOOR, float(np.median(v))) for k, v in acc.items() if len(v) >= MIN_NOISE_POINTS}


MIN_SPARE_CONFIGS = 2  # configs beyond the constants' degrees of freedom a model error below the prior needs
NOISE_FLOOR = 0.005   # a measured spread below 0.5% is taken as 0.5% (identical repeats)
MIN_NOISE_POINTS = 4  # points measured more than once a measured noise needs


def single_noise(p: Point, measured: Mapping[tuple[str, str], float]) -> float:
    """One measurement's noise of this point's kind on its box: measured (rounds), else the box's
    declared run-to-run spread (``hardware.spread``, tok/s), else the prior."""
    if (p.box, noise_key(p)) in measured:
        return measured[(p.box, noise_key(p))]
    spread = p.hardware.get("spread")
    if p.kind in ("output_tok_s", "stream_tok_s") and isinstance(spread, (int, float)) and spread > 0:
        return float(spread)
    return _noise(p.kind)


def point_noise(p: Point, measured: Mapping[tuple[str, str], float]) -> float:
    """A point's measurement noise: one measurement's, over the repeats it is the mean of."""
    return single_noise(p, measured) / math.sqrt(max(1, p.repeats))


def model_error(prob: Any, z: np.ndarray, resid: np.ndarray | None = None,
                 shrink: np.ndarray | None = None) -> dict[tuple[str, str], float]:
    """(box, noise key) -> the model's own error (log sd), in two parts added in quadrature:

    * **between configs**: the scatter of each config's mean residual (a config and workload of a
      landscape; a result file's point alone), over the configs less the degrees of freedom the
      constants took, less the noise of those means -- what a config the fit never saw meets (its
      cells share one misfit: six cells of one config are one observation of it, not six);
    * **within a config**: the robust scatter of the residuals about their config's mean, less
      the points' measurement noise.

    0 where the noise explains the scatter; left out where the constants took every degree of
    freedom (unknown: a band falls back to the residual scatter). What a band adds to the noise."""
    if resid is None:
        resid = prob.log_pred(z) - prob.logm
    if shrink is None:
        jac_d = prob.jacobian(z) / prob.noise[:, None]
        sd = np.array([p.sd for p in prob.params])
        cov = np.linalg.inv(jac_d.T @ jac_d + np.diag(1.0 / sd ** 2))
        shrink = 1.0 - np.diag(cov) / sd ** 2
    out: dict[tuple[str, str], float] = {}
    for key in sorted({(p.box, noise_key(p)) for p in prob.points}):
        rows = [i for i, p in enumerate(prob.points) if (p.box, noise_key(p)) == key]
        groups: dict[tuple[str, str] | int, list[int]] = {}
        for i in rows:
            p = prob.points[i]
            groups.setdefault((p.config, p.workload) if p.config else i, []).append(i)
        used = _used_dof(prob, shrink, rows)
        if len(rows) - used < 1:  # the constants took every degree of freedom: unknown
            continue
        means = {g: float(np.mean(resid[ix])) for g, ix in groups.items()}
        within = np.array([resid[i] - means[g] for g, ix in groups.items() for i in ix])
        spread = len(rows) - len(groups)
        w_sd = 1.4826 * float(np.median(np.abs(within))) * math.sqrt(len(rows) / spread) if spread >= 1 else 0.0
        meas = float(np.sqrt(np.mean(prob.meas[rows] ** 2)))
        model_within = max(0.0, w_sd ** 2 - meas ** 2)
        if len(groups) > 1:  # the constants (config-level: acceptance, overheads) take their dof from the configs
            b_var = sum(m ** 2 for m in means.values()) / max(1.0, len(groups) - used)
            noise_of_means = float(np.mean([np.mean(prob.meas[ix] ** 2) / len(ix) for ix in groups.values()]))
            model_between = max(0.0, b_var - noise_of_means - model_within * float(
                np.mean([1.0 / len(ix) for ix in groups.values()])))
        else:
            model_between = 0.0
        err = math.sqrt(model_within + model_between)
        if len(groups) - used < MIN_SPARE_CONFIGS:  # too few configs beyond the constants to trust a small one
            err = max(err, _noise(key[1].split(":", 1)[0]))
        out[key] = err
    return out


def _used_dof(prob: Any, shrink: np.ndarray, rows: Sequence[int]) -> float:
    """The degrees of freedom the constants took from ``rows`` (each constant's share in
    proportion to the rows it reaches)."""
    mine = set(rows)
    return sum(float(shrink[j]) * len(mine.intersection(reach)) / len(reach)
               for j, reach in enumerate(prob.touch) if reach)


def _robust_sd(prob: Any, resid: np.ndarray, shrink: np.ndarray, rows: Sequence[int]) -> float | None:
    """1.4826 x the median absolute residual over ``rows``, corrected for the degrees of freedom
    the constants took from them (a shared constant's share in proportion to the rows it reaches);
    None when they left fewer than one."""
    rows = list(rows)
    if not rows:
        return None
    mine = set(rows)
    used = sum(float(shrink[j]) * len(mine.intersection(reach)) / len(reach)
               for j, reach in enumerate(prob.touch) if reach)
    dof = len(rows) - used
    if dof < 1:
        return None
    return 1.4826 * float(np.median(np.abs(resid[rows]))) * math.sqrt(len(rows) / dof)


def residual_sd(prob: Any, resid: np.ndarray, shrink: np.ndarray, rows: Sequence[int]) -> float:
    """The fit's residual scatter over ``rows`` (log sd, :func:`_robust_sd`); never below the
    points' own noise.

    Robust (1.4826 x the median absolute residual, the sd a normal scatter would have): a box
    measured while other jobs load it has outliers -- one round landing in a quiet minute --
    and a root-mean-square would let a few of them widen every band."""
    rows = list(rows)
    if not rows:
        return 0.04
    floor = float(np.median(prob.meas[rows]))
    robust = _robust_sd(prob, resid, shrink, rows)
    return floor if robust is None else max(floor, robust)
