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
from typing import Any, Mapping, Sequence

from sweep import errors
from sweep.sim._setup import setup  # noqa: F401 - re-exported: what a prediction runs on
from sweep.sim.prediction import (  # noqa: F401 - re-exported: the functions behind the command
    ACCEPT_DEFINITIONS, BAND_LEVEL, BANDED, open_assumptions, predict, predict_cells, predict_coding)

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
  --acceptance SOURCE       acceptance measured at a budget >= this one of the same family, per draft
                            position: a result.json (acceptance.metrics.per_position) or
                            LANDSCAPE.json#CONFIG/WORKLOAD; the accept length of this budget is carried
                            over from it (sweep/sim/budgets.py) instead of the twin's own -- only from
                            the same engine, model and workload, never to a larger budget
  --budgets LIST            the family's per-load schedule: each budget (and spec=none) at every load of
                            the workload, the best per load, where speculation stops paying, vLLM's
                            num_speculative_tokens_per_batch_size table, and what measuring it costs
                            (with --acceptance: budgets up to the measured one)
  --accept-model span|truncate   how --acceptance carries over to a shorter budget (default span;
                            only with --acceptance)
  --config-dir DIR          config groups of your own beside the shipped ones (DIR/model/*.yaml,
                            DIR/hardware/*.yaml: a model from its architecture, a box from its parts)
"""


def _table(pred: Mapping[str, Any], title: str) -> str:
    lines = [title, pred["calibration"]]
    fig = pred.get("figures") or {}
    if fig.get("mem_bw_tbs") and fig.get("matmul_tflops") and fig.get("source") == "calibration":
        lines.append(f"box figures: the calibration's (what its points ran with): {fig['mem_bw_tbs'] * 1e3:.1f} GB/s, "
                     f"{fig['matmul_tflops'] * 1e3:.1f} GFLOPS -- {fig.get('probe') or 'measured'}")
    if pred["failure"]:
        lines.append(f"predicted startup failure: {pred['failure']} (no cells)")
        return "\n".join(lines)
    level = f"{100 * (pred.get('band_level') or BAND_LEVEL):.0f}% band"
    lines.append(f"{'ctx':>6} {'C':>4}  {'output tok/s (' + level + ')':>30}  {'per-stream tok/s':>26}  "
                 f"{'TTFT ms':>22}  {'accept':>16}")
    for c in pred["cells"]:
        band = f"[{c['output_tok_s_low']:,.0f}-{c['output_tok_s_high']:,.0f}]"
        pband = f"[{c['per_stream_tok_s_low']:,.1f}-{c['per_stream_tok_s_high']:,.1f}]"
        tband = f"{c['ttft_ms_p50']:,.0f} [{c['ttft_ms_p50_low']:,.0f}-{c['ttft_ms_p50_high']:,.0f}]"
        acc = (f"{c['accept_len']:.2f} [{c['accept_len_low']:.2f}-{c['accept_len_high']:.2f}]"
               if c["accept_len"] else "-")
        lines.append(f"{c['context']:>6} {c['concurrency']:>4}  {c['output_tok_s']:>12,.1f} {band:>17}  "
                     f"{c['per_stream_tok_s']:>8,.1f} {pband:>17}  {tband:>22}  {acc:>16}")
    if pred.get("accept_definition"):
        lines.append(f"accept length: {pred['accept_definition']}")
    if pred.get("acceptance"):
        lines.append(f"acceptance: {pred['acceptance']}")
    if pred.get("band_note"):
        lines.append(pred["band_note"])
    for a in pred.get("assumptions") or []:
        alt = ", ".join(f"{v:,.1f}" for v in a["output_tok_s"])
        lines.append(f"open assumption: {a['assumed']}; with {a['alternative']}: {alt} tok/s -- the band spans "
                     "both (set hardware.dp_attention to close it)")
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
                 "--concurrency": "needs a comma-separated list of positive integers (with --breakdown)",
                 "--acceptance": "needs a result.json or LANDSCAPE.json#CONFIG/WORKLOAD with per-position acceptance",
                 "--budgets": "needs a comma-separated list of positive integers (draft budgets)",
                 "--accept-model": "needs span or truncate"}
FLAGS = ("--json", "--breakdown")
# The user's own config groups, as python -m sweep takes them (docs/config.md: a model, a box)
VALUE_OPTIONS["--config-dir"] = "needs a directory of config groups (model/, hardware/, spec/ ...)"


def _use_config_dir(path: str) -> None:
    from sweep.compose import config_source

    source = config_source.Source(config_dir=path)
    config_source.check_files(source)  # a ConfigError naming --config-dir when it is no directory
    config_source.use(source)


def _box_state(raw: Mapping[str, Any], calibration: Any, pred: dict[str, Any]) -> str | None:
    """Widen the bands, or refuse (``errors.Failed``), when the box asked about is in another state
    than the calibration's measurements were (sweep/sim/boxcheck.py); the one line that says so."""
    from sweep.sim import boxcheck, constants
    from sweep.sim.measured import inputs

    if pred.get("failure"):
        return None
    hardware = inputs(raw)["hardware"]
    verdict = boxcheck.judge(constants.resolve(hardware, calibration), hardware)
    if verdict is None:
        return None
    if verdict.action == "refuse":
        raise errors.Failed(verdict.line)
    boxcheck.widen(pred, verdict.sd)
    pred["box_state_note"] = verdict.line
    return verdict.line


@errors.command("sweep.sim.predict")
def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help") for a in args):
        print(USAGE, end="")
        return 0
    args, opts = _options(args)
    as_json, want_breakdown = "--json" in args, "--breakdown" in args
    from sweep.compose import arguments

    arguments.check("sweep.sim.predict", {"config_dir": opts.get("--config-dir"),  # by their rules
                                          "calibration": opts.get("--calibration"),
                                          "concurrency": opts.get("--concurrency"),
                                          "acceptance": opts.get("--acceptance"),
                                          "budgets": opts.get("--budgets"),
                                          "accept_model": opts.get("--accept-model"),
                                          "json": as_json, "breakdown": want_breakdown})
    if "--config-dir" in opts:
        _use_config_dir(opts["--config-dir"])
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

    measured = None
    if "--acceptance" in opts:
        from sweep.sim import budgets

        try:
            measured = budgets.load_measured(opts["--acceptance"])
        except ValueError as exc:
            raise errors.ConfigError("--acceptance", str(exc)) from None
    profile = measured.profile if measured is not None else None
    model = opts.get("--accept-model", "span")
    if model not in ("span", "truncate"):
        raise errors.ConfigError("--accept-model", VALUE_OPTIONS["--accept-model"])
    # a ConfigError (CalibrationError is one): one line at the boundary, exit 2
    trial = from_omegaconf(compose(args))
    if measured is not None and (off := measured.mismatch(trial.raw)):
        raise errors.ConfigError("--acceptance", f"measured on another {off}: acceptance carries over only "
                                 "between budgets of one engine, model and workload")
    if "--budgets" in opts:
        try:
            wanted = sorted({int(x) for x in opts["--budgets"].split(",")})
        except ValueError:
            wanted = []
        if not wanted or min(wanted) < 1:
            raise errors.ConfigError("--budgets", VALUE_OPTIONS["--budgets"])
        if profile is not None and (past := [b for b in wanted if b > profile.budget]):
            # the carry-over predicts shorter drafts from a longer one, never longer ones: a budget
            # past the measured one would run on the twin's own acceptance beside measured ones
            raise errors.ConfigError("--budgets", f"{', '.join(map(str, past))} past budget {profile.budget}, where "
                                     "--acceptance was measured: acceptance carries over to budgets up to it, not "
                                     "beyond (measure the largest budget, or drop --acceptance for the twin's own)")
        from sweep.sim.crossover import print_family

        return print_family(args, wanted, calibration=calibration, profile=profile, model=model,
                            as_json=as_json)
    from sweep.sim.crossover import with_profile

    config: Any = trial
    if profile is not None:
        budget = int(trial.raw["spec"].get("budget") or 0)
        if budget > profile.budget:
            raise errors.ConfigError("--acceptance", f"measured at budget {profile.budget}: it predicts budgets up "
                                     f"to that, not {budget}")
        config = with_profile(trial.raw, profile, model)
    pred = predict(config, calibration=calibration, band=True)
    state_line = _box_state(trial.raw, calibration, pred)  # a box in another state than the fitted one
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
        if state_line:
            print(state_line)
        if profile is not None:
            print(f"accept length carried over from the per-position acceptance measured at budget {profile.budget} "
                  f"({opts['--acceptance']}; {model})")
        if pred.get("coding") and not pred["failure"]:
            print(_coding_line(pred["coding"]))
        if pred.get("breakdown"):
            print(explain.render(pred["breakdown"], f"{t['hardware']['name']} {t['spec']['algorithm']} "
                                                    f"b{t['spec'].get('budget')}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
