"""Fidelity of the calibrated simulator (the twin), judged on points it was not fitted to.

Two parts:

1. **The article's points** (benchmarks/measured/: the figures of one article,
   Kimi K2.6 on B300 and one PCIe point): leave one out -- fit the twin on all
   points but one (``python -m sweep.calibrate``'s fit, from the priors), predict
   it. A point that is its box's only measurement is predicted with that box's
   constants at their priors (uncalibrated physics) and the model constants
   fitted on the rest. Before it: each measured coding eval beside the full
   fit's prediction at the simulator's answer lengths.
2. **Recorded real landscapes** (``--landscape FILE``; default every file in
   benchmarks/measured/landscapes/): held-out splits (sweep/sim/heldout.py) --
   leave one config out, leave one concurrency out, fit on the lowest
   concurrency only, fit on half the configs. Per split family: the median
   |error| of the held-out tok/s and accept lengths, and the **coverage** of the
   printed prediction bands (the share of held-out points inside their 80%
   interval; an honest band holds about 80%).

Last line (leave-one-config-out and leave-one-concurrency-out pooled, both kinds of point):

    held-out: median |error| X%, coverage Y%

    python benchmarks/sim_fidelity.py [--measured benchmarks/measured] [--landscape FILE ...]
        [--level 0.8] [--no-article] [--detail]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

LANDSCAPES = ROOT / "benchmarks" / "measured" / "landscapes"


def coding_lines(files: list[Path], fitted: dict) -> list[str]:
    """Measured coding evals vs the twin (in-sample constants, the sim's answer lengths)."""
    from sweep.sim.constants import box_name
    from sweep.sim.predict import predict_coding

    lines = []
    from sweep import readback

    for path in files:
        doc = readback.read_json(path)  # a file the fit already read through the same reader
        coding = doc.get("coding") or {}
        if "config" not in doc:
            continue
        box = box_name(doc["config"]["hardware"])
        if not coding.get("mean_tok_s") or box not in fitted:
            continue
        pred = predict_coding(doc["config"], calibration=fitted[box])
        lines.append(f"coding eval {path.name} (fitted {box} twin, the sim's answer lengths):")
        lines.append(f"  {'problem':<14} {'answer length':<22}  {'measured':>9}  {'predicted':>9}  {'error':>7}")
        for real, sim in zip(coding["problems"], pred["problems"]):
            measured = f"{real['tok_s']:>9.2f}" if real.get("tok_s") else f"{'-':>9}"
            err = f"{100 * (sim['tok_s'] / real['tok_s'] - 1):>+6.1f}%" if real.get("tok_s") else f"{'':>7}"
            src = "measured" if sim["length_source"].startswith("measured") else "estimate"
            lines.append(f"  {sim['name']:<14} {sim['completion_tokens']:>5} tok ({src:<8})  {measured}  "
                         f"{sim['tok_s']:>9.2f}  {err}")
        err = 100 * (pred["mean_tok_s"] / coding["mean_tok_s"] - 1)
        lines.append(f"  {'mean':<37}  {coding['mean_tok_s']:>9.2f}  {pred['mean_tok_s']:>9.2f}  {err:>+6.1f}%"
                     "  (estimated lengths come from these figures: a consistency check)")
    return lines


def article(measured: Path) -> tuple[float, float] | None:
    """Leave-one-out on the article's result files; (median, max) |error| %."""
    from sweep.sim import constants as K
    from sweep.sim.fit import fit
    from sweep.sim.measured import load, predict_point

    loaded = load([measured])
    points = [p for p in loaded.points if not p.config]  # result files, not recorded landscapes
    if len(points) < 2:
        print(f"(article: fewer than 2 measured points under {measured})")
        return None
    t0 = time.perf_counter()
    full = fit(points)
    width = max(len(pt.label) for pt in points)
    print(f"== the article's points: leave one out ({len(points)} measured points from {measured})")
    files = sorted({path for path, _ in loaded.files if path.name in {p.file for p in points}})
    for line in coding_lines(files, full.calibrations):
        print(line)
    print(f"{'left-out point':<{width}}  {'measured':>9}  {'predicted':>9}  {'error':>7}  {'in-sample':>9}")
    errors = []
    for i, point in enumerate(points):
        rest = points[:i] + points[i + 1:]
        f = fit(rest)
        cal = f.calibrations.get(point.box)
        if cal is not None:
            values = dict(cal.values)
            how = ""
        else:  # nothing else measured on this box: its constants stay at their priors
            values = K.prior_values(K.kind_of(point.hardware))
            shared = next(iter(f.calibrations.values()))
            values.update({n: shared.values[n] for n in K.fitted_names("model")})
            how = "  (box unmeasured: priors)"
        predicted = predict_point(point, values)
        err = 100 * (predicted / point.measured - 1)
        errors.append(abs(err))
        insample = 100 * (full.predicted[i] / point.measured - 1)
        print(f"{point.label:<{width}}  {point.measured:>9.2f}  {predicted:>9.2f}  {err:>+6.1f}%  "
              f"{insample:>+8.1f}%{how}")
    print(f"({len(points)} refits in {time.perf_counter() - t0:.0f} s; in-sample: median |error| "
          f"{statistics.median(abs(100 * (v / pt.measured - 1)) for v, pt in zip(full.predicted, points)):.1f}%)")
    print(f"leave-one-out: median |error| {statistics.median(errors):.1f}%, max |error| {max(errors):.1f}%")
    return statistics.median(errors), max(errors)


GROUPS = {"loco": "leave one config out", "locco": "leave one concurrency out",
          "one_concurrency": "fit the lowest concurrency only", "half_configs": "fit half the configs"}


def landscape(path: Path, level: float, detail: bool) -> list:
    """Held-out splits of one recorded landscape; returns the LOCO + LOCCO outcomes."""
    from sweep.sim.heldout import Report, evaluate, splits
    from sweep.sim.landscape import load as load_landscape
    from sweep.sim.measured import landscape_points

    land = load_landscape(path)
    points = landscape_points(path)
    noise = [p for p in points if p.kind == "output_tok_s" and len(p.runs) > 1]
    print(f"\n== landscape {path.name}: {land.engine} on {land.doc.get('hardware')}, "
          f"{len(land.configs)} configs, {len(points)} points "
          f"({sum(p.kind == 'output_tok_s' for p in points)} tok/s, {sum(p.kind == 'accept_len' for p in points)} "
          f"accept lengths); recorded: {land.doc.get('command')}")
    if noise:
        from sweep.sim.landscape import run_sd

        sds = [run_sd(p.runs) or 0.0 for p in noise]
        print(f"measured noise: run-to-run sd of tok/s {100 * statistics.median(sds):.1f}% median, "
              f"{100 * max(sds):.1f}% max over {len(noise)} points ({len(noise[0].runs)} rounds each)")
    t0 = time.perf_counter()
    report = evaluate(points, splits(points), level=level,
                      progress=lambda name: print(f"  fitting without {name} ...", end="\r", flush=True))
    print(f"{report.fits} fits in {time.perf_counter() - t0:.0f} s" + " " * 30)
    print(f"{'split':<34} {'n':>4} {'tok/s |err|':>12} {'accept |err|':>13} {'coverage':>9}")
    for group, title in GROUPS.items():
        outs = report.select(group)
        if not outs:
            continue
        tok = Report.summary(report.select(group, "output_tok_s"))
        acc = Report.summary(report.select(group, "accept_len"))
        _, cov, n = Report.summary(outs)
        acc_s = f"{acc[0]:>12.1f}%" if acc[2] else f"{'-':>13}"
        print(f"{title:<34} {n:>4} {tok[0]:>11.1f}% {acc_s} {cov:>8.0f}%")
    if detail:
        print(f"\n{'held-out point (leave one config out)':<44} {'measured':>9} {'predicted':>9} {'error':>7}  "
              f"{int(100 * level)}% band")
        for o in report.select("loco"):
            print(f"{o.point.label:<44} {o.point.measured:>9.2f} {o.predicted:>9.2f} {100 * o.error:>+6.1f}%  "
                  f"[{o.low:.2f}, {o.high:.2f}]{'' if o.inside else '  outside'}")
    return report.select("loco") + report.select("locco")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--measured", type=Path, default=ROOT / "benchmarks" / "measured",
                   help="result files of real trials (default: benchmarks/measured)")
    p.add_argument("--landscape", type=Path, action="append", default=None,
                   help="a recorded landscape (repeatable; default: benchmarks/measured/landscapes/*.json)")
    p.add_argument("--level", type=float, default=0.8, help="the prediction bands' level (default 0.8)")
    p.add_argument("--no-article", action="store_true", help="skip the article's leave-one-out")
    p.add_argument("--detail", action="store_true", help="every left-out config's points")
    args = p.parse_args()
    if not 0 < args.level < 1:
        print("error: --level: must be in (0, 1)", file=sys.stderr)
        return 2
    files = args.landscape or sorted(LANDSCAPES.glob("*.json"))
    for f in files:
        if not f.is_file():
            print(f"error: --landscape: no such file: {f}", file=sys.stderr)
            return 2
    if not args.no_article:
        article(args.measured)
    from sweep.errors import ConfigError
    from sweep.readback import Invalid, Skipped
    from sweep.sim.landscape import LandscapeError

    pooled = []
    skipped = Skipped()  # a landscape that is not one: one line on stderr, the others judged, exit 1
    for f in files:
        try:
            pooled += landscape(f, args.level, args.detail)
        except (LandscapeError, ConfigError, Invalid) as exc:
            skipped.add(f, ValueError(str(exc).removeprefix("error: ").removeprefix(f"landscape {f}: ")))
    if not pooled:
        print("held-out: no recorded landscape (benchmarks/record_landscape.py records one)")
        return skipped.exit_code()
    from sweep.sim.heldout import Report

    med, cov, n = Report.summary(pooled)
    print(f"held-out: median |error| {med:.1f}%, coverage {cov:.0f}% "
          f"({n} held-out points, {int(100 * args.level)}% bands)")
    return skipped.exit_code()


if __name__ == "__main__":
    sys.exit(main())
