"""``python -m sweep.report``: compare trials like with like, as a table or an export.

Rows come from MLflow (an experiment, optionally one sweep) or straight from
the result files under a directory (``--dir``), so the report works with
MLflow down too. Trials are grouped and ranked by :mod:`sweep.report.compare`;
``--format`` picks the rendering (a terminal table per group, CSV, JSON,
Markdown, or the self-contained HTML report), ``-o`` a file to write it to.
``--sweep-id`` takes what the UI shows: the parent run's name or id, the
sweep's ``<date>/<time>``, ``<date> <time>`` or the bare time.

    python -m sweep.report [--dir DIR | --experiment NAME --tracking-uri URI]
                           [--sweep-id ID] [--hardware b300] [--spec ddtree]
                           [--format table|csv|json|md|html] [-o FILE] [--plots DIR] [--full-names]

The table fits the terminal (or ``$COLUMNS`` when piped; 200 columns without it): names leave out
what every row of a group shares (its title says it) and shorten from the middle; ``--full-names``
adds each row's full name and config id under its table, ``--format json`` has them with every figure.

Exit status: 0; 1 when no trial was found or a result file under ``--dir`` was skipped (each
named in one line on stderr, ``skipped <path>: <why>``: sweep/io/readback.py; the others are
shown); 2 on bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

from sweep import errors

FORMATS = ("table", "csv", "json", "md", "html")


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m sweep.report", description=(
        "Compare trials: grouped by box x model x workload x objective, best feasible marked."))
    parser.add_argument("--experiment", help="default: the config's mlflow.experiment (specsweep)")
    parser.add_argument("--sweep-id", help="only this sweep: its MLflow parent run's name or id, "
                        "<date>/<time>, '<date> <time>' or the bare time of its multirun dir")
    parser.add_argument("--hardware", help="only this box (hardware.name)")
    parser.add_argument("--spec", help="only this algorithm (spec.algorithm)")
    parser.add_argument("--format", choices=FORMATS, default="table",
                        help="table (terminal, default), csv, json, md (Markdown) or html (a report to share)")
    parser.add_argument("-o", "--output", type=Path, help="write to this file instead of stdout")
    parser.add_argument("--plots", type=Path, help="also write PNG plots into this folder")
    parser.add_argument("--tracking-uri", help="default: $MLFLOW_TRACKING_URI, else sqlite:///mlflow.db here")
    parser.add_argument("--dir", type=Path, help="read result.json files under DIR instead of MLflow")
    parser.add_argument("--full-names", action="store_true",
                        help="with the table: each row's full name and config id under its table")
    return parser


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    from sweep.compose import arguments

    return arguments.parse("sweep.report", parser(), argv)  # every argument by its rule


def _from_dir(args: argparse.Namespace, on_error: Callable[[Path, Exception], None]
              ) -> tuple[list, list[str], str]:
    from sweep.record.naming import matches_sweep
    from sweep.record.parent import read_parent_file
    from sweep.report.table import docs_from_dir

    if not args.dir.is_dir():
        raise errors.ConfigError("--dir", f"{args.dir}: not a directory")
    docs, sources = docs_from_dir(args.dir, on_error=on_error)
    keep = []
    for i, d in enumerate(docs):
        if args.hardware is not None and d.trial.hardware != args.hardware:
            continue
        if args.spec is not None and str(d.trial.spec) != args.spec:
            continue
        if args.sweep_id is not None:
            sweep_dir = Path(d.trial.sweep_dir) if d.trial.sweep_dir else Path(sources[i]).parent.parent
            if not matches_sweep(args.sweep_id, d.trial.sweep_id, read_parent_file(sweep_dir)):
                continue
        keep.append(i)
    title = str(args.dir)
    if args.sweep_id:
        title = _sweep_title([Path(sources[i]) for i in keep]) or f"{args.dir}, sweep {args.sweep_id}"
    return [docs[i] for i in keep], [sources[i] for i in keep], title


def _sweep_title(paths: list[Path]) -> str | None:
    """The sweep's name as its parent run has it (one --sweep-id selects one sweep)."""
    from sweep.record.parent import read_parent_file

    for p in paths:
        name = read_parent_file(p.parent.parent).get("name")
        if name:
            return str(name)
    return None


@errors.command("sweep.report")
def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    from rich.console import Console

    from sweep import secrets
    from sweep.compose.settings import Mlflow
    from sweep.report import export, html
    from sweep.report.compare import all_rows, build_groups
    from sweep.report.table import print_groups, write_plots

    secrets.install_log_masking()
    from sweep.io.readback import Skipped

    err = Console(stderr=True, highlight=False)
    skipped = Skipped()  # each unreadable result file: one line on stderr, never silent; exit 1
    if args.dir is not None:
        docs, sources, title = _from_dir(args, on_error=skipped)
    else:
        from sweep.record.runs import docs_from_mlflow

        experiment = args.experiment or Mlflow.from_mapping({}).experiment
        docs, sources = docs_from_mlflow(args.tracking_uri, experiment, sweep_id=args.sweep_id,
                                         hardware=args.hardware, spec=args.spec,
                                         full=bool(args.plots) or args.format in ("json", "html"))
        title = f"experiment {experiment}" + (f", sweep {args.sweep_id}" if args.sweep_id else "")
    from sweep.score.consistency import consistent

    kept = consistent(list(zip(docs, sources)), lambda p: p[0], lambda p: p[1], on_bad=skipped.add)
    docs, sources = [d for d, _ in kept], [s for _, s in kept]  # a copy contradicting itself: named, left out
    if not docs:
        _summary(err, skipped, 0)
        if not skipped:
            err.print(f"no trials found ({title})")
        return 1
    groups = build_groups(docs, sources)
    if args.format == "table":
        from sweep.report._console import columns

        out = Console(highlight=False, file=open(args.output, "w") if args.output else None,  # noqa: SIM115
                      width=200 if args.output else None)
        if not out.is_terminal and args.output is None:
            out = Console(highlight=False, width=columns(200))  # piped: $COLUMNS, else every column
        print_groups(out, groups, title, where=args.dir, full=args.full_names)
        if args.output:
            out.file.close()
    else:
        text = {"csv": lambda: export.to_csv(groups), "json": lambda: export.to_json(groups, title),
                "md": lambda: export.to_markdown(groups, title),
                "html": lambda: html.render(docs, title=title, sources=sources)}[args.format]()
        if args.output:
            args.output.parent.mkdir(parents=True, exist_ok=True)
            args.output.write_text(text)
        else:
            sys.stdout.write(text)
    if args.output:
        err.print(f"{args.format}: {args.output}")
    if args.plots:
        for path in write_plots(all_rows(groups), args.plots):
            err.print(f"plot: {path}")
    _summary(err, skipped, len(docs))
    return skipped.exit_code()


def _summary(console: Any, skipped: Any, shown: int) -> None:
    """After the one line per unreadable file (sweep.io.readback.Skipped), how many were left out."""
    if skipped:
        console.print(f"{shown} trials shown; {len(skipped)} result files skipped (unreadable, named above)",
                      soft_wrap=True)


if __name__ == "__main__":
    sys.exit(main())
