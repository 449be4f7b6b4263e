"""``python -m sweep.report``: compare trials in one table, the best feasible one marked.

Rows come from MLflow (an experiment, optionally one sweep) or straight from
the result files under a directory (``--dir``), so the report works with
MLflow down too. The table is :mod:`sweep.report.table`'s, the MLflow reading
:mod:`sweep.record.runs`'; this module only parses the arguments.

    python -m sweep.report [--experiment specsweep] [--sweep-id ID] [--hardware b300]
                           [--spec ddtree] [--plots DIR] [--tracking-uri URI] [--dir DIR]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sweep.report",
                                     description="Compare trials: one table, best feasible marked.")
    parser.add_argument("--experiment", help="default: the config's mlflow.experiment (specsweep)")
    parser.add_argument("--sweep-id", help="only this sweep (its multirun dir name)")
    parser.add_argument("--hardware", help="only this box (hardware.name)")
    parser.add_argument("--spec", help="only this algorithm (spec.algorithm)")
    parser.add_argument("--plots", type=Path, help="write PNG plots into this folder")
    parser.add_argument("--tracking-uri", help="default: $MLFLOW_TRACKING_URI, else sqlite:///mlflow.db here")
    parser.add_argument("--dir", type=Path, help="read result.json files under DIR instead of MLflow")
    args = parser.parse_args(argv)
    from rich.console import Console

    from sweep import secrets
    from sweep.compose.settings import Mlflow
    from sweep.report.table import docs_from_dir, render_table, rows_from_docs, write_plots

    secrets.install_log_masking()
    console = Console(highlight=False)
    if not console.is_terminal:  # piped or logged: wide enough for every column
        console = Console(highlight=False, width=160)
    unreadable: list[tuple[Path, Exception]] = []  # named and counted as failed, never skipped
    if args.dir is not None:
        if not args.dir.is_dir():
            console.print(f"error: --dir {args.dir}: not a directory")
            return 2
        docs, sources = docs_from_dir(args.dir, on_error=lambda p, e: unreadable.append((p, e)))
        keep = [i for i, d in enumerate(docs) if all(want is None or str(have) == want for want, have in (
            (args.sweep_id, d.trial.sweep_id), (args.hardware, d.trial.hardware), (args.spec, d.trial.spec)))]
        docs, sources = [docs[i] for i in keep], [sources[i] for i in keep]
        title = f"trials under {args.dir}"
    else:
        from sweep.record.runs import docs_from_mlflow

        experiment = args.experiment or Mlflow.from_mapping({}).experiment
        docs, sources = docs_from_mlflow(args.tracking_uri, experiment, sweep_id=args.sweep_id,
                                         hardware=args.hardware, spec=args.spec, full=bool(args.plots))
        title = f"experiment {experiment}" + (f", sweep {args.sweep_id}" if args.sweep_id else "")
    rows = rows_from_docs(docs, sources)
    if rows:
        console.print(render_table(rows, title))
    elif not unreadable:
        console.print(f"no trials found ({title})")
        return 1
    if args.plots and rows:
        for path in write_plots(rows, args.plots):
            console.print(f"plot: {path}")
    for path, exc in unreadable:
        console.print(f"failed: {path}: unreadable result file ({secrets.mask_text(str(exc))})")
    if unreadable:
        console.print(f"{len(rows)} trials shown; {len(unreadable)} result files unreadable "
                      "(counted as failed trials)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
