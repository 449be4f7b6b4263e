"""Fitting the twin's free constants to measured points (maximum a posteriori).

Each free constant has a prior (``priors.yaml``: a centre and a width in log
or logit space). The fit minimises

    sum_points ((log predicted - log measured) / noise)^2  +  sum_constants ((z - z_prior) / sd)^2

with Levenberg-Marquardt on numeric (central-difference) derivatives, so a
constant the points cannot see stays at its prior instead of wandering off
to reproduce noise. Box constants are fitted per box, the acceptance
constants once for all boxes (they describe the model and its drafter).
From the curvature at the optimum: the posterior covariance (for
uncertainty bands), and per constant how much the data moved its
uncertainty below the prior's -- "fitted" (>= 50% of the variance explained
by the data), "weak", or "prior" (the points cannot identify it).

numpy only, deterministic: the same points give the same constants.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import numpy as np

from sweep.sim import constants as K
from sweep.sim.constants import Calibration
from sweep.sim.measured import Point, predict_point

STEP = 1e-3          # central-difference step in z space
MAX_STEP = 1.5       # largest change of any z in one LM step
SIG = 4              # significant digits written for constants


@dataclass(frozen=True)
class Param:
    name: str            # per-workload constants carry their workload: ngram_hit@edit
    box: str | None      # None = shared by every box (model and workload constants)
    centre: float        # prior centre (z space)
    sd: float            # prior width (z space)
    kind: str = "nvlink"  # whose priors and transform (the box's kind)
    model: str = ""       # the model its points run (model and workload constants are per model)

    @property
    def key(self) -> str:
        return f"{self.box or self.model or 'model'}.{self.name}"

    @property
    def workload(self) -> str | None:
        return self.name.split(K.WL, 1)[1] if K.WL in self.name else None


@dataclass
class Fit:
    params: list[Param]
    z: np.ndarray
    cov: np.ndarray
    shrink: np.ndarray                   # 1 - posterior var / prior var, per param
    calibrations: dict[str, Calibration]  # per box, constants rounded as written
    predicted: list[float]               # per point, with the rounded constants
    residual_sd: float
    directions: int                      # data-determined directions in the constant space
    iterations: int
    boxes: dict[str, str] = field(default_factory=dict)  # box -> kind (nvlink, pcie, cpu)
    model_of: dict[str, str] = field(default_factory=dict)  # box -> the model its points run

    def box_params(self, box: str) -> list[int]:
        """Indices of the parameters a box's calibration carries (its own, its model's, its workloads')."""
        return [i for i, p in enumerate(self.params) if p.box in (None, box) and p.model == self.model_of[box]]

    def status(self, i: int) -> str:
        s = self.shrink[i]
        return "fitted" if s >= 0.5 else ("weak" if s >= 0.1 else "prior")


def _noise(kind: str) -> float:
    table = K.priors()["noise"]
    return float(table["accept_len"] if kind == "accept_len" else table["tok_s"])


def _point_noise(p: Point) -> float:
    """A point's weight in the fit: the prior noise, or its own measured spread when larger
    (the standard error of the mean of its repeats, from ``runs``)."""
    floor = _noise(p.kind)
    runs = [math.log(v) for v in p.runs if v and v > 0]
    if len(runs) < 2:
        return floor
    mean = sum(runs) / len(runs)
    sd = math.sqrt(sum((r - mean) ** 2 for r in runs) / (len(runs) - 1))
    return max(floor, sd / math.sqrt(len(runs)))


def _round(x: float) -> float:
    return float(f"{x:.{SIG}g}")


# Which per-workload constants a point's speculative family reads.
CHAIN_CONSTANTS = {"ngram": ("ngram_hit", "ngram_cont", "ngram_q"), "draft": ("draft_cont", "draft_q")}


# Box constants no term reads on a kind of box (a CPU box has no link).
IRRELEVANT = {"cpu": ("link_latency_factor", "link_bw_eff", "a2a_overhead_us")}


def _is_moe(p: Point) -> bool:
    from sweep.sim.arch import shape

    return shape(p.model)["moe_layers"] > 0 and shape(p.model)["experts"] > 0


def model_name(p: Point) -> str:
    return str(p.model.get("name") or "?")


def _family(p: Point) -> str:
    from sweep.sim.accept import family

    return family(p.spec)


class Problem:
    """The points, the parameter vector and the map from it to each box's constants."""

    def __init__(self, points: Sequence[Point]) -> None:
        self.points = list(points)
        self.boxes: dict[str, str] = {}
        self.model_of: dict[str, str] = {}   # box -> model (one model per box)
        for p in self.points:
            self.boxes.setdefault(p.box, K.kind_of(p.hardware))
            self.model_of.setdefault(p.box, model_name(p))
        self.params: list[Param] = []
        for model in sorted(set(self.model_of.values())):
            pts = [p for p in self.points if model_name(p) == model]
            # the drafter constants only where a point drafts with DFlash/DDTree/EAGLE
            if any(_family(p) in ("ddtree", "dflash", "eagle") for p in pts):
                self.params += [Param(n, None, K.to_z(n, K.prior(n)["value"]), float(K.prior(n)["sd"]),
                                      model=model) for n in K.fitted_names("model")]
            wanted: dict[str, set[str]] = {}
            for p in pts:
                for n in CHAIN_CONSTANTS.get(_family(p), ()):
                    if n == "draft_cont" and not (p.spec.get("draft_p_min") or 0):
                        continue  # no probability floor: a draft model always drafts its budget
                    wanted.setdefault(p.workload or "default", set()).add(n)
            for wl in sorted(wanted):
                self.params += [Param(f"{n}{K.WL}{wl}", None, K.to_z(n, K.prior(n)["value"]),
                                      float(K.prior(n)["sd"]), model=model)
                                for n in K.fitted_names("workload") if n in wanted[wl]]
        for box, kind in sorted(self.boxes.items()):
            moe = any(_is_moe(p) for p in self.points if p.box == box)
            for n in K.fitted_names("box"):
                if n in IRRELEVANT.get(kind, ()) or (not moe and n == "moe_mem_eff"):
                    continue  # no term of this box reads it: it keeps its prior, and the fit its time
                pr = K.prior(n, kind)
                self.params.append(Param(n, box, K.to_z(n, float(pr["value"]), kind), float(pr["sd"]), kind,
                                         model=self.model_of[box]))
        self.base = {box: K.prior_values(kind) for box, kind in self.boxes.items()}
        self.noise = np.array([_point_noise(p) for p in self.points])
        self.logm = np.array([math.log(p.measured) for p in self.points])
        # which points each parameter moves (model: its model's; box: that box's; workload: that workload's)
        self.touch = [[i for i, p in enumerate(self.points) if self.reaches(prm, p)] for prm in self.params]

    def reaches(self, prm: Param, p: Point) -> bool:
        return prm.box in (None, p.box) and prm.model == model_name(p) \
            and prm.workload in (None, p.workload or "default")

    def values(self, z: np.ndarray, box: str, rounded: bool = False) -> dict[str, float]:
        vals = dict(self.base[box])
        for prm, zi in zip(self.params, z):
            if prm.box in (None, box) and prm.model == self.model_of[box]:
                v = K.from_z(prm.name, float(zi), prm.kind)
                vals[prm.name] = _round(v) if rounded else v
        return vals

    def log_pred(self, z: np.ndarray, idx: Sequence[int] | None = None, rounded: bool = False) -> np.ndarray:
        idx = range(len(self.points)) if idx is None else idx
        cache: dict[str, dict[str, float]] = {}
        out = []
        for i in idx:
            p = self.points[i]
            vals = cache.setdefault(p.box, self.values(z, p.box, rounded))
            pred = predict_point(p, vals)
            out.append(math.log(pred) if pred > 0 and math.isfinite(pred) else -50.0)
        return np.array(out)

    def residuals(self, z: np.ndarray, lp: np.ndarray) -> np.ndarray:
        centre = np.array([p.centre for p in self.params])
        sd = np.array([p.sd for p in self.params])
        return np.concatenate([(lp - self.logm) / self.noise, (z - centre) / sd])

    def jacobian(self, z: np.ndarray) -> np.ndarray:
        """d(log prediction)/dz for every point and parameter (zero where a constant cannot reach)."""
        jac = np.zeros((len(self.points), len(self.params)))
        for j, rows in enumerate(self.touch):
            if not rows:
                continue
            up, down = z.copy(), z.copy()
            up[j] += STEP
            down[j] -= STEP
            jac[rows, j] = (self.log_pred(up, rows) - self.log_pred(down, rows)) / (2 * STEP)
        return jac


def _lm(prob: Problem, z: np.ndarray, max_iter: int = 60) -> tuple[np.ndarray, int]:
    sd = np.array([p.sd for p in prob.params])
    prior_j = np.diag(1.0 / sd)
    lp = prob.log_pred(z)
    r = prob.residuals(z, lp)
    cost = float(r @ r)
    lam = 1e-2
    it = 0
    for it in range(1, max_iter + 1):
        jac = np.vstack([prob.jacobian(z) / prob.noise[:, None], prior_j])
        g = jac.T @ r
        h = jac.T @ jac
        improved = False
        while lam < 1e8:
            delta = np.linalg.solve(h + lam * np.diag(np.diag(h)), -g)
            scale = max(1.0, float(np.max(np.abs(delta))) / MAX_STEP)
            z_new = z + delta / scale
            lp_new = prob.log_pred(z_new)
            r_new = prob.residuals(z_new, lp_new)
            cost_new = float(r_new @ r_new)
            if cost_new < cost:
                improved = True
                lam = max(lam / 3.0, 1e-7)
                break
            lam *= 4.0
        if not improved:
            break
        done = cost - cost_new < 1e-9 * max(1.0, cost) and float(np.max(np.abs(z_new - z))) < 1e-5
        z, r, cost = z_new, r_new, cost_new
        if done:
            break
    return z, it


def fit(points: Sequence[Point], start: dict[str, float] | None = None) -> Fit:
    """The MAP constants for these points (``start``: z values by param key, to warm-start).

    Points of different models share no constant (every box holds one model), so each
    model's points are fitted on their own -- one model's large misfit (a noisy CPU box)
    must not decide when another's optimisation stops -- and the results are joined."""
    models = sorted({model_name(p) for p in points})
    if len(models) > 1:
        parts = [(m, [i for i, p in enumerate(points) if model_name(p) == m]) for m in models]
        return _join(points, [(idx, _fit_one([points[i] for i in idx], start)) for _, idx in parts])
    return _fit_one(points, start)


def _join(points: Sequence[Point], parts: list[tuple[list[int], Fit]]) -> Fit:
    """One Fit from independent ones (block-diagonal covariance, predictions in point order)."""
    n = sum(len(f.params) for _, f in parts)
    cov = np.zeros((n, n))
    predicted = [0.0] * len(points)
    offset = 0
    for idx, f in parts:
        k = len(f.params)
        cov[offset:offset + k, offset:offset + k] = f.cov
        offset += k
        for i, v in zip(idx, f.predicted):
            predicted[i] = v
    logs = np.array([math.log(v / p.measured) for v, p in zip(predicted, points)])
    dof = max(1.0, len(points) - float(sum(np.sum(f.shrink) for _, f in parts)))
    return Fit(params=[p for _, f in parts for p in f.params], z=np.concatenate([f.z for _, f in parts]),
               cov=cov, shrink=np.concatenate([f.shrink for _, f in parts]),
               calibrations={b: c for _, f in parts for b, c in f.calibrations.items()},
               predicted=predicted, residual_sd=math.sqrt(float(logs @ logs) / dof),
               directions=sum(f.directions for _, f in parts), iterations=max(f.iterations for _, f in parts),
               boxes={b: k for _, f in parts for b, k in f.boxes.items()},
               model_of={b: m for _, f in parts for b, m in f.model_of.items()})


def _fit_one(points: Sequence[Point], start: dict[str, float] | None = None) -> Fit:
    prob = Problem(points)
    z0 = np.array([(start or {}).get(p.key, p.centre) for p in prob.params])
    z, iterations = _lm(prob, z0)
    jac_d = prob.jacobian(z) / prob.noise[:, None]
    sd = np.array([p.sd for p in prob.params])
    cov = np.linalg.inv(jac_d.T @ jac_d + np.diag(1.0 / sd ** 2))
    shrink = 1.0 - np.diag(cov) / sd ** 2
    directions = int(np.sum(np.linalg.svd(jac_d * sd[None, :], compute_uv=False) > 1.0)) if len(points) else 0
    lp = prob.log_pred(z, rounded=True)
    resid = lp - prob.logm
    rsd = _residual_sd(prob, resid, shrink, range(len(points)))
    cals = {}
    for box in sorted(prob.boxes):
        idx = [i for i, p in enumerate(prob.params) if p.box in (None, box) and p.model == prob.model_of[box]]
        rows = [i for i, p in enumerate(points) if p.box == box]
        box_rsd = _residual_sd(prob, resid, shrink, rows)
        kinds = sorted({points[i].kind for i in rows})
        by_kind = tuple((k, _round(_residual_sd(prob, resid, shrink, [i for i in rows if points[i].kind == k])))
                        for k in kinds) if len(kinds) > 1 else ()
        cals[box] = Calibration(
            values=prob.values(z, box, rounded=True), source=f"calibrated: {box} (fit)", box=box,
            calibrated=True, names=tuple(prob.params[i].name for i in idx),
            covariance=tuple(tuple(float(f"{cov[i, j]:.3g}") + 0.0 for j in idx) for i in idx),
            residual_sd=_round(box_rsd), points=sum(p.box == box for p in points),
            key=("fit", box, tuple(float(x) for x in z)), kind=prob.boxes[box], residual_by_kind=by_kind)
    return Fit(params=prob.params, z=z, cov=cov, shrink=shrink, calibrations=cals,
               predicted=[math.exp(x) for x in lp], residual_sd=rsd, directions=directions,
               iterations=iterations, boxes=dict(prob.boxes), model_of=dict(prob.model_of))


def _residual_sd(prob: Problem, resid: np.ndarray, shrink: np.ndarray, rows: Sequence[int]) -> float:
    """The fit's residual scatter over ``rows`` (log sd), corrected for the degrees of freedom
    the constants took from them (a shared constant's share in proportion to the rows it reaches);
    never below the points' own noise.

    Robust (1.4826 x the median absolute residual, the sd a normal scatter would have): a box
    measured while other jobs load it has outliers -- one round landing in a quiet minute --
    and a root-mean-square would let a few of them widen every band."""
    rows = list(rows)
    if not rows:
        return 0.04
    floor = float(np.median(prob.noise[rows]))
    mine = set(rows)
    used = sum(float(shrink[j]) * len(mine.intersection(reach)) / len(reach)
               for j, reach in enumerate(prob.touch) if reach)
    dof = len(rows) - used
    if dof < 1:
        return floor
    robust = 1.4826 * float(np.median(np.abs(resid[rows]))) * math.sqrt(len(rows) / dof)
    return max(floor, robust)


def band(point_fn: Callable[[Mapping[str, float]], Sequence[float]],
         cal: Calibration, z: float = 1.0, kind: str | None = None) -> list[tuple[float, float, float]]:
    """(value, low, high) per output of ``point_fn(constants)``: a +-z sigma band (z=1: 68%).

    Propagates the calibration's posterior covariance (log/logit space) through
    numeric gradients and adds its residual scatter: wide where the fit did not
    reach (a layout, context or budget it never saw), narrow near its points.
    """
    values = [float(v) for v in point_fn(cal.values)]
    names = list(cal.names)
    if not names or not cal.covariance:
        return [(v, v, v) for v in values]
    grad = np.zeros((len(values), len(names)))
    for j, name in enumerate(names):
        if name not in cal.values:
            continue
        kind = cal.kind if name in K.fitted_names("box") else "nvlink"
        z = K.to_z(name, cal.values[name], kind)
        up = point_fn({**cal.values, name: K.from_z(name, z + STEP, kind)})
        down = point_fn({**cal.values, name: K.from_z(name, z - STEP, kind)})
        for i, (u, d) in enumerate(zip(up, down)):
            if u > 0 and d > 0:
                grad[i, j] = (math.log(u) - math.log(d)) / (2 * STEP)
    cov = np.array(cal.covariance)
    out = []
    for i, v in enumerate(values):
        sigma = math.sqrt(max(0.0, float(grad[i] @ cov @ grad[i]) + cal.residual(kind) ** 2))
        out.append((v, v * math.exp(-z * sigma), v * math.exp(z * sigma)))
    return out
