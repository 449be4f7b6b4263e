"""The end-of-multirun table: every trial of the sweep, best feasible marked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sweep import result as resultfile


def _console() -> "Console":
    """stderr console; 120 columns when not a terminal (logs, CI) so tables stay readable."""
    from rich.console import Console

    console = Console(stderr=True)
    return console if console.is_terminal else Console(stderr=True, width=120)


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
    table = Table(title=f"sweep {sweep_dir}", caption="bold green: best feasible by tok/s at c1")
    table.add_column("trial", no_wrap=True)
    table.add_column("status", no_wrap=True)
    for col in ("c1 tok/s", "peak tok/s", "accept", "coding", "x AR", "reused"):
        table.add_column(col, justify="right")
    fmt = lambda x, nd=1: "-" if x is None else f"{x:,.{nd}f}"  # noqa: E731
    for _path, d in docs:
        m = d.get("metrics") or {}
        t = d.get("trial") or {}
        reason = (d.get("failure") or {}).get("reason")
        status = f"{d.get('status')}: {reason}" if reason else str(d.get("status"))
        table.add_row(f"{t.get('job_num')} {t.get('name')}", status,
                      fmt(m.get("tok_s_c1")), fmt(m.get("tok_s_peak")), fmt(m.get("accept_len"), 2),
                      fmt(m.get("coding_pass_rate"), 2), fmt(m.get("speedup_vs_baseline"), 2),
                      "yes" if (d.get("server") or {}).get("reused") else "no",
                      style="bold green" if d is best else None)
    _console().print(table)
