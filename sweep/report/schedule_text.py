"""The schedule on a terminal: per load level the best config, its speedup, ties; the bands, the crossovers."""

from __future__ import annotations

from typing import Any, Sequence

from sweep.report._console import console as _console
from sweep.report._console import fmt
from sweep.report.schedule import Schedule


def _level_rows(s: Schedule) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for lv in s.levels:
        best = lv.best
        ci = f" [{best.ci[0]:,.0f}-{best.ci[1]:,.0f}]" if best is not None and best.ci else ""
        missed = [e.name for e in lv.entries if not e.meets]
        rows.append((f"{lv.load:g}", best.name if best else "none meets it",
                     (fmt(best.tok_s) + ci) if best else "-",
                     f"{lv.speedup:.2f}x" if lv.speedup is not None else "-",
                     ", ".join(e.name for e in lv.tied) or "-",
                     ", ".join(missed) or "-"))
    return rows


def summary_lines(s: Schedule) -> list[str]:
    """The bands and crossovers as sentences (also the HTML section's)."""
    unit = s.unit
    lines = []
    for b in s.bands:
        until = f"up to {unit} {b.until:g} (exclusive)" if b.until is not None else "and above"
        what = b.name or "no config meets the SLO (beyond every config's max load)"
        lines.append(f"{unit} {b.start:g} {until}: {what}")
    for c in s.crossovers:
        lines.append("crossover " + c.line(unit))
    stop = s.speculation_stops_paying
    if stop is not None:
        lines.append(f"speculation stops paying at {unit} {stop:g}: the autoregressive baseline is best "
                     "(or tied within noise) from there on")
    elif not any(lv.baseline is not None for lv in s.levels):
        lines.append("no spec=none trial in this group: no speedup and no baseline crossover "
                     "(run spec=none with the same box and workload)")
    else:
        lines.append("speculation pays at every measured load")
    return lines


def print_schedules(schedules: Sequence[Schedule], out: Any = None) -> None:
    from rich.table import Table

    console = out or _console()
    for s in schedules:
        slo = s.slo.label() if s.slo is not None else "no SLO (objective.slo unset)"
        sim = " (simulated)" if s.group.simulated else ""
        table = Table(title=f"schedule: {s.title}{sim}; {s.group.rows[0].workload}; {slo}")
        for col, just in ((s.unit, "right"), ("best feasible config", "left"), ("tok/s", "right"),
                          ("speedup vs AR", "right"), ("tied within noise", "left"), ("missed SLO/errors", "left")):
            table.add_column(col, justify=just)  # type: ignore[arg-type]
        for row in _level_rows(s):
            table.add_row(*row)
        table.caption = ("best: highest output tok/s among configs passing the correctness gate whose cell "
                         "met the SLO; ties: overlapping 95% intervals (workload.repeats)")
        console.print(table)
        for line in summary_lines(s):
            console.print("  " + line, markup=False, highlight=False)
