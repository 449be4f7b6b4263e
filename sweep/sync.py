"""``python -m sweep.sync DIR``: upload the result files MLflow does not have yet.

Idempotent: a second run creates no duplicate runs. The work is
:func:`sweep.record.sync.sync_dir`; this module parses the arguments and
prints one line per file.

    python -m sweep.sync multirun/2026-01-01/12-00-00 [--tracking-uri URI | --recorded-uri] [--experiment NAME]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from sweep import errors


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m sweep.sync", description=(
        "Upload result.json files that are not in MLflow yet (mlflow.synced false). "
        "Idempotent: running it twice creates no duplicate runs."))
    parser.add_argument("dir", type=Path, help="a results directory (multirun/..., outputs/...)")
    parser.add_argument("--tracking-uri", help="default: the current one: $MLFLOW_TRACKING_URI, "
                        "else sqlite:///mlflow.db in this directory")
    parser.add_argument("--recorded-uri", action="store_true",
                        help="upload to the URI each sweep (or trial config) recorded instead")
    parser.add_argument("--experiment", help="default: the sweep's / config's (specsweep)")
    parser.add_argument("--include-running", action="store_true",
                        help="also upload results still marked running (as KILLED runs)")
    return parser


@errors.command("sweep.sync")
def main(argv: Sequence[str] | None = None) -> int:
    from sweep.compose import arguments

    args = arguments.parse("sweep.sync", parser(), argv)  # every argument by its rule
    from rich.console import Console

    from sweep import secrets
    from sweep.record.sync import sync_dir
    from sweep.report import mlflow_artifacts

    secrets.install_log_masking()
    console = Console(stderr=True, highlight=False, soft_wrap=True)  # one line per file, never wrapped
    if not args.dir.is_dir():
        raise errors.ConfigError("dir", f"{args.dir}: not a directory")
    if args.tracking_uri is not None:  # the rule of mlflow.tracking_uri: one line, before any upload
        from sweep.compose import bounds

        bounds.check("--tracking-uri", args.tracking_uri, rule_key="mlflow.tracking_uri")
    with console.status("syncing results to MLflow ...") as status:
        report = sync_dir(args.dir, tracking_uri=args.tracking_uri, experiment=args.experiment,
                          include_running=args.include_running, recorded_uri=args.recorded_uri,
                          progress=lambda p: status.update(f"syncing {p} ..."),
                          plots=mlflow_artifacts.trial_plots, artifacts=mlflow_artifacts.sweep_artifacts)
    for path, run_id in report.uploaded:
        console.print(f"[green]uploaded[/green] {path} -> run {run_id}")
    for path, run_id in report.linked:
        console.print(f"[cyan]linked[/cyan]   {path} -> existing run {run_id}")
    for path, run_id in report.parents:
        console.print(f"[green]parent[/green]   {path} -> run {run_id} (ended)")
    for path, why in report.skipped:
        console.print(f"[yellow]skipped[/yellow]  {path}: {why}")
    for path, why in report.failed:
        console.print(f"[red]failed[/red]   {path}: {secrets.mask_text(why)}")
    console.print(f"{len(report.uploaded)} uploaded, {len(report.linked)} linked to existing runs, "
                  f"{report.already} already in MLflow, "
                  f"{len(report.skipped)} skipped, {len(report.failed)} failed")
    if report.failed and any(isinstance(e, str) and "unreachable" in e for _, e in report.failed):
        console.print("start the tracking server (or pass --tracking-uri) and run sync again")
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
