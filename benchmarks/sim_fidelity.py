"""Leave-one-out fidelity of the calibrated simulator (the twin).

For each measured point in turn: fit the twin on all the other points
(``python -m sweep.calibrate``'s fit, from the priors), predict the left-out
point, and print point, measured, predicted and error. A point that is its
box's only measurement is predicted with that box's constants at their
priors (uncalibrated physics) and the model constants fitted on the rest:
that is what the twin knows about a box nobody measured. This -- not the
in-sample fit -- is the honest measure of the twin. Last line:

    leave-one-out: median |error| X%, max |error| Y%

Before the table: each measured coding eval beside the full fit's prediction
at the simulator's answer lengths (sweep/sim/answers.yaml): its mean is not a
fitted point, since the source gives only two of the five answers' lengths.

    python benchmarks/sim_fidelity.py [--measured benchmarks/measured]
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


def coding_lines(files: list[Path], fitted: dict) -> list[str]:
    """Measured coding evals vs the twin (in-sample constants, the sim's answer lengths)."""
    import json

    from sweep.sim.constants import box_name
    from sweep.sim.predict import predict_coding

    lines = []
    for path in files:
        doc = json.loads(path.read_text(encoding="utf-8"))
        coding = doc.get("coding") or {}
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


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--measured", type=Path, default=ROOT / "benchmarks" / "measured",
                   help="result files of real trials (default: benchmarks/measured)")
    args = p.parse_args()

    from sweep.sim import constants as K
    from sweep.sim.fit import fit
    from sweep.sim.measured import load, predict_point

    loaded = load([args.measured])
    points = loaded.points
    if len(points) < 2:
        print(f"error: --measured: need at least 2 measured points under {args.measured}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    full = fit(points)
    width = max(len(pt.label) for pt in points)
    print(f"{len(points)} measured points from {args.measured}")
    for line in coding_lines([path for path, _ in loaded.files], full.calibrations):
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
            nvlink = bool((point.hardware.get("perf") or {}).get("nvlink", True))
            values = K.prior_values(nvlink)
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
