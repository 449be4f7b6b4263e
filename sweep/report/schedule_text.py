"""The schedule on a terminal: per load level the best config, its speedup, ties; the bands, the crossovers."""

from __future__ import annotations

from typing import Any, Sequence

from sweep.report._console import console as _console
from sweep.report._console import fmt
from sweep.report.schedule import Schedule


def _ci(ci: tuple[float, float] | None, nd: int = 0) -> str:
    return f" [{ci[0]:,.{nd}f}-{ci[1]:,.{nd}f}]" if ci is not None else ""


def _regret(lv: Any) -> str:
    r = lv.regret
    if r is None:
        return "-"
    return "best" if r <= 0.0005 else f"<={r:.1%}"


def _level_rows(s: Schedule) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for lv in s.levels:
        pick = lv.pick
        missed = [e.name for e in lv.entries if not e.meets]
        if pick is None:
            who = "none meets it"
        elif lv.state in ("decided", "equivalent"):
            who = f"{pick.name} ({lv.state})"
        else:
            who = f"{pick.name} ({lv.state})"
        speedup = "-" if lv.speedup is None else f"{lv.speedup:.2f}x" + _ci(lv.speedup_ci, 2)
        rows.append((f"{lv.load:g}", who, (fmt(pick.tok_s) + _ci(pick.ci)) if pick else "-",
                     _regret(lv), str(pick.n) if pick else "-", speedup,
                     ", ".join(f"{e.name} {fmt(e.tok_s)}{_ci(e.ci)}" for e in lv.tied) or "-",
                     ", ".join(missed) or "-"))
    return rows


def summary_lines(s: Schedule, where: Any = None) -> list[str]:
    """The bands and crossovers as sentences (also the HTML section's); each says only what its
    levels measured and decided."""
    unit = s.unit
    lines = []
    for i, b in enumerate(s.bands):
        span = f"{unit} {b.start:g}" + (f"-{b.to:g}" if b.to != b.start else "")
        if b.best is not None:
            what = b.best.name + (" (within the margin of the best)" if b.state == "equivalent" else "")
        elif b.state == "none":
            what = "no config meets the SLO without failed requests"
        else:
            what = f"open -- {b.why}"
        lines.append(f"{span}: {what}")
        if i == len(s.bands) - 1:
            lines.append(f"above {unit} {b.to:g}: not measured")
    for c in s.crossovers:
        lines.append("crossover " + c.line(unit))
    to = f"python -m sweep.decide --dir {where}" if where else "python -m sweep.decide --dir <the results' dir>"
    for lv in s.levels:
        cost = lv.settle(s.campaign, s.context)
        if lv.state in ("open", "unknown"):
            likely = (f"likely ~{cost[0]} more round(s) of its contenders: ~{cost[1]} run(s), ~{cost[2]:.2f} GPU-h"
                      if cost is not None else "more than 50 rounds at these gaps: the pick and its bound may be "
                      "the answer")
            landscape = all(not e.row.doc.trial.overrides for e in lv.entries)
            how = ("more rounds of the recorded landscape (benchmarks/record_landscape.py resumes it with "
                   "--rounds N)" if landscape else to)
            lines.append(f"to settle {unit} {lv.load:g}: {how} ({likely})")
    lines.append(_speculation_line(s))
    lines.append(f"noise: {s.noise}")
    return lines


def _speculation_line(s: Schedule) -> str:
    """Whether speculation pays, in words that agree with the table."""
    unit = s.unit
    if not any(lv.baseline is not None for lv in s.levels):
        return ("no spec=none trial in this group: no speedup and no baseline crossover "
                "(run spec=none with the same box and workload)")
    stop = s.speculation_stops_paying
    if stop is not None:
        return (f"speculation stops paying at {unit} {stop:g}: from there on the autoregressive baseline is the "
                "pick (no config beats it by more than the margin, at 95%)")
    pays = [lv.load for lv in s.levels if lv.best is not None and not lv.baseline_wins
            and lv.baseline is not None and lv.speedup_ci is not None and lv.speedup_ci[0] > 1.0]
    small = [lv.load for lv in s.levels if lv.best is not None and not lv.baseline_wins
             and lv.load not in pays]
    open_ = [lv.load for lv in s.levels if lv.best is None and lv.leader is not None]
    none = [lv.load for lv in s.levels if lv.leader is None]
    base = [lv.load for lv in s.levels if lv.baseline_wins]

    def loads(xs: list[float]) -> str:
        return ", ".join(f"{x:g}" for x in xs)

    parts = []
    if pays:
        parts.append(f"speculation pays beyond noise at {unit} {loads(pays)}")
    if small:
        parts.append(f"the pick drafts at {loads(small)}, its gain over the baseline not shown beyond noise")
    if base:
        parts.append(f"the baseline is the pick at {loads(base)}")
    if open_:
        parts.append(f"open at {loads(open_)}")
    if none:
        parts.append(f"nothing meets the SLO at {loads(none)}")
    if pays and len(pays) == len(s.levels):
        return f"speculation pays beyond noise at every measured load ({unit} {loads(pays)})"
    return "; ".join(parts) if parts else "no verdict on speculation"


def print_schedules(schedules: Sequence[Schedule], out: Any = None, where: Any = None) -> None:
    from rich.table import Table

    console = out or _console()
    for s in schedules:
        slo = s.slo.label() if s.slo is not None else "no SLO (objective.slo unset)"
        sim = " (simulated)" if s.group.simulated else ""
        table = Table(title=f"schedule: {s.title}{sim}; {s.group.rows[0].workload}; {slo}")
        for col, just in ((s.unit, "right"), ("pick (verdict)", "left"), ("tok/s [95%]", "right"),
                          ("regret", "right"), ("n", "right"), ("speedup vs AR", "right"),
                          ("open with", "left"), ("missed SLO/errors", "left")):
            table.add_column(col, justify=just)  # type: ignore[arg-type]
        for row in _level_rows(s):
            table.add_row(*row)
        table.caption = ("pick: decided (beats every other beyond noise), equivalent (the cheapest within the "
                         "margin of the best), or open (the smallest regret bound); regret: the most the pick may "
                         "be below the true best, at 95%; n: measurements of the pick's cell")
        console.print(table)
        for line in summary_lines(s, where):
            console.print("  " + line, markup=False, highlight=False, soft_wrap=True)  # one line, one fact
