"""A perturbed twin: the same physics with its constants and structure moved, seeded.

Why: a search benchmark that grades a pre-screen on the twin the pre-screen
itself uses grades it on its own answers. A *perturbed* twin is a plausible
other box -- as different from the fitted twin as the twin's own uncertainty
allows -- so "how many GPU-hours until the best config" is measured against a
truth the pre-screen does not share (issue 22's search benchmark).

    from sweep.sim.perturb import perturbed_calibration
    from sweep.sim.predict import predict_cells

    truth = perturbed_calibration(hardware, seed=3)                 # hardware: a composed hardware mapping
    cells = predict_cells(config, calibration=truth)                # the perturbed box's cells

What moves (``scale`` multiplies every spread; 1 = the twin's own uncertainty):

* **constants**: the fitted constants are drawn from the calibration's posterior
  (their covariance, in the log/logit space they are fitted in -- constants the
  data pinned move little, the ones at their priors move by their prior's
  width); an uncalibrated box draws from the priors;
* **structure**: the fixed constants that shape how the terms combine
  (``overlap_penalty``: how memory and compute overlap; ``tree_mask_penalty``;
  ``ep_imbalance_c`` and ``expert_skew_cv``: EP's busiest group;
  ``gemm_tile_rows``: the MoE kernel's row tile; ``tree_node_us``,
  ``tree_batch_scale``: tree building; ``custom_ar_max_mb``: where the custom
  all-reduce hands over to NCCL) each move by a log-normal factor of sd
  ``structure_sd`` x scale -- a box whose kernels behave differently, not only
  run faster or slower.

Deterministic per (calibration, seed, scale, structure_sd). The result is a
:class:`~sweep.sim.constants.Calibration`, so anything that takes
``calibration=`` (``predict``, ``predict_cells``, ``predict_coding``,
``cells.estimate(cal=...)``, the pre-screen's ``rank``) runs on it unchanged.
"""

from __future__ import annotations

import math
import random
from typing import Any, Mapping

from sweep.sim import constants as K
from sweep.sim.constants import Calibration

STRUCTURE = ("overlap_penalty", "tree_mask_penalty", "ep_imbalance_c", "expert_skew_cv", "gemm_tile_rows",
             "tree_node_us", "tree_batch_scale", "custom_ar_max_mb")
STRUCTURE_SD = 0.25


def _cholesky(cov: list[list[float]]) -> list[list[float]]:
    """Lower-triangular L with L L^T = cov (jitter for the near-singular rows a MAP fit leaves)."""
    n = len(cov)
    low = [[0.0] * n for _ in range(n)]
    for i in range(n):
        for j in range(i + 1):
            s = cov[i][j] - sum(low[i][k] * low[j][k] for k in range(j))
            if i == j:
                low[i][j] = math.sqrt(max(s, 1e-12))
            else:
                low[i][j] = s / low[j][j]
    return low


def perturbed_calibration(hardware: Mapping[str, Any], *, seed: int, scale: float = 1.0,
                          structure_sd: float = STRUCTURE_SD, base: Any = None) -> Calibration:
    """The box's twin (``base``: a Calibration, a path, 'none', or None for the box's own) with its
    constants drawn from its uncertainty and its structure moved; seeded."""
    if scale < 0 or structure_sd < 0:
        raise ValueError("perturbed_calibration: scale and structure_sd must be >= 0")
    cal = K.resolve(hardware, base)
    rng = random.Random(f"{seed}:{scale}:{structure_sd}:{cal.source}")
    values = dict(cal.values)
    if cal.names and cal.covariance:
        names = list(cal.names)
        cov = [list(row) for row in cal.covariance]
    else:  # uncalibrated: the priors' own widths, independent
        names = list(K.fitted_names("box") + K.fitted_names("model"))
        cov = [[float(K.prior(n, cal.kind)["sd"]) ** 2 if i == j else 0.0 for j in range(len(names))]
               for i, n in enumerate(names)]
    low = _cholesky(cov)
    eps = [rng.gauss(0.0, 1.0) for _ in names]
    for i, name in enumerate(names):
        if name not in values:
            continue
        kind = cal.kind if K.base_name(name) in K.fitted_names("box") else "nvlink"
        shift = scale * sum(low[i][k] * eps[k] for k in range(i + 1))
        values[name] = K.from_z(name, K.to_z(name, values[name], kind) + shift, kind)
    for name in STRUCTURE:
        if name in values:
            values[name] = values[name] * math.exp(rng.gauss(0.0, structure_sd * scale))
    values["gemm_tile_rows"] = max(1.0, values.get("gemm_tile_rows", 16.0))
    source = f"perturbed twin of {cal.source} (seed {seed}, scale {scale:g}, structure sd {structure_sd:g})"
    return Calibration(values=values, source=source, box=cal.box, path=cal.path, calibrated=cal.calibrated,
                       names=cal.names, covariance=cal.covariance, residual_sd=cal.residual_sd,
                       points=cal.points, key=("perturbed", seed, scale, structure_sd, cal.key), kind=cal.kind,
                       residual_by_kind=cal.residual_by_kind)
