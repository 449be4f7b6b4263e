"""Fidelity of the calibrated simulator (the twin), judged on points it was not fitted to.

Every figure is what ``sweep.sim.predict`` gives -- the code a user runs -- from a composed
config and a calibration (benchmarks/_twin_judge.py, sweep/sim/heldout.py):

1. **The article's points** (benchmarks/measured/: the figures of one article,
   Kimi K2.6 on B300 and one PCIe point): leave one out -- fit the twin on all
   points but one (``python -m sweep.calibrate``'s fit, from the priors), predict
   it. A point that is its box's only measurement is predicted with that box's
   constants at their priors (uncalibrated physics) and the model constants
   fitted on the rest. Before it: each measured coding eval beside the full
   fit's prediction at the simulator's answer lengths. After it: the 80% bands
   ``predict`` prints on the article's boxes where nothing we see was measured
   (the held-back figures' yardstick), with an open layout assumption's alternative.
2. **Recorded real landscapes** (``--landscape FILE``; default every file in
   benchmarks/measured/landscapes/), each:
   * the measured noise of one run (the rounds);
   * ``python -m sweep.sim.predict`` composed from the recorder's command line with the
     shipped calibration, cell by cell (tok/s, TTFT, accept |error|; the bands for one run
     against each round);
   * in-sample and held-out splits (leave one config out, leave one concurrency out, fit the
     lowest concurrency only, fit half the configs): per kind of figure the median |error|, the
     **coverage** of the 80% bands (an honest band holds about 80%) and their median width
     (high / low);
   * the accept length of budgets not measured, from each family's largest budget's per-position
     acceptance (span and truncate carry-over; sweep/sim/budgets.py);
   * the per-load schedule of the largest family predicted from spec=none and its largest budget
     measured (sweep/sim/crossover.py) against the measured schedule (``sweep.report.schedule``
     over the rounds): the levels where the predicted best is the measured best or tied with it,
     where speculation stops paying, GPU-hours.

Last line (leave-one-config-out and leave-one-concurrency-out pooled, every kind of figure):

    held-out: median |error| X%, coverage Y%

    python benchmarks/sim_fidelity.py [--measured benchmarks/measured] [--landscape FILE ...]
        [--level 0.8] [--no-article] [--no-schedule] [--detail]
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
    from sweep.io import readback

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


GROUPS = {"in_sample": "in-sample (the full fit)", "loco": "leave one config out",
          "locco": "leave one concurrency out", "one_concurrency": "fit the lowest concurrency only",
          "half_configs": "fit half the configs"}
KINDS = (("output_tok_s", "tok/s"), ("ttft_ms", "TTFT"), ("accept_len", "accept"))


def _figures(outs: list) -> str:
    """|err| / coverage / band width of each kind of figure among these outcomes."""
    from sweep.sim.heldout import Report

    parts = []
    for kind, _ in KINDS:
        sel = [o for o in outs if o.point.kind == kind]
        if not sel:
            parts.append(f"{'-':>7} {'-':>5} {'-':>6}")
            continue
        med, cov, _ = Report.summary(sel)
        parts.append(f"{med:>6.1f}% {cov:>4.0f}% {Report.width(sel):>5.2f}x")
    return "   ".join(parts)


def landscape(path: Path, level: float, detail: bool, *, schedule: bool = True) -> list:
    """One recorded landscape, every figure through ``sweep.sim.predict`` (benchmarks/_twin_judge.py):
    the user's command line with the shipped calibration, in-sample and held-out splits (tok/s,
    TTFT, accept length: median |error|, the 80% bands' coverage and width), the acceptance of
    budgets not measured, the per-load schedule from a few measured points. Returns the LOCO +
    LOCCO outcomes."""
    import _twin_judge as judge

    from sweep.sim.fit import fit
    from sweep.sim.scatter import measured_noise
    from sweep.sim.heldout import evaluate, in_sample, splits
    from sweep.sim.landscape import load as load_landscape
    from sweep.sim.measured import landscape_points

    land = load_landscape(path)
    points = landscape_points(path)
    print(f"\n== landscape {path.name}: {land.engine} on {land.doc.get('hardware')}, "
          f"{len(land.configs)} configs, {len(points)} points "
          + ", ".join(f"{sum(p.kind == k for p in points)} {name}" for k, name in KINDS)
          + f"; recorded: {land.doc.get('command')}")
    noise = measured_noise(points)
    if noise:
        print("measured noise of ONE run (log sd, robust over the points' rounds): "
              + ", ".join(f"{k} {100 * v:.1f}%" for (_, k), v in sorted(noise.items())))
    # the user's path: the command line a user types, the box's shipped calibration
    user = judge.user_table(path)
    widths = sorted(c.band[1] / c.band[0] for c in user)
    print(f"python -m sweep.sim.predict (the recorder's overrides + the landscape's workload, shipped calibration), "
          f"{len(user)} cells: tok/s |err| {judge.median_error(user, 'output_tok_s'):.1f}%, TTFT "
          f"{judge.median_error(user, 'ttft_ms_p50'):.1f}%, accept {judge.median_error(user, 'accept_len'):.1f}%; "
          f"80% tok/s bands for one run cover {100 * judge.coverage(user):.0f}% of the rounds, median width "
          f"{widths[len(widths) // 2] if widths else float('nan'):.2f}x")
    t0 = time.perf_counter()
    full = fit(points)
    report = evaluate(points, splits(points), level=level, full=full,
                      progress=lambda name: print(f"  fitting without {name} ...", end="\r", flush=True))
    report.outcomes += in_sample(points, lambda p: full.calibrations.get(p.box), level=level).outcomes
    print(f"{report.fits} fits in {time.perf_counter() - t0:.0f} s" + " " * 30)
    head = "   ".join(f"{name + ' |err| cov width':>20}" for _, name in KINDS)
    print(f"{'split':<34} {'n':>4}   {head}")
    for group, title in GROUPS.items():
        outs = report.select(group)
        if outs:
            print(f"{title:<34} {len(outs):>4}   {_figures(outs)}")
    if detail:
        print(f"\n{'held-out point (leave one config out)':<44} {'measured':>9} {'predicted':>9} {'error':>7}  "
              f"{int(100 * level)}% band")
        for o in report.select("loco"):
            print(f"{o.point.label:<44} {o.point.measured:>9.2f} {o.predicted:>9.2f} {100 * o.error:>+6.1f}%  "
                  f"[{o.low:.2f}, {o.high:.2f}]{'' if o.inside else '  outside'}")
    for model in ("span", "truncate"):
        rows = judge.acceptance_rows(path, model)
        if not rows:
            break
        by = {how: [abs(r.error) for r in rows if r.how == how] for how in ("budget", "load")}
        print(f"accept length of budgets not measured ({model}: per-position acceptance of each family's largest "
              f"budget): {len(by['budget'])} cells |err| {100 * statistics.median(by['budget']):.1f}% median, "
              f"{100 * statistics.fmean(by['budget']):.1f}% mean; at other loads from the lowest load's cell: "
              f"{len(by['load'])} cells {100 * statistics.median(by['load']) if by['load'] else float('nan'):.1f}%")
    if schedule:
        try:
            got = judge.schedule_agreement(path)
        except (StopIteration, ValueError) as exc:
            print(f"per-load schedule: not judged ({exc or 'no baseline or family'})")
        else:
            agree = sum(lv.agrees for lv in got.levels)
            decided = [lv for lv in got.levels if lv.decided]
            kept = [lv.kept for lv in got.levels if lv.kept is not None] or [float("nan")]
            print(f"per-load schedule of {', '.join(c for _, c in got.family)} from spec=none and "
                  f"{got.family[-1][1]} measured ({got.measured_cells} cells, every round): predicted best is the "
                  f"measured best or tied with it at {agree} of {len(got.levels)} levels "
                  f"({sum(lv.agrees for lv in decided)} of the {len(decided)} the measurement decided); run as "
                  f"predicted, the box keeps {100 * min(kept):.0f}-{100 * max(kept):.0f}% of the measured leader's "
                  f"tok/s (median {100 * statistics.median(kept):.0f}%)")

            def name(b: int) -> str:
                return f"b{b}" if b else "none"

            for lv in got.levels:
                print(f"  {lv.workload} ctx {lv.context} load {lv.load:g}: predicted {name(lv.predicted)} "
                      f"(within noise: {'/'.join(map(name, lv.predicted_tied))}), measured "
                      f"{'/'.join(map(name, lv.measured))} ({lv.state}); keeps "
                      f"{100 * lv.kept if lv.kept is not None else float('nan'):.0f}%"
                      f"{'' if lv.agrees else '  <- differs'}")
            for wname, pred, meas, ok in got.crossover:
                print(f"  {wname}: speculation stops paying at load {pred} predicted, {meas} measured "
                      f"({'within one load step' if ok else 'MORE than one load step apart'})")
            print(f"  GPU-hours (this box: 1 'GPU'): the whole table measured (3 rounds) "
                  f"{got.hours['full_table']:.2f}, the pre-screen's measurements {got.hours['prescreen']:.2f}")
    return report.select("loco") + report.select("locco")


# The article's boxes where it measured nothing we see: the layouts and loads its held-back
# figures could be (figures.md keeps them back to judge the twin on).
GPU_GRID = (("b300", (1, 8, 64, 256)), ("pro6000_tp8", (1, 8, 64, 256)), ("pro6000_ep4", (1, 8, 64, 256)),
            ("pro6000_ep8", (1, 8, 64, 256)), ("h200", (1, 8)))


def gpu_bands(level: float) -> None:
    """What ``python -m sweep.sim.predict hardware=<box>`` prints on the article's boxes (DDTree
    b8/t4/w2048, context 60, 512 tokens): the prediction, its band for one run and how wide it is,
    and an open layout assumption's alternative -- the yardstick the held-back figures are judged on."""
    from sweep.compose.cmdline import compose
    from sweep.compose.config import from_omegaconf
    from sweep.sim.predict import predict

    print(f"\n== the article's boxes: {int(100 * level)}% bands of python -m sweep.sim.predict (DDTree b8/t4/w2048, "
          "ctx 60, 512 tokens, one run)")
    print(f"{'box':<13} {'C':>4} {'tok/s':>9} {'band':>19} {'width':>6}  open assumption")
    for box, loads in GPU_GRID:
        got = predict(from_omegaconf(compose([f"hardware={box}", "workload.contexts=[60]",
                                              f"workload.concurrency=[{','.join(map(str, loads))}]",
                                              "workload.coding=off"])), band=True, level=level)
        alt = (got.get("assumptions") or [{}])[0]
        for i, c in enumerate(got["cells"]):
            other = f"{alt['alternative'].split(' (')[0]}: {alt['output_tok_s'][i]:,.1f}" if alt else "-"
            band = f"[{c['output_tok_s_low']:,.1f}-{c['output_tok_s_high']:,.1f}]"
            print(f"{box:<13} {c['concurrency']:>4} {c['output_tok_s']:>9,.1f} {band:>19} "
                  f"{c['output_tok_s_high'] / c['output_tok_s_low']:>5.2f}x  {other}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--measured", type=Path, default=ROOT / "benchmarks" / "measured",
                   help="result files of real trials (default: benchmarks/measured)")
    p.add_argument("--landscape", type=Path, action="append", default=None,
                   help="a recorded landscape (repeatable; default: benchmarks/measured/landscapes/*.json)")
    p.add_argument("--level", type=float, default=0.8, help="the prediction bands' level (default 0.8)")
    p.add_argument("--no-article", action="store_true", help="skip the article's leave-one-out")
    p.add_argument("--detail", action="store_true", help="every left-out config's points")
    p.add_argument("--no-schedule", action="store_true", help="skip the predicted per-load schedules")
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
        gpu_bands(args.level)
    from sweep.errors import ConfigError
    from sweep.io.readback import Invalid, Skipped
    from sweep.sim.landscape import LandscapeError

    pooled = []
    skipped = Skipped()  # a landscape that is not one: one line on stderr, the others judged, exit 1
    for f in files:
        try:
            pooled += landscape(f, args.level, args.detail, schedule=not args.no_schedule)
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
