"""What a run leaves to look at -- the HTML report and the PNG plots -- and where it says so.

Why: a single ``python -m sweep`` used to leave only ``result.json``, and its plots
existed only as MLflow artifacts nobody was told about. Now every trial writes
its plots next to its result (``<job dir>/plots/``; MLflow logs the same files),
a single run writes ``report.html`` beside them (the trial, plus the baseline its
speedup came from), a multirun its report and sweep plots into the sweep dir,
and ``python -m sweep`` ends with one line per output: report, plots, MLflow.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

from sweep.record.result import FILENAME, TrialResult

PLOTS_DIR = "plots"


def trial_plots(doc: TrialResult, job_dir: Path) -> list[Path]:
    """The trial's plots into ``<job_dir>/plots/`` (none without a measured cell)."""
    from sweep.report import plots

    return plots.trial_plots(doc, Path(job_dir) / PLOTS_DIR)


def sweep_plots(docs: Sequence[TrialResult], sweep_dir: Path) -> list[Path]:
    """The sweep's plots (throughput vs budget, Pareto) into ``<sweep_dir>/plots/``."""
    from sweep.report import plots

    return plots.sweep_plots(docs, Path(sweep_dir) / PLOTS_DIR)


def _baseline_docs(doc: TrialResult, job_dir: Path) -> list[tuple[Path, TrialResult]]:
    """The run's own baseline (``baseline.auto_run``: ``<job dir>/baseline/``) and the one its
    speedup was computed against, so the report shows the speedup too."""
    from sweep.record.result import iter_results

    found = [(p, d) for p, d in iter_results(job_dir) if p.parent != job_dir]
    ref = doc.baseline.result if doc.baseline is not None else None
    if ref and Path(ref).is_file() and all(Path(ref).resolve() != p.resolve() for p, _ in found):
        try:
            found.append((Path(ref), TrialResult.load(Path(ref))))
        except (OSError, ValueError):
            pass
    return found


def single_report(result_path: Path) -> Path | None:
    """``report.html`` next to a single run's result.json; None when nothing can be read."""
    from sweep.report import html

    result_path = Path(result_path)
    try:
        doc = TrialResult.load(result_path)
    except (OSError, ValueError):
        return None
    job_dir = result_path.parent
    found = [(result_path, doc), *_baseline_docs(doc, job_dir)]
    return html.write_report([d for _, d in found], job_dir / html.FILENAME, title=str(doc.trial.name),
                             sources=[str(p) for p, _ in found])


def shown(path: Path) -> str:
    """A path as the user can paste it: relative to the current directory when inside it."""
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return str(path)
    return rel if not rel.startswith("..") else str(path)


def plot_files(directory: Path) -> list[Path]:
    return sorted(Path(directory).glob("*.png")) if Path(directory).is_dir() else []


def where_lines(report: Path | None, plots: Sequence[Path], mlflow: str | None = None) -> list[str]:
    """The closing lines of a run: ``report:``, ``plots:``, ``mlflow:`` (what exists)."""
    lines = []
    if report is not None:
        lines.append(f"report: {shown(report)}")
    if plots:
        folder = Path(plots[0]).parent
        lines.append(f"plots:  {shown(folder)}/ ({', '.join(p.name for p in plots)})")
    if mlflow:
        lines.append(f"mlflow: {mlflow}")
    return lines


def say(lines: Sequence[str]) -> None:
    """Print the closing lines on stderr, after the trial's own summary."""
    import sys

    for line in lines:
        print(line, file=sys.stderr, flush=True)


__all__ = ["FILENAME", "PLOTS_DIR", "plot_files", "say", "single_report", "sweep_plots", "trial_plots",
           "where_lines"]
