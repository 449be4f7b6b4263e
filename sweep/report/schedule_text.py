"""The schedule on a terminal: per load level the best config, its speedup, ties; the bands, the crossovers."""

from __future__ import annotations

from typing import Any, Sequence

from sweep.report._console import console as _console
from sweep.report._console import fmt
from sweep.report.fit import Column, Fitted, fit
from sweep.report.fit import table as fitted_table
from sweep.report.schedule import Schedule
from sweep.report.records import LANDSCAPE_MORE, recorded_landscape
from sweep.report.shortnames import renamed


def _ci(ci: tuple[float, float] | None, nd: int = 0) -> str:
    return f" [{ci[0]:,.{nd}f}-{ci[1]:,.{nd}f}]" if ci is not None else ""


def _regret(lv: Any) -> str:
    r = lv.regret
    if r is None:
        return "-"
    return "best" if r <= 0.0005 else f"<={r:.1%}"


def _columns(s: Schedule) -> list[Column]:
    """The schedule's columns, the pick's name aside: the load, the verdict, the pick's tok/s and
    interval and n are never left out; how many configs it is open with and how many missed the
    SLO are counts (the lines under the table name them)."""
    levels = s.levels

    def speedup(lv: Any) -> str:
        return "-" if lv.speedup is None else f"{lv.speedup:.2f}x" + _ci(lv.speedup_ci, 2)

    return [
        Column(s.unit, [f"{lv.load:g}" for lv in levels]),
        Column("verdict", [lv.state if lv.pick is not None else "none meets it" for lv in levels],
               justify="left"),
        Column("tok/s [95%]", [(fmt(lv.pick.tok_s) + _ci(lv.pick.ci)) if lv.pick else "-" for lv in levels]),
        Column("n", [str(lv.pick.n) if lv.pick else "-" for lv in levels]),
        Column("regret", [_regret(lv) for lv in levels], optional=True),
        Column("speedup vs AR", [speedup(lv) for lv in levels], optional=True),
        Column("open with", [str(len(lv.tied)) if lv.tied else "-" for lv in levels], optional=True),
        Column("missed SLO", [str(k) if (k := sum(1 for e in lv.entries if not e.meets)) else "-"
                              for lv in levels], optional=True),
    ]


def fitted_schedule(s: Schedule, width: int | None) -> Fitted:
    """The schedule's columns and names at ``width``: every config of its group kept distinct, the
    table's rows by their pick."""
    rows = s.group.rows
    index = {r.config_id: i for i, r in enumerate(rows)}
    picks = [index.get(lv.pick.row.config_id) if lv.pick is not None else None for lv in s.levels]
    return fit(_columns(s), [r.name for r in rows], width, ids=[r.config_id for r in rows], rows=picks)


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
            what = str(b.why) if str(b.why).startswith("open") else f"open -- {b.why}"
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
            how = LANDSCAPE_MORE if recorded_landscape(e.row.doc for e in lv.entries) else to
            lines.append(f"to settle {unit} {lv.load:g}: {how} ({likely})")
    for lv in s.levels:
        missed = [e.name for e in lv.entries if not e.meets]
        if missed:
            lines.append(f"missed the SLO or had failed requests at {unit} {lv.load:g}: {', '.join(missed)}")
    lines.append(_speculation_line(s))
    lines.append(s.noise if s.noise.startswith("noise") else f"noise: {s.noise}")  # said once, as judged
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


def print_schedules(schedules: Sequence[Schedule], out: Any = None, where: Any = None, full: bool = False) -> None:
    """Each schedule's table at the console's width, then its lines naming configs as the table does;
    ``full``: each config's full name and id under the table (``--full-names``)."""
    console = out or _console()
    for s in schedules:
        slo = s.slo.label() if s.slo is not None else "no SLO (objective.slo unset)"
        sim = " (simulated)" if s.group.simulated else ""
        fitted = fitted_schedule(s, console.width)
        note = fitted.names.note()
        caption = ("verdict: decided (beats every other beyond noise), equivalent (the cheapest within the "
                   "margin of the best), or open (the smallest regret bound); regret: the most the pick may "
                   "be below the true best, at 95%; n: measurements of the pick's cell")
        title = f"schedule: {s.title}{sim}; {s.group.rows[0].workload}; {slo}" + (f" · {note}" if note else "")
        console.print(fitted_table(fitted, "pick", 1, title=title, caption=caption))
        rows = s.group.rows
        if full:
            console.print("full names:", highlight=False)
            for line in fitted.key([r.name for r in rows], [r.config_id for r in rows]):
                console.print(line, markup=False, highlight=False, soft_wrap=True)
        short = fitted.mapping([r.name for r in rows])
        for line in [fitted.note(), *summary_lines(s, where)]:
            if line:
                console.print("  " + renamed(line, short), markup=False, highlight=False)  # one line, one fact


def schedule_rows(schedules: Sequence[Schedule]) -> list[dict[str, Any]]:
    """``--format json``: each level's pick with its full name, config id, verdict, tok/s, interval,
    n, regret and speedup -- what the table shows, for a program."""
    out = []
    for s in schedules:
        for lv in s.levels:
            pick = lv.pick
            out.append({"schedule": s.title, "engine": s.group.first.config_section("server").get("name"),
                        "workload": s.group.rows[0].workload, "context": s.context, "unit": s.unit,
                        "load": lv.load, "verdict": lv.state,
                        "marker": "★" if lv.best is not None and lv.best is pick else "≈" if pick else "",
                        "name": pick.name if pick else None, "config_id": pick.row.config_id if pick else None,
                        "tok_s": pick.tok_s if pick else None, "ci": list(pick.ci) if pick and pick.ci else None,
                        "n": pick.n if pick else None, "regret": lv.regret, "speedup": lv.speedup,
                        "speedup_ci": list(lv.speedup_ci) if lv.speedup_ci else None,
                        "open_with": [{"name": e.name, "config_id": e.row.config_id, "tok_s": e.tok_s,
                                       "ci": list(e.ci) if e.ci else None} for e in lv.tied],
                        "missed_slo": sorted(e.name for e in lv.entries if not e.meets)})
    return out
