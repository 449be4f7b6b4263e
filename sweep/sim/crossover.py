"""The per-load schedule of one speculative family, predicted from a few measured points.

Which budget of a family (one method, its other knobs fixed, the budget varied) wins at which
load, and from which load on speculation stops paying, without measuring every budget at every
load: the twin (calibrated on the few points measured) predicts each budget's tok/s at each load,
with the acceptance of the budgets not measured carried over from the per-position acceptance of
the one measured (sweep/sim/budgets.py: measure once at the largest budget). What it needs:

* the autoregressive baseline and the family's largest budget measured at the loads (a box
  calibration fitted on them: ``python -m sweep.calibrate``), and
* that budget's per-position acceptance (a result.json's ``acceptance.metrics.per_position``, or
  a recorded landscape's runs).

    from sweep.sim.crossover import predict_family, per_load_table
    fam = predict_family({0: cfg_none, 1: cfg_b1, 2: cfg_b2, 4: cfg_b4, 8: cfg_b8}, profile=prof,
                         calibration=cal)          # budget -> composed config (0: the baseline)
    fam.levels                                     # per load: each budget's tok/s and band, the best
    per_load_table(fam.levels, max_batch=256)      # [[from, to, K], ...]: vLLM's
                                                   # num_speculative_tokens_per_batch_size (K 0: none)
    measuring_hours(cells, workload)               # what measuring cells costs, in GPU-hours

``python -m sweep.sim.predict ... --budgets 1,2,4,8 --acceptance RESULT`` prints it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from sweep.sim.budgets import Profile

RESTART_S = 150.0  # a server restart on the article's box (Kimi K2.6 on B300: load + graph capture)


@dataclass
class Level:
    """One load: every budget's predicted tok/s (value, low, high), the best and its margin."""

    load: int
    tok_s: dict[int, tuple[float, float, float]] = field(default_factory=dict)

    @property
    def best(self) -> int:
        """The budget with the highest predicted tok/s (0: the autoregressive baseline)."""
        return max(self.tok_s, key=lambda b: (self.tok_s[b][0], -b))

    @property
    def margin(self) -> float:
        """The best's predicted tok/s over the runner-up's (1.0: a tie)."""
        vals = sorted((v[0] for v in self.tok_s.values()), reverse=True)
        return vals[0] / vals[1] if len(vals) > 1 and vals[1] > 0 else float("inf")

    @property
    def speedup(self) -> float | None:
        base = self.tok_s.get(0)
        return self.tok_s[self.best][0] / base[0] if base and base[0] > 0 else None

    def tied(self, margin: float) -> list[int]:
        """The budgets a measurement could not tell from the best: within ``margin`` (log) of it."""
        top = self.tok_s[self.best][0]
        return sorted(b for b, v in self.tok_s.items() if v[0] > 0 and math.log(top / v[0]) <= margin)


def tie_margin(noise: float, repeats: int) -> float:
    """How far apart (log) two configs' predicted tok/s must be for ``repeats`` runs of each to tell
    them apart with the schedule's rule (their 95% intervals do not overlap: sweep.score.noise), one
    run scattering ``noise`` (log sd, the box's measured spread). As that rule does: one or two runs
    are judged with the box's spread and the normal quantile, three or more with the t-quantile."""
    from sweep.stats import Z975, t975

    n = max(1, int(repeats))
    q = Z975 if n <= 2 else t975(n - 1)
    return 2.0 * q * noise / math.sqrt(n)


@dataclass
class Family:
    levels: list[Level]
    accept: dict[int, float]                 # budget -> the accept length the prediction used (its cells' mean)
    calibration: str
    profile_budget: int | None = None        # the measured budget the acceptance came from

    @property
    def stops_paying(self) -> int | None:
        """The lowest load from which on the baseline is predicted best at every load (None: never)."""
        return self.stops_paying_within(0.0)

    def stops_paying_within(self, margin: float) -> int | None:
        """The lowest load from which on the baseline is predicted best or within ``margin`` (log) of
        the best at every load -- where measuring could not show speculation paying (None: never)."""
        out = None
        for lv in reversed(self.levels):
            if 0 not in lv.tied(margin):
                break
            out = lv.load
        return out


def with_profile(config: Mapping[str, Any], prof: Profile | None, model: str = "span") -> dict[str, Any]:
    """The config with the measured acceptance as the spec's (sweep.sim.accept reads ``accept_*``)."""
    cfg = dict(config)
    if prof is None:
        return cfg
    spec = dict(cfg.get("spec") or {})
    spec.update({"accept_profile": list(prof.p), "accept_share": prof.share if prof.share else 1.0,
                 "accept_drafted": prof.drafted or 0.0, "accept_model": model})
    cfg["spec"] = spec
    return cfg


def with_profile_points(points: Sequence[Any], prof: Profile | None, model: str = "span") -> list[Any]:
    """Measured points (sweep.sim.measured.Point) of the config the profile was measured on, carrying
    it: the fit then prices their steps with the widths and acceptance that config really had."""
    if prof is None:
        return list(points)
    from dataclasses import replace

    out = []
    for p in points:
        spec = with_profile({"spec": p.spec}, prof, model)["spec"]
        out.append(replace(p, spec=spec, composed=with_profile(p.composed, prof, model) if p.composed else p.composed))
    return out


def predict_family(configs: Mapping[int, Mapping[str, Any]], *, profile: Profile | None = None,
                   calibration: Any = None, model: str = "span", level: float = 0.8) -> Family:
    """Each budget's cells (``configs``: budget -> composed config, 0 the baseline; the same workload),
    the acceptance of budgets up to the profile's from the profile, the rest from the twin's own."""
    from sweep.sim.prediction import predict

    by_load: dict[int, Level] = {}
    accept: dict[int, float] = {}
    source = ""
    for budget, cfg in sorted(configs.items()):
        use = profile if profile is not None and 0 < budget <= profile.budget else None
        got = predict(with_profile(cfg, use, model), calibration=calibration, band=True, level=level)
        source = got["calibration"]
        if got["failure"]:
            continue
        accs = [c["accept_len"] for c in got["cells"] if c.get("accept_len")]
        if accs:
            accept[budget] = sum(accs) / len(accs)
        for c in got["cells"]:
            lv = by_load.setdefault(int(c["concurrency"]), Level(int(c["concurrency"])))
            lv.tok_s[budget] = (c["output_tok_s"], c["output_tok_s_low"], c["output_tok_s_high"])
    return Family([by_load[k] for k in sorted(by_load)], accept, source,
                  profile.budget if profile is not None else None)


def per_load_table(levels: Sequence[Level], *, max_batch: int = 256) -> list[list[int]]:
    """The predicted best budget per load as vLLM's ``num_speculative_tokens_per_batch_size``:
    sorted, non-overlapping, inclusive ``[from, to, K]`` batch-size ranges from 1 (K 0: no draft).
    A measured load L_i covers batch sizes L_i .. L_{i+1} - 1 (the first from 1, the last up to
    ``max_batch``); neighbours with the same budget merge. Load = requests in flight = the batch a
    decode step runs, as long as no request waits in a queue."""
    rows: list[list[int]] = []
    for i, lv in enumerate(levels):
        start = 1 if i == 0 else lv.load
        end = levels[i + 1].load - 1 if i + 1 < len(levels) else max(max_batch, lv.load)
        if rows and rows[-1][2] == lv.best:
            rows[-1][1] = end
        else:
            rows.append([start, end, lv.best])
    return rows


def measuring_hours(cells: Sequence[Mapping[str, Any]], workload: Mapping[str, Any], *, gpus: int = 1,
                    trials: int = 1, restart_s: float = RESTART_S) -> float:
    """GPU-hours to measure these cells (predicted: output tok/s, e2e): a server restart per trial,
    each cell's warm-up (a wave of its concurrency, one request's e2e per wave) and its measured
    requests at the predicted speed, times the box's GPUs (a CPU box: 1)."""
    seconds = trials * restart_s
    for c in cells:
        warm = math.ceil(int(workload.get("warmup_requests") or 0) / max(1, int(c["concurrency"])))
        tokens = int(c.get("requests") or 1) * int(workload.get("max_tokens") or 1)
        seconds += warm * float(c.get("e2e_ms_p50") or 0.0) / 1e3 + tokens / max(1e-9, float(c["output_tok_s"]))
    return seconds * max(1, gpus) / 3600.0


def prescreen_hours(family_cells: Mapping[int, Sequence[Mapping[str, Any]]], workload: Mapping[str, Any], *,
                    measured: Sequence[int], repeats: int = 3, gpus: int = 1,
                    restart_s: float = RESTART_S) -> dict[str, float]:
    """What the per-load table costs measured in full (every budget at every load, ``repeats`` rounds
    to decide it) against the pre-screen (the ``measured`` budgets once -- the baseline and the
    largest --, the rest predicted), in GPU-hours at the predicted speeds."""
    full = sum(measuring_hours(cells, workload, gpus=gpus, restart_s=restart_s) for cells in family_cells.values())
    few = sum(measuring_hours(family_cells[b], workload, gpus=gpus, restart_s=restart_s)
              for b in measured if b in family_cells)
    return {"full_table": repeats * full, "prescreen": few, "share": few / (repeats * full) if full else float("nan")}


def print_family(args: list[str], wanted: list[int], *, calibration: Any = None, profile: Profile | None = None,
                 model: str = "span", as_json: bool = False) -> int:
    """``python -m sweep.sim.predict OVERRIDES --budgets LIST``: the family of the composed config
    (its overrides with each ``spec.budget``, and ``spec=none``), predicted and printed."""
    import json

    from sweep.compose.cmdline import compose
    from sweep.compose.config import from_omegaconf
    from sweep.sim.prediction import predict

    base = [a for a in args if not (a.startswith("spec.") or a.startswith("spec=") or a.startswith("+spec."))]
    configs: dict[int, Any] = {0: from_omegaconf(compose([*base, "spec=none"])).raw}
    for b in wanted:
        configs[b] = from_omegaconf(compose([*args, f"spec.budget={b}"])).raw
    fam = predict_family(configs, profile=profile, calibration=calibration, model=model)
    wl = configs[0]["workload"]
    cells = {b: predict(with_profile(c, profile if b and profile is not None and b <= profile.budget else None,
                                     model), calibration=calibration)["cells"] for b, c in configs.items()}
    gpus = max(1, int(configs[0]["hardware"].get("num_gpus") or 1))
    top = max(wanted)
    hours = prescreen_hours(cells, wl, measured=[0, top], gpus=gpus)
    table = per_load_table(fam.levels)
    doc = {"calibration": fam.calibration, "profile_budget": fam.profile_budget, "accept_model": model,
           "accept_len": fam.accept, "stops_paying": fam.stops_paying, "per_load_table": table, "gpu_hours": hours,
           "levels": [{"load": lv.load, "best": lv.best, "margin": lv.margin, "speedup": lv.speedup,
                       "tok_s": {str(b): list(v) for b, v in sorted(lv.tok_s.items())}} for lv in fam.levels]}
    if as_json:
        print(json.dumps(doc, indent=2))
        return 0
    print(f"predicted per-load schedule (simulated, not measured): budgets {', '.join(map(str, wanted))} and "
          f"spec=none, workload {wl['name']}, context {wl['contexts'][0]}")
    print(fam.calibration)
    if profile is not None:
        print(f"accept lengths carried over from the per-position acceptance measured at budget {profile.budget} "
              f"({model}): " + ", ".join(f"b{b} {a:.2f}" for b, a in sorted(fam.accept.items())))
    head = "".join(f"{('b' + str(b)) if b else 'none':>18}" for b in sorted(configs))
    print(f"{'load':>6}{head}{'best':>8}{'margin':>8}{'vs none':>9}")
    for lv in fam.levels:
        vals = "".join(f"{lv.tok_s[b][0]:>8.1f} [{lv.tok_s[b][1]:.0f}-{lv.tok_s[b][2]:.0f}]".rjust(18)
                       if b in lv.tok_s else f"{'-':>18}" for b in sorted(configs))
        best = f"b{lv.best}" if lv.best else "none"
        sp = f"{lv.speedup:.2f}x" if lv.speedup else "-"
        print(f"{lv.load:>6}{vals}{best:>8}{lv.margin:>7.2f}x{sp:>9}")
    stop = fam.stops_paying
    print("speculation stops paying: " + (f"at load {stop}" if stop is not None else "not at the loads predicted"))
    print(f"per-load table (vLLM num_speculative_tokens_per_batch_size, K 0: no draft): {json.dumps(table)}")
    print(f"cost: measuring the table (every budget at every load, 3 rounds) {hours['full_table']:.2f} GPU-hours; "
          f"the pre-screen measures spec=none and b{top} once: {hours['prescreen']:.2f} "
          f"({100 * hours['share']:.0f}%)")
    return 0
