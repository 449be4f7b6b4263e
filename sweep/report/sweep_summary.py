"""The end-of-multirun summary: every trial of the sweep, grouped like with like, best feasible marked.

After a study (hydra/sweeper=optuna) the sweeper has just printed its best, noise and rerun command;
the table then names that trial in one line rather than a second verdict (sweep/report/study_best.py).
"""

from __future__ import annotations

from pathlib import Path

from sweep.record.result import iter_results
from sweep.report._console import console as _console


def print_sweep(sweep_dir: Path, title: str | None = None) -> None:
    from sweep.report.compare import build_groups
    from sweep.report.table import print_groups

    found = sorted(iter_results(sweep_dir), key=lambda p: (p[1].trial.job_num or 0, str(p[0])))
    if not found:
        return
    from sweep.report.study_best import study_best

    groups = build_groups([d for _, d in found], [str(p) for p, _ in found])
    best = study_best(sweep_dir)
    print_groups(_console(160), groups, title or f"sweep {sweep_dir}", where=sweep_dir,
                 study_best=best[0] if best is not None else None)
