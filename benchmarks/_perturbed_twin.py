"""A truth the pre-screen does not share: the twin with its constants *and* its structure moved.

Grading a twin-guided search on the twin that guides it measures nothing but
the twin's agreement with itself. This truth starts from the shipped
calibration and, per seed, changes what the pre-screen's twin believes, through
the simulator's public API only (``sweep.sim.predict.predict`` with the
``Calibration`` of ``sweep.sim.perturb``), plus two changes the twin's model has
no term for:

* **constants and the model's fixed structure**: ``sweep.sim.perturb.perturbed_calibration``
  (the twin's own machinery: fitted constants drawn from the calibration's
  posterior, the fixed constants that shape how its terms combine moved by a
  log-normal factor), scaled by ``sigma`` / 0.2;
* **acceptance curve shape**: accept length - 1 scaled by (verify width / 8)
  ** kappa (kappa seeded in [-0.25, 0.25]: acceptance grows faster or slower
  with the draft's width than the twin says) and decayed with context
  (1 - d * min(1, context / 8192), d in [0, 0.2]);
* **an extra per-step cost**: a + b * running requests * verify width ms per
  step (a in [0, 0.3] ms, b in [0, 0.002] ms per verified token), which the
  twin's step model has no term for -- it charges wide trees at high load.

A cell's figures are recomputed from the twin's own decomposition (TTFT,
decode time = e2e - TTFT, steps = tokens / accept length): decode time =
steps' x (step time + extra), output tok/s scaled by the cell's time ratio.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any, Mapping, Sequence


@dataclass(frozen=True)
class Perturbation:
    seed: int
    sigma: float = 0.2

    def _rng(self, what: str) -> random.Random:
        return random.Random(f"perturbed-twin:{self.seed}:{what}")

    @property
    def kappa(self) -> float:
        return self._rng("kappa").uniform(-0.25, 0.25)

    @property
    def decay(self) -> float:
        return self._rng("decay").uniform(0.0, 0.2)

    @property
    def extra_a_ms(self) -> float:
        return self._rng("extra_a").uniform(0.0, 0.3)

    @property
    def extra_b_ms(self) -> float:
        return self._rng("extra_b").uniform(0.0, 0.002)

    def label(self) -> str:
        return (f"perturbed twin seed {self.seed}: constants and structure from sweep.sim.perturb "
                f"(scale {self.sigma / 0.2:g}), accept x (W/8)^"
                f"{self.kappa:+.2f}, context decay {self.decay:.2f}, extra step cost {self.extra_a_ms:.2f} ms + "
                f"{self.extra_b_ms * 1000:.2f} us x running x width")

    def calibration(self, hardware: Mapping[str, Any]) -> Any:
        """The box's twin with its fitted constants drawn from their uncertainty and its fixed
        structure moved: the simulator's own perturbed twin (``sweep.sim.perturb``), seeded per box;
        ``sigma`` / 0.2 scales its spreads."""
        from sweep.sim.perturb import perturbed_calibration

        return perturbed_calibration(hardware, seed=self.seed, scale=self.sigma / 0.2)

    def cells(self, cells: Sequence[Mapping[str, Any]], max_tokens: int, spec_on: bool) -> list[dict[str, Any]]:
        """The twin's predicted cells with the structural changes applied (module docstring)."""
        out = []
        n = max(2, int(max_tokens))
        for c in cells:
            acc = float(c.get("accept_len") or 1.0) if spec_on else 1.0
            width = max(1.0, float(c.get("verify_width") or 1.0))
            ttft, e2e = float(c["ttft_ms_p50"]), float(c["e2e_ms_p50"])
            gen = max(1e-6, e2e - ttft)
            step = gen / (n / acc)
            if spec_on:
                shaped = (acc - 1.0) * (width / 8.0) ** self.kappa * (1.0 - self.decay * min(1.0, c["context"] / 8192))
                acc2 = 1.0 + max(0.0, min(shaped, width))
            else:
                acc2 = 1.0
            running = float(c.get("running") or c["concurrency"])
            gen2 = n / acc2 * (step + self.extra_a_ms + self.extra_b_ms * running * width)
            ratio = (ttft + gen) / (ttft + gen2)
            row = dict(c)
            row.update(output_tok_s=float(c["output_tok_s"]) * ratio, per_stream_tok_s=n / gen2 * 1000.0,
                       tpot_ms_p50=gen2 / (n - 1), e2e_ms_p50=ttft + gen2,
                       accept_len=acc2 if spec_on else c.get("accept_len"))
            out.append(row)
        return out


def truth_prediction(cfg: Mapping[str, Any], perturb: Perturbation | None) -> dict[str, Any]:
    """``sweep.sim.predict.predict`` of the composed config, on the perturbed twin when given."""
    from sweep.sim.predict import predict

    if perturb is None:
        return predict(cfg)
    pred = predict(cfg, calibration=perturb.calibration(cfg["hardware"]))
    if pred["failure"]:
        return pred
    spec_on = (cfg.get("spec") or {}).get("algorithm") not in (None, "none")
    pred["cells"] = perturb.cells(pred["cells"], int(cfg["workload"]["max_tokens"]), spec_on)
    pred["calibration"] = perturb.label()
    return pred


def spread(values: Sequence[float]) -> float:
    """Geometric sd of a list of positive ratios (how far a truth moved a landscape)."""
    logs = [math.log(v) for v in values if v > 0]
    if len(logs) < 2:
        return 0.0
    m = sum(logs) / len(logs)
    return math.exp(math.sqrt(sum((x - m) ** 2 for x in logs) / (len(logs) - 1))) - 1.0
