"""Is the box a prediction is asked about in the state the twin was fitted in?

A calibration fitted on a busy box predicts a busy box: issue 41's vLLM calibration, fitted on
cells whose load average was 6.2 on 2 cores, predicted a quiet box 31-43% low with 80% bands
that missed every point. The calibration carries the state of its measurements
(``box_state``: sweep/sim/calfile.py); this module compares it with the box now and says, in one
line, whether the prediction stands, is widened, or is refused:

* **load** (a CPU box: the twin of this machine, the one ``python -m sweep.sim.predict`` runs
  on): the load per core the fitted points saw, ``max(1, load_avg_median / cpus)`` (a load
  above the cores means tasks queued for a core), against the load per core a run would see now,
  ``max(1, 1 + others_cpu / cpus)`` with ``others_cpu`` the other work on this machine's cores
  over half a second (sweep/bench/boxstate.py). Differing by more than :data:`LOAD_RATIO`, the
  band is **widened**: half the log of the ratio is added to its log-sd, in quadrature (the
  issue's case, 3.1 against 1.0, adds 0.57).
* **probe** (a config that runs on its own figures, ``hardware.perf.figures=config``: the
  machine re-probed): its figures against those the calibration was fitted with. Beyond
  :data:`PROBE_REFUSE` the efficiencies describe another machine: **refused**; beyond
  :data:`PROBE_WIDEN`, widened by the log of the ratio.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping

LOAD_RATIO = 1.25      # load per core, fitted vs now, beyond which the states differ
PROBE_WIDEN = 0.10     # relative difference of a probe figure that widens the band
PROBE_REFUSE = 0.25    # ... and that refuses to predict
Z80 = 1.2816           # an 80% band's half-width in sd (BAND_LEVEL)


@dataclass(frozen=True)
class Verdict:
    action: str        # widen | refuse
    sd: float          # log-sd added to the band (widen)
    line: str          # one line: what differs and what was done


def _load_per_core(load: float, cpus: int) -> float:
    return max(1.0, load / max(1, cpus))


def judge(cal: Any, hardware: Mapping[str, Any], here: Callable[[], Mapping[str, Any]] | None = None
          ) -> Verdict | None:
    """What a prediction with ``cal`` for ``hardware`` should do (None: the states agree, or the
    calibration does not say what its box was doing). ``here``: the box's state now (default:
    :class:`sweep.bench.boxstate.Watch` over half a second on this machine)."""
    state = dict(getattr(cal, "box_state", None) or {})
    perf = hardware.get("perf") or {}
    figures = dict(getattr(cal, "figures", ()) or ())
    if str(perf.get("figures") or "config") == "config" and figures:
        worst, name = 0.0, ""
        for key in ("mem_bw_tbs", "matmul_tflops"):
            a, b = perf.get(key), figures.get(key)
            if isinstance(a, (int, float)) and isinstance(b, (int, float)) and a > 0 and b > 0:
                if abs(math.log(a / b)) > abs(worst):
                    worst, name = math.log(a / b), key
        if abs(worst) > math.log(1 + PROBE_REFUSE):
            return Verdict("refuse", 0.0, f"refused: hardware.perf.{name} is {100 * (math.exp(worst) - 1):+.0f}% "
                           f"off the figures the calibration was fitted with ({cal.source}): another machine, "
                           f"or this one in another state; re-record and recalibrate it, or use figures=calibration")
        if abs(worst) > math.log(1 + PROBE_WIDEN):
            return Verdict("widen", abs(worst), f"band widened: hardware.perf.{name} is "
                           f"{100 * (math.exp(worst) - 1):+.0f}% off the calibration's figures "
                           f"(log-sd +{abs(worst):.2f})")
    cpus, load = state.get("cpus"), state.get("load_avg_median")
    if getattr(cal, "kind", "") != "cpu" or not cpus or load is None:
        return None
    if here is None:
        from sweep.bench.boxstate import Watch

        def here() -> Mapping[str, Any]:
            return Watch(gpus=False).now(0.5)

    now = here()
    others = now.get("others_cpu")
    if not isinstance(others, (int, float)):
        return None
    then_pc = _load_per_core(float(load), int(cpus))
    now_pc = max(1.0, 1.0 + float(others) / max(1, int(now.get("cpus") or cpus)))
    ratio = then_pc / now_pc
    if abs(math.log(ratio)) <= math.log(LOAD_RATIO):
        return None
    sd = 0.5 * abs(math.log(ratio))
    fitted = (f"fitted on a box at load average {load:g} on {cpus} cores"
              + (f", {100 * state['busy_share']:.0f}% of its cells busy" if "busy_share" in state else ""))
    return Verdict("widen", sd, f"band widened: the calibration was {fitted} ({then_pc:.1f} per core); this box now "
                   f"has {others:.2f} cores of other work ({now_pc:.1f} per core): another state, so the band's "
                   f"log-sd +{sd:.2f} (sweep/sim/boxcheck.py)")


def widen(pred: dict[str, Any], sd: float) -> None:
    """The prediction's tok/s bands widened by ``sd`` (log scale, in quadrature with their own)."""
    for cell in pred.get("cells") or []:
        for name in ("output_tok_s", "per_stream_tok_s"):
            value, low, high = cell.get(name), cell.get(f"{name}_low"), cell.get(f"{name}_high")
            if not all(isinstance(v, (int, float)) and v > 0 for v in (value, low, high)):
                continue
            for side, sign in (("low", -1), ("high", 1)):
                edge = cell[f"{name}_{side}"]
                half = abs(math.log(edge / value))
                cell[f"{name}_{side}"] = value * math.exp(sign * math.hypot(half, Z80 * sd))
