"""Predictions without a server: what ``python -m sweep.sim.predict`` prints, as functions.

    predict(config, calibration=None, band=False, level=0.8)   # {calibration, figures, failure, cells, ...}
    predict_cells(config)                                      # the cells alone
    predict_coding(config)                                     # the five-problem coding eval

Its own module (``sweep.sim.predict`` re-exports it and holds the command) so that what builds on
predictions -- the per-load schedule (``crossover.py``), the held-out splits -- and the command
that prints them do not import each other. Fast (a cell is ~0.2 ms; bands cost ~40 cells more
each) and deterministic.
"""

from __future__ import annotations

from statistics import NormalDist
from typing import Any, Mapping

from sweep.compose import per_load
from sweep.sim import constants
from sweep.sim._setup import acceptance_of, setup
from sweep.sim.cells import cell
from sweep.sim.constants import Calibration

BAND_LEVEL = 0.8  # the printed prediction interval: 80% of measurements should fall inside


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


# A predicted cell's banded figures: (row key, the cell() key, the kind of point its noise and model
# error are measured as). accept_len's cell key is the engine's definition (see predict()).
BANDED = (("output_tok_s", "tok_s", "output_tok_s"), ("per_stream_tok_s", "per_stream_tok_s", "output_tok_s"),
          ("ttft_ms_p50", "ttft_ms", "ttft_ms"), ("accept_len", "accept_len", "accept_len"))
ACCEPT_DEFINITIONS = {False: "tokens per verify step, the bonus token included (the harness's own count)",
                      True: "1 + accepted / drafts: per drafting step, as the engine's /metrics count it "
                            "(steps whose lookup drafted nothing left out)"}


def open_assumptions(hardware: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Layout assumptions a config leaves open, each with the hardware of its alternative.

    An expert-parallel layout (ep > 1 over tp > 1 GPUs) that does not say how its attention is
    parallel (``hardware.dp_attention`` unset) runs attention tensor-parallel in the twin -- the
    shipped EP profiles' stated assumption -- but SGLang's expert-parallel deployments of MLA models
    commonly add --enable-dp-attention (each GPU runs attention for its own requests: no attention
    AllReduce, 12 GB more weights per GPU, so --mem-fraction-static 0.95). The two differ by up to
    1.8x on a PCIe box at low load (docs/simulator.md, "Communication"), far more than any fitted
    constant moves the prediction: the band spans both until the config says which."""
    tp, ep = int(hardware.get("tp") or 1), int(hardware.get("ep") or 1)
    if constants.kind_of(hardware) == "cpu" or ep <= 1 or tp <= 1 or hardware.get("dp_attention") is not None:
        return []
    return [{"name": "attention", "assumed": "tensor-parallel attention (hardware.dp_attention unset)",
             "alternative": f"DP attention (hardware.dp_attention=true hardware.dp={tp}, "
                            "server.mem_fraction_static=0.95)",
             "hardware": {**hardware, "dp_attention": True, "dp": tp}, "values": {"default_mem_fraction": 0.95}}]


def predict(config: Any, *, calibration: Any = None, band: bool = False, level: float = BAND_LEVEL) -> dict[str, Any]:
    """{calibration, figures, failure, cells} for a composed config (see the module doc); with ``band``,
    each cell's output and per-stream tok/s, TTFT and accept length carry a ``level`` (default 80%)
    prediction interval as ``*_low``/``*_high``: for a measurement that is the mean of
    ``workload.repeats`` runs (the constants' uncertainty, the model's error and that measurement's
    noise; docs/simulator.md, "Predictions with honesty").

    ``accept_len`` is counted as the engine's result.json will count it (``accept_definition``):
    tokens per verify step, or per drafting step where the engine reports only /metrics counters."""
    su = setup(config, calibration)
    cfg, cal, spec, box = su["cfg"], su["cal"], su["spec"], su["box"]
    hardware, workload = su["hardware"], cfg["workload"]
    failure = su["failure"]
    spec_on = spec.get("algorithm") not in (None, "none")
    accept_key = "accept_len_drafted" if su["per_draft"] else "accept_len"
    out: dict[str, Any] = {"calibration": cal.source, "failure": failure, "simulated": True, "cells": [],
                           "band_level": level if band else None,
                           "figures": {"source": su["figures"], **constants.figures_of(hardware)},
                           "accept_definition": ACCEPT_DEFINITIONS[bool(su["per_draft"])] if spec_on else None,
                           "acceptance": acceptance_of(spec)}
    if failure:
        return out
    banded = _prior_covariance(cal, hardware) if band and not cal.covariance else cal
    z = NormalDist().inv_cdf(0.5 + level / 2.0)
    repeats = max(1, int(workload.get("repeats") or 1))
    spread = hardware.get("spread")
    declared = float(spread) if isinstance(spread, (int, float)) and spread > 0 else None
    from sweep.sim.accept import family

    fam = family(spec)
    rows = [(row, key if key != "accept_len" else accept_key, kind if kind != "accept_len" else f"{kind}:{fam}")
            for row, key, kind in BANDED if spec_on or row != "accept_len"]
    if band:
        out["band_note"] = _band_note(cal, repeats, declared)
    alternatives = open_assumptions(hardware)
    if alternatives:
        from sweep.sim.perf import box_of

        out["assumptions"] = [{k: a[k] for k in ("name", "assumed", "alternative")} | {"output_tok_s": []}
                              for a in alternatives]
    bands = per_load.bands_of(spec)
    for ctx, conc in _cells(workload):
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
               "accept_len": est[accept_key] if at.get("algorithm") not in (None, "none") else None,
               "verify_width": est["verify_width"], "running": est["running"]}
        if band:
            from sweep.sim.fit import band as sigma_band

            def fn(values: Mapping[str, float], kw: dict[str, Any] = kw,
                   at: Mapping[str, Any] = at) -> tuple[float, ...]:
                e = cell(box, constants.for_workload(values, su["workload"]), at, **kw)
                return tuple(e[key] for _, key, _ in rows)

            got = sigma_band(fn, banded, z, kind=[k for _, _, k in rows], repeats=repeats,
                             noise=[declared if k == "output_tok_s" else None for _, _, k in rows])
            for (name, _, kind), (_, lo, hi) in zip(rows, got):
                if kind.startswith("accept_len"):  # a step yields at least its bonus token
                    lo = max(lo, 1.0)
                row.update({f"{name}_low": lo, f"{name}_high": hi})
        for a, said in zip(alternatives, out.get("assumptions") or []):  # the band spans an open assumption
            alt_box, alt_values = box_of(a["hardware"], su["model"]), {**su["values"], **a["values"]}
            alt = cell(alt_box, alt_values, spec, **kw)
            said["output_tok_s"].append(alt["tok_s"])
            if band:
                def fn_alt(values: Mapping[str, float], kw: dict[str, Any] = kw) -> tuple[float, ...]:
                    e = cell(alt_box, {**constants.for_workload(values, su["workload"]), **a["values"]}, spec, **kw)
                    return tuple(e[key] for _, key, _ in rows)

                alt_got = sigma_band(fn_alt, banded, z, kind=[k for _, _, k in rows], repeats=repeats,
                                     noise=[declared if k == "output_tok_s" else None for _, _, k in rows])
                for (name, _, _), (_, lo, hi) in zip(rows, alt_got):
                    row[f"{name}_low"] = min(row[f"{name}_low"], lo)
                    row[f"{name}_high"] = max(row[f"{name}_high"], hi)
        out["cells"].append(row)
    return out


def _band_note(cal: Calibration, repeats: int, declared: float | None) -> str:
    """What the bands hold: for a measurement of ``repeats`` runs, and the box's noise behind it."""
    noise = dict(cal.noise_by_kind).get("output_tok_s")
    if noise:
        src = f"one run's tok/s scatters {100 * noise:.0f}% (log sd) on this box, measured over its recorded rounds"
    elif declared:
        src = f"one run's tok/s scatters {100 * declared:.0f}% (hardware.spread)"
    else:
        src = "the box's run-to-run noise is not measured (the prior's is used)"
    model = dict(cal.model_by_kind).get("output_tok_s")
    err = f"; the model's own error {100 * model:.0f}%" if model is not None else ""
    return (f"bands: a measurement of {repeats} run{'s' if repeats > 1 else ''} (workload.repeats): the constants' "
            f"uncertainty, the model's error and the noise -- {src}{err}")


def _cells(workload: Mapping[str, Any]) -> list[tuple[int, int]]:
    """The (context, concurrency) cells of the workload's matrix, as the harness orders them (only
    ``workload.cells`` when given: sweep/bench/loadplan.py)."""
    only = {(int(c[0]), int(c[1])) for c in workload.get("cells") or ()}
    return [(int(ctx), int(conc)) for ctx in workload["contexts"] for conc in workload["concurrency"]
            if not only or (int(ctx), int(conc)) in only]


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
