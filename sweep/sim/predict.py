"""What a config would measure on a box, without starting a server.

    python -m sweep.sim.predict hardware=pro6000_ep8 spec.budget=16 [--calibration PATH|none] [--json]

prints the predicted cells of the composed workload (context x concurrency)
with an 80% prediction band, and which calibration the twin used ("uncalibrated:
spec-sheet physics" when the box has none). The same model the sim server
runs on, called directly:

    from sweep.sim.predict import predict_cells
    predict_cells(config)                    # config: the composed config (a mapping with
                                             # hardware, model, spec, workload, server)
    predict_cells(config, calibration="path/to/other.yaml")   # a differently fitted twin
    predict_coding(config)                   # the five-problem coding eval: per-problem tok/s, mean

Fast (a cell is ~0.2 ms; bands cost ~40 cells more each) and deterministic.
"""

from __future__ import annotations

import json
import math
import sys
from statistics import NormalDist
from typing import Any, Mapping, Sequence

from sweep import errors
from sweep.compose import per_load
from sweep.sim import constants
from sweep.sim.cells import cell
from sweep.sim.constants import Calibration
from sweep.sim._setup import setup  # noqa: F401 - re-exported: what a prediction runs on

BAND_LEVEL = 0.8  # the printed prediction interval: 80% of measurements should fall inside

USAGE = """\
usage: python -m sweep.sim.predict [OVERRIDES...] [--calibration PATH|none] [--json]
                                  [--breakdown [--concurrency 1,8,64,256]]

Predict the benchmark cells of the composed config (same overrides as python -m sweep)
on its hardware, from the simulator's performance model -- no server is started.
  --calibration PATH|none   use this calibration file (none: uncalibrated priors);
                            default: the box's calibration (docs/simulator.md)
  --json                    print the prediction as JSON
  --breakdown               where a step's time goes per concurrency (draft, verify memory vs
                            compute, attention, communication, overhead), the config against
                            twice its budget, the best budget vs autoregressive, the crossovers
  --concurrency LIST        the concurrencies of --breakdown (default 1,2,4,...,256)
"""


def _requests(workload: Mapping[str, Any], concurrency: int) -> int:
    if workload.get("requests_per_cell") is not None:
        return int(workload["requests_per_cell"])
    return max(2 * concurrency, int(workload.get("min_requests") or 2))


def _prior_covariance(cal: Calibration, hardware: Mapping[str, Any]) -> Calibration:
    """An uncalibrated twin's band: the priors' own widths (honestly wide)."""
    kind = constants.kind_of(hardware)
    names = constants.fitted_names()
    cov = tuple(tuple(float(constants.prior(n, kind)["sd"]) ** 2 if i == j else 0.0
                      for j in range(len(names))) for i, n in enumerate(names))
    return Calibration(values=cal.values, source=cal.source, box=cal.box, names=names, covariance=cov,
                       key=cal.key, kind=cal.kind, residual_by_kind=cal.residual_by_kind)


def predict(config: Any, *, calibration: Any = None, band: bool = False, level: float = BAND_LEVEL) -> dict[str, Any]:
    """{calibration, failure, cells} for a composed config (see the module doc); with ``band``, each
    cell's tok/s carries a ``level`` (default 80%) prediction interval as ``*_low``/``*_high``."""
    su = setup(config, calibration)
    cfg, cal, spec, box = su["cfg"], su["cal"], su["spec"], su["box"]
    hardware, workload = cfg["hardware"], cfg["workload"]
    failure = su["failure"]
    out: dict[str, Any] = {"calibration": cal.source, "failure": failure, "simulated": True, "cells": [],
                           "band_level": level if band else None}
    if failure:
        return out
    banded = _prior_covariance(cal, hardware) if band and not cal.covariance else cal
    z = NormalDist().inv_cdf(0.5 + level / 2.0)
    bands = per_load.bands_of(spec)
    for ctx in workload["contexts"]:
        for conc in workload["concurrency"]:
            kw: dict[str, Any] = {"context": int(ctx), "concurrency": int(conc),
                                  "max_tokens": int(workload["max_tokens"]),
                                  "requests": _requests(workload, int(conc)), "disable_cuda_graph": su["eager"],
                                  "max_running": su["max_running"]}
            # per-load budgets (spec.per_load): the cell's concurrency is its steady-state batch size
            at = spec if bands is None else per_load.spec_at(spec, per_load.budget_at(bands, int(conc)))
            est = cell(box, su["values"], at, **kw)
            row = {"context": int(ctx), "concurrency": int(conc), "requests": kw["requests"],
                   "output_tok_s": est["tok_s"], "per_stream_tok_s": est["per_stream_tok_s"],
                   "ttft_ms_p50": est["ttft_ms"], "tpot_ms_p50": est["tpot_ms"], "e2e_ms_p50": est["e2e_ms"],
                   "accept_len": est["accept_len"] if at.get("algorithm") not in (None, "none") else None,
                   "verify_width": est["verify_width"], "running": est["running"]}
            if band:
                from sweep.sim.fit import band as sigma_band

                def fn(values: Mapping[str, float], kw: dict[str, Any] = kw,
                       at: Mapping[str, Any] = at) -> tuple[float, float]:
                    e = cell(box, constants.for_workload(values, su["workload"]), at, **kw)
                    return e["tok_s"], e["per_stream_tok_s"]

                (_, lo, hi), (_, plo, phi) = sigma_band(fn, banded, z, kind="output_tok_s")
                row.update({"output_tok_s_low": lo, "output_tok_s_high": hi,
                            "per_stream_tok_s_low": plo, "per_stream_tok_s_high": phi})
            out["cells"].append(row)
    return out


def predict_cells(config: Any, *, calibration: Any = None, band: bool = False) -> list[dict[str, Any]]:
    """The predicted cells ([] when the server would fail to start: see :func:`predict`)."""
    return predict(config, calibration=calibration, band=band)["cells"]


def predict_coding(config: Any, *, calibration: Any = None) -> dict[str, Any]:
    """The five-problem coding eval as the harness would measure it on the sim.

    Each problem is one request at C=1 whose answer is as long as the sim's
    (sweep/sim/answers.yaml, cut at ``workload.coding_max_tokens``); its tok/s
    is tokens / (e2e - TTFT), the same figure ``python -m sweep.calibrate`` fits
    a measured problem to, and the mean is the eval's mean of per-problem tok/s.
    The model's expectation: the server's seeded per-request draws scatter one
    run's problems around it (sd ~9% at 289 tokens, 5% at 1024; the mean of
    the five ~4%: docs/simulator.md, "The coding eval reproduced").
    """
    from sweep.sim import text
    from sweep.sim.measured import CODING_PROMPT_TOKENS

    su = setup(config, calibration)
    cfg, cal, spec, box = su["cfg"], su["cal"], su["spec"], su["box"]
    cap = int(cfg["workload"].get("coding_max_tokens") or 1024)
    failure = su["failure"]
    out: dict[str, Any] = {"calibration": cal.source, "failure": failure, "simulated": True,
                           "coding_max_tokens": cap, "problems": [], "mean_tok_s": None}
    if failure:
        return out
    for name, length in text.answer_lengths().items():
        n = len(text.answer(text.SIGNATURES[name], max_tokens=cap, ignore_eos=False, seed=0).pieces)
        est = cell(box, su["values"], spec, context=CODING_PROMPT_TOKENS, concurrency=1, max_tokens=n,
                   requests=1, disable_cuda_graph=su["eager"])
        out["problems"].append({"name": length.problem, "completion_tokens": n,
                                "tok_s": est["per_stream_tok_s"], "length_source": length.source})
    out["mean_tok_s"] = sum(p["tok_s"] for p in out["problems"]) / len(out["problems"])
    return out


def _table(pred: Mapping[str, Any], title: str) -> str:
    lines = [title, pred["calibration"]]
    if pred["failure"]:
        lines.append(f"predicted startup failure: {pred['failure']} (no cells)")
        return "\n".join(lines)
    level = f"{100 * (pred.get('band_level') or BAND_LEVEL):.0f}% band"
    lines.append(f"{'ctx':>6} {'C':>4}  {'output tok/s (' + level + ')':>30}  {'per-stream tok/s':>26}  "
                 f"{'TTFT ms':>8}  {'accept':>6}")
    for c in pred["cells"]:
        band = f"[{c['output_tok_s_low']:,.0f}-{c['output_tok_s_high']:,.0f}]"
        pband = f"[{c['per_stream_tok_s_low']:,.1f}-{c['per_stream_tok_s_high']:,.1f}]"
        acc = f"{c['accept_len']:.2f}" if c["accept_len"] else "-"
        lines.append(f"{c['context']:>6} {c['concurrency']:>4}  {c['output_tok_s']:>12,.1f} {band:>17}  "
                     f"{c['per_stream_tok_s']:>8,.1f} {pband:>17}  {c['ttft_ms_p50']:>8,.0f}  {acc:>6}")
    return "\n".join(lines)


def _coding_line(coding: Mapping[str, Any]) -> str:
    each = ", ".join(f"{p['name']} {p['completion_tokens']} tok {p['tok_s']:.0f}" for p in coding["problems"])
    return (f"coding eval (the five problems, coding_max_tokens {coding['coding_max_tokens']}): "
            f"mean {coding['mean_tok_s']:.1f} tok/s -- {each}")


def _options(args: list[str]) -> tuple[list[str], dict[str, str]]:
    """(Hydra overrides, --name value options) from the command line; a ConfigError names a bad one."""
    values: dict[str, str] = {}
    rest: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        name = a.split("=", 1)[0]
        if name in VALUE_OPTIONS:
            value = a.split("=", 1)[1] if "=" in a else (args[i + 1] if i + 1 < len(args) else "")
            if not value:
                raise errors.ConfigError(name, VALUE_OPTIONS[name])
            values[name] = value
            i += 1 if "=" in a else 2
            continue
        if a.startswith("--") and a not in FLAGS:
            raise errors.ConfigError(a, f"unknown option (allowed: {', '.join([*VALUE_OPTIONS, *FLAGS])}, "
                                     "Hydra overrides)")
        rest.append(a)
        i += 1
    return rest, values


VALUE_OPTIONS = {"--calibration": "needs a path or 'none'",
                 "--concurrency": "needs a comma-separated list of positive integers (with --breakdown)"}
FLAGS = ("--json", "--breakdown")


@errors.command("sweep.sim.predict")
def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help") for a in args):
        print(USAGE, end="")
        return 0
    args, opts = _options(args)
    as_json, want_breakdown = "--json" in args, "--breakdown" in args
    from sweep.compose import arguments

    arguments.check("sweep.sim.predict", {"calibration": opts.get("--calibration"),  # by their rules
                                          "concurrency": opts.get("--concurrency")})
    args = [a for a in args if a not in FLAGS]
    calibration = opts.get("--calibration")
    concs: list[int] | None = None
    if "--concurrency" in opts:
        try:
            concs = [int(x) for x in opts["--concurrency"].split(",")]
        except ValueError:
            concs = []
        if not concs or min(concs) < 1:
            raise errors.ConfigError("--concurrency", VALUE_OPTIONS["--concurrency"])
    from sweep.compose.cmdline import compose
    from sweep.compose.config import from_omegaconf
    from sweep.sim import explain

    # a ConfigError (CalibrationError is one): one line at the boundary, exit 2
    trial = from_omegaconf(compose(args))
    pred = predict(trial, calibration=calibration, band=True)
    if trial.workload.coding != "off":
        pred["coding"] = predict_coding(trial, calibration=calibration)
    if want_breakdown and not pred["failure"]:
        pred["breakdown"] = explain.breakdown(trial, calibration=calibration,
                                              concurrencies=concs or explain.LADDER)
    if as_json:
        print(json.dumps(pred, indent=2, default=lambda x: None if isinstance(x, float) and math.isnan(x) else x))
    else:
        t = trial.raw
        title = (f"predicted: {t['hardware']['name']} {t['spec']['algorithm']} budget={t['spec'].get('budget')} "
                 f"topk={t['spec'].get('topk')} window={t['spec'].get('window')}, workload {t['workload']['name']} "
                 f"({t['workload']['max_tokens']} tokens out) -- simulated, not measured")
        print(_table(pred, title))
        if pred.get("coding") and not pred["failure"]:
            print(_coding_line(pred["coding"]))
        if pred.get("breakdown"):
            print(explain.render(pred["breakdown"], f"{t['hardware']['name']} {t['spec']['algorithm']} "
                                                    f"b{t['spec'].get('budget')}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
