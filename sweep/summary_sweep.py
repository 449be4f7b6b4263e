"""The end-of-multirun table: every trial of the sweep, best feasible marked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sweep import result as resultfile


def _feasible(doc: dict[str, Any]) -> bool:
    m = doc.get("metrics") or {}
    rate = m.get("coding_pass_rate")
    return doc.get("status") == "ok" and (rate is None or rate >= 1.0) and not m.get("errors")


def print_sweep(sweep_dir: Path) -> None:
    from rich.console import Console
    from rich.table import Table

    docs = sorted(resultfile.iter_results(sweep_dir),
                  key=lambda pd: (pd[1].get("trial") or {}).get("job_num", 0))
    if not docs:
        return
    best = max((d for _, d in docs if _feasible(d)),
               key=lambda d: (d.get("metrics") or {}).get("tok_s_c1") or 0, default=None)
    table = Table(title=f"sweep {sweep_dir}")
    for col in ("#", "trial", "status", "reason", "tok/s c1", "peak", "accept", "coding", "speedup", "reused"):
        table.add_column(col)
    for path, d in docs:
        m = d.get("metrics") or {}
        t = d.get("trial") or {}
        fmt = lambda x, nd=1: "-" if x is None else f"{x:,.{nd}f}"  # noqa: E731
        style = "bold green" if d is best else None
        table.add_row(str(t.get("job_num")), str(t.get("name")), str(d.get("status")),
                      str((d.get("failure") or {}).get("reason") or ""),
                      fmt(m.get("tok_s_c1")), fmt(m.get("tok_s_peak")), fmt(m.get("accept_len"), 2),
                      fmt(m.get("coding_pass_rate"), 2), fmt(m.get("speedup_vs_baseline"), 2),
                      str((d.get("server") or {}).get("reused")), style=style)
    Console(stderr=True).print(table)
