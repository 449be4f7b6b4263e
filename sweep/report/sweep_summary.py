"""The end-of-multirun table: every trial of the sweep, best feasible marked."""

from __future__ import annotations

from pathlib import Path

from sweep.record.result import iter_results
from sweep.report._console import console as _console
from sweep.score.objective import feasible


def print_sweep(sweep_dir: Path) -> None:
    from rich.table import Table

    docs = sorted((doc for _, doc in iter_results(sweep_dir)), key=lambda d: d.trial.job_num or 0)
    if not docs:
        return
    best = max((d for d in docs if feasible(d)), key=lambda d: d.metrics.tok_s_c1 or 0, default=None)
    table = Table(title=f"sweep {sweep_dir}", caption="bold green: best feasible by tok/s at c1")
    table.add_column("trial", no_wrap=True)
    table.add_column("status", no_wrap=True)
    for col in ("c1 tok/s", "peak tok/s", "accept", "coding", "x AR", "reused"):
        table.add_column(col, justify="right")
    fmt = lambda x, nd=1: "-" if x is None else f"{x:,.{nd}f}"  # noqa: E731
    for d in docs:
        m, t = d.metrics, d.trial
        reason = d.failure.reason if d.failure is not None else None
        status = f"{d.status}: {reason}" if reason else str(d.status)
        table.add_row(f"{t.job_num} {t.name}", status,
                      fmt(m.tok_s_c1), fmt(m.tok_s_peak), fmt(m.accept_len, 2),
                      fmt(m.coding_pass_rate, 2), fmt(m.speedup_vs_baseline, 2),
                      "yes" if d.server is not None and d.server.reused else "no",
                      style="bold green" if d is best else None)
    _console().print(table)
