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
from sweep.sim.scatter import measured_noise, model_error, noise_key, point_noise, residual_sd

STEP = 1e-3          # central-difference step in z space
MAX_STEP = 1.5       # largest change of any z in one LM step
SIG = 4              # significant digits written for constants
CHI2_TOL = 1e-3      # the fit stops when an LM step improves the chi-square by less


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
        self.measured_noise = measured_noise(self.points)
        self.meas = np.array([point_noise(p, self.measured_noise) for p in self.points])
        self.model_sd: dict[tuple[str, str], float] = {}  # (box, noise key) -> model error (2nd stage)
        self.noise = self.meas.copy()
        self.logm = np.array([math.log(p.measured) for p in self.points])
        # which points each parameter moves (model: its model's; box: that box's; workload: that workload's)
        self.touch = [[i for i, p in enumerate(self.points) if self.reaches(prm, p)] for prm in self.params]

    def weigh_model_error(self, model_sd: Mapping[tuple[str, str], float]) -> None:
        """Weigh each point by its measurement noise and its kind's model error together."""
        self.model_sd = dict(model_sd)
        self.noise = np.array([math.sqrt(m ** 2 + self.model_sd.get((p.box, noise_key(p)), 0.0) ** 2)
                               for p, m in zip(self.points, self.meas)])

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
        # a chi-square change below 1e-3 decides nothing: the rest is drift along flat directions
        done = cost - cost_new < CHI2_TOL
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
    """Two stages: weigh each point by its measurement noise (measured from the rounds where the
    points carry them), fit, and estimate per box and kind of point the model error -- the scatter
    the residuals show beyond that noise; then weigh by both and fit again (from there). The
    covariance of the second stage is honest about the misfit the model cannot remove."""
    prob = Problem(points)
    z0 = np.array([(start or {}).get(p.key, p.centre) for p in prob.params])
    z, iterations = _lm(prob, z0)
    model_sd = model_error(prob, z)
    if any(v > 0 for v in model_sd.values()):
        prob.weigh_model_error(model_sd)
        z, more = _lm(prob, z)
        iterations += more
    jac_d = prob.jacobian(z) / prob.noise[:, None]
    sd = np.array([p.sd for p in prob.params])
    cov = np.linalg.inv(jac_d.T @ jac_d + np.diag(1.0 / sd ** 2))
    shrink = 1.0 - np.diag(cov) / sd ** 2
    directions = int(np.sum(np.linalg.svd(jac_d * sd[None, :], compute_uv=False) > 1.0)) if len(points) else 0
    lp = prob.log_pred(z, rounded=True)
    resid = lp - prob.logm
    rsd = residual_sd(prob, resid, shrink, range(len(points)))
    model_sd = model_error(prob, z, resid, shrink)
    cals = {}
    for box in sorted(prob.boxes):
        idx = [i for i, p in enumerate(prob.params) if p.box in (None, box) and p.model == prob.model_of[box]]
        rows = [i for i, p in enumerate(points) if p.box == box]
        box_rsd = residual_sd(prob, resid, shrink, rows)
        kinds = sorted({points[i].kind for i in rows})
        by_kind = tuple((k, _round(residual_sd(prob, resid, shrink, [i for i in rows if points[i].kind == k])))
                        for k in kinds) if len(kinds) > 1 else ()
        seen = {tuple(sorted(K.figures_of(points[i].hardware).items())) for i in rows}
        cals[box] = Calibration(
            values=prob.values(z, box, rounded=True), source=f"calibrated: {box} (fit)", box=box,
            calibrated=True, names=tuple(prob.params[i].name for i in idx),
            covariance=tuple(tuple(float(f"{cov[i, j]:.3g}") + 0.0 for j in idx) for i in idx),
            residual_sd=_round(box_rsd), points=sum(p.box == box for p in points),
            key=("fit", box, tuple(float(x) for x in z)), kind=prob.boxes[box], residual_by_kind=by_kind,
            figures=seen.pop() if len(seen) == 1 else (),
            noise_by_kind=tuple((k, _round(v)) for (b, k), v in sorted(prob.measured_noise.items()) if b == box),
            model_by_kind=tuple((k, _round(v)) for (b, k), v in sorted(model_sd.items()) if b == box))
    return Fit(params=prob.params, z=z, cov=cov, shrink=shrink, calibrations=cals,
               predicted=[math.exp(x) for x in lp], residual_sd=rsd, directions=directions,
               iterations=iterations, boxes=dict(prob.boxes), model_of=dict(prob.model_of))


def band(point_fn: Callable[[Mapping[str, float]], Sequence[float]],
         cal: Calibration, z: float = 1.0, kind: str | Sequence[str] | None = None,
         repeats: int = 1, noise: Sequence[float | None] | None = None) -> list[tuple[float, float, float]]:
    """(value, low, high) per output of ``point_fn(constants)``: a +-z sigma band (z=1: 68%) for a
    measurement that is the mean of ``repeats`` runs. ``kind`` names each output's kind of point
    (one for all, or one per output; ``accept_len:<family>`` for accept lengths).

    In quadrature: the constants' posterior (the calibration's covariance pushed through numeric
    gradients: wide where the fit did not reach -- a layout, context or budget it never saw --,
    narrow near its points); the model's own error, the larger of what the fit's residuals show
    beyond the measurement noise (where it was measured) and what the fixed structure's
    uncertainty does to this figure (``structure_sd`` in priors.yaml: where it was not); and the
    noise of the measurement itself, one run's measured spread over ``repeats`` (``noise``, per
    output: the box's declared spread where the calibration measured none). A calibration without
    the split (one point on its box) takes its residual scatter as the model's error.
    """
    values = [float(v) for v in point_fn(cal.values)]
    kinds = [kind] * len(values) if kind is None or isinstance(kind, str) else list(kind)
    names = list(cal.names)
    if not names or not cal.covariance:
        return [(v, v, v) for v in values]
    grad = np.zeros((len(values), len(names)))
    for j, name in enumerate(names):
        if name not in cal.values:
            continue
        space = cal.kind if name in K.fitted_names("box") else "nvlink"
        zj = K.to_z(name, cal.values[name], space)
        up = point_fn({**cal.values, name: K.from_z(name, zj + STEP, space)})
        down = point_fn({**cal.values, name: K.from_z(name, zj - STEP, space)})
        for i, (u, d) in enumerate(zip(up, down)):
            if u > 0 and d > 0:
                grad[i, j] = (math.log(u) - math.log(d)) / (2 * STEP)
    structure = np.zeros(len(values))
    if cal.calibrated:  # the priors' own band already spans what nothing pinned
        for name, sd in (K.priors().get("structure_sd") or {}).items():
            v = cal.values.get(name)
            if not v or v <= 0:
                continue
            up = point_fn({**cal.values, name: v * math.exp(STEP)})
            down = point_fn({**cal.values, name: v * math.exp(-STEP)})
            for i, (u, d) in enumerate(zip(up, down)):
                if u > 0 and d > 0:
                    structure[i] += ((math.log(u) - math.log(d)) / (2 * STEP) * float(sd)) ** 2
    cov = np.array(cal.covariance)
    out = []
    for i, v in enumerate(values):
        extra = cal.unexplained(kinds[i], repeats, (noise or [None] * len(values))[i],
                                structure=math.sqrt(structure[i]))
        sigma = math.sqrt(max(0.0, float(grad[i] @ cov @ grad[i]) + extra ** 2))
        out.append((v, v * math.exp(-z * sigma), v * math.exp(z * sigma)))
    return out
