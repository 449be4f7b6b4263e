"""Run-to-run noise of the simulator: a slow, seeded drift of the box's speed.

Without it the sim is noise-free: a config measured twice gives the same
figures to the last digit (step times are a pure function of the config, and
acceptance draws are seeded by the prompt), so "tied within noise" and
``workload.repeats`` would have nothing to measure. A real box is not like
that: the two B300 runs of the same config in benchmarks/measured/ differ by
6% at C=1 (285.4 vs 303 tok/s) -- clocks, temperature, other tenants of the
PCIe/NVLink fabric, the host's own load. How large it is on other boxes is
unknown, so it is a knob (``server.sim.noise``, default 0.02).

The model: every step and prefill time is multiplied by ``exp(x(t))`` where
x is an Ornstein-Uhlenbeck process over *simulated* time with stationary
standard deviation ``sigma`` and correlation time ``tau`` (10 s): the box is
a little faster or slower for a while, so a few-second cell sees about
``sigma`` of spread and a minute-long one less (:func:`cell_sd`). Seeded by
the sim seed and the server's own command line, so a run is reproducible,
two configs get independent noise and repeats within one server differ;
``server.sim.seed`` gives another realisation. The calibration and the twin's
predictions (``sweep.sim.cells``, ``predict``) stay noise-free.
"""

from __future__ import annotations

import math
import random
import zlib

TAU_S = 10.0  # correlation time of the drift, simulated seconds


class Drift:
    """The speed factor of one server: ``factor(ms)`` advances it by a step of ``ms``."""

    def __init__(self, sigma: float, seed: int | str, tau_s: float = TAU_S) -> None:
        self.sigma = max(0.0, float(sigma))
        self.tau_s = float(tau_s)
        key = seed if isinstance(seed, int) else zlib.crc32(str(seed).encode())
        self._rng = random.Random(key)
        self.x = self._rng.gauss(0.0, self.sigma) if self.sigma > 0 else 0.0

    def factor(self, ms: float) -> float:
        """The factor for a step of ``ms`` simulated milliseconds (then the drift moves on)."""
        if self.sigma <= 0:
            return 1.0
        f = math.exp(self.x)
        keep = math.exp(-max(0.0, ms) / 1000.0 / self.tau_s)
        self.x = self.x * keep + self.sigma * math.sqrt(1.0 - keep * keep) * self._rng.gauss(0.0, 1.0)
        return f


def cell_sd(sigma: float, duration_s: float, tau_s: float = TAU_S) -> float:
    """Standard deviation of the drift averaged over a cell of ``duration_s`` (log scale).

    Variance of the time average of an OU process over D: sigma^2 * 2 (u - 1 + e^-u) / u^2
    with u = D / tau (-> sigma^2 for short cells, sigma^2 * 2 tau / D for long ones).
    """
    u = max(1e-9, float(duration_s) / tau_s)
    return float(sigma) * math.sqrt(2.0 * (u - 1.0 + math.exp(-u)) / (u * u))
