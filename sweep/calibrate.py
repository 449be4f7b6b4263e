"""``python -m sweep.calibrate``: fit the simulator to a real box's measurements.

    python -m sweep.calibrate multirun/ benchmarks/measured/          # -> the user calibration dir
    python -m sweep.calibrate -o sweep/sim/calibrations benchmarks/measured/   # the shipped ones

Exit status: 0; 1 when a file was skipped because it is not what it claims to be (each named
in one line on stderr, ``skipped <path>: <why>``; the fit uses the others); 2 on bad input.

Reads result files of real trials (``simulated: false``; any mix of boxes,
budgets, contexts, concurrencies) and recorded landscapes (the grid files of
``benchmarks/record_landscape.py``: any engine, any box -- a CPU box running
llama.cpp or vLLM fits the same way), fits the performance model's free
constants per box with public figures fixed (sweep/sim/fit.py), prints each
measured point beside its fitted value, warns about constants the points
cannot identify, and writes ``<box>.yaml`` per box, which the simulator then
loads for every layout of that box (docs/simulator.md, "Calibration").
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Sequence, TextIO

from sweep import errors

if TYPE_CHECKING:
    from sweep.sim.fit import Fit
    from sweep.sim.measured import Loaded

PROG = "python -m sweep.calibrate"


def _parser() -> argparse.ArgumentParser:
    from sweep.sim.constants import ENV_DIR

    p = argparse.ArgumentParser(prog=PROG, description="Fit the simulator's free constants to real result files.")
    p.add_argument("results", nargs="+", type=Path,
                   help="result.json files, recorded landscapes (benchmarks/measured/landscapes/*.json) "
                        "or directories holding them")
    p.add_argument("-o", "--out", type=Path, default=None,
                   help=f"directory for <box>.yaml (default: ${ENV_DIR} or ~/.config/specsweep/calibrations)")
    p.add_argument("--box", action="append", default=None, help="write only this box's file (repeatable)")
    p.add_argument("--dry-run", action="store_true", help="fit and print, write nothing")
    return p


def report(result: Fit, loaded: Loaded, out: TextIO = sys.stdout) -> list[str]:
    """Print the per-box tables; return the warnings."""
    from sweep.sim import constants as K

    warnings: list[str] = []
    width = max((len(p.label) for p in loaded.points), default=20)
    for box in sorted(result.boxes):
        pts = [(p, v) for p, v in zip(loaded.points, result.predicted) if p.box == box]
        print(f"\nbox {box}: {len(pts)} measured points", file=out)
        print(f"  {'point':<{width}}  {'measured':>9}  {'fitted':>9}  {'error':>7}", file=out)
        for p, v in pts:
            print(f"  {p.label:<{width}}  {p.measured:>9.2f}  {v:>9.2f}  {100 * (v / p.measured - 1):>+6.1f}%",
                  file=out)
        print(f"  {'constant':<22} {'prior':>10} {'fitted':>10}  status", file=out)
        weak = []
        first_of_model = min(b for b, m in result.model_of.items() if m == result.model_of[box])
        for i in result.box_params(box):
            prm = result.params[i]
            if prm.box != box and box != first_of_model:
                continue  # a model's shared constants are printed under its first box
            tag = "" if prm.box else (f"  (workload {prm.workload}: shared by every box)" if prm.workload
                                      else "  (model: shared by every box)")
            status = result.status(i)
            print(f"  {prm.name:<22} {K.from_z(prm.name, prm.centre, prm.kind):>10.4g} "
                  f"{K.from_z(prm.name, float(result.z[i]), prm.kind):>10.4g}  {status}{tag}", file=out)
            if status != "fitted":
                weak.append(prm.name if prm.box else f"{prm.name} ({'workload' if prm.workload else 'model'})")
        if weak:
            warnings.append(f"warning: {box}: not identifiable from these {len(pts)} points, so they stay at or "
                            f"near their priors: {', '.join(weak)}. Measure other concurrencies, contexts, "
                            f"budgets or cuda-graph settings to pin them down.")
    total = len(result.params)
    print(f"\nthe points determine {result.directions} of {total} directions in the constant space; "
          f"residual scatter {100 * result.residual_sd:.1f}% (log sd)", file=out)
    return warnings


@errors.command("sweep.calibrate")
def main(argv: Sequence[str] | None = None) -> int:
    from sweep.compose import arguments

    args = arguments.parse("sweep.calibrate", _parser(), argv)  # every argument by its rule
    for path in args.results:
        if not path.exists():
            raise errors.ConfigError("results", f"no such file or directory: {path}")
    from sweep.sim import calfile, constants, fit, measured

    from sweep.io.readback import Skipped

    loaded = measured.load(args.results)
    for path, why in loaded.skipped:
        print(f"skipped {path}: {why}")
    bad = Skipped()  # files that are not what they claim: one line each on stderr, exit 1 at the end
    for exc in loaded.bad:
        bad.add(exc.path, exc)
    if not loaded.points:
        raise errors.ConfigError("results", "no real result files with measured figures "
                                 "(need status ok, simulated: false, cells or coding figures)")
    for box in sorted({p.box for p in loaded.points}):  # a box's constants describe one model on it
        models = sorted({str(p.model.get("name") or "?") for p in loaded.points if p.box == box})
        if len(models) > 1:
            raise errors.ConfigError("results", f"box {box} has points from several models "
                                     f"({', '.join(models)}): calibrate one model per box at a time")
    boxes = sorted({p.box for p in loaded.points})
    if args.box:
        unknown = sorted(set(args.box) - set(boxes))
        if unknown:
            raise errors.ConfigError("--box", f"no points for {', '.join(unknown)}; allowed: {', '.join(boxes)}")
    print(f"calibrating from {len(loaded.files)} result files ({len(loaded.points)} points), "
          f"boxes: {', '.join(boxes)}")
    result = fit.fit(loaded.points)
    for line in report(result, loaded):
        print(line, file=sys.stderr)
    if args.dry_run:
        return bad.exit_code()
    out = args.out or constants.user_dir()
    for box in args.box or boxes:
        path = calfile.write(out, box, result, loaded)
        print(f"wrote {path}")
    return bad.exit_code()


if __name__ == "__main__":
    sys.exit(main())
