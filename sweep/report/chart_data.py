"""What a schedule's charts draw: measured values only, never the model's figure above them.

The schedule judges each load level with the campaign model (sweep/score/campaign.py),
whose estimates and intervals sit where the model puts them: on a landscape
with few rounds an interval's top was far above anything run, and the chart's
envelope passed about 1,100 tok/s at concurrency 8 where the best measured
value was 811. A reader takes a chart's line for what the box did. So both
charts (the PNG, :mod:`sweep.report.deployment_plots`; the HTML's SVG,
:mod:`sweep.report.deployment_html`) draw from here: each config's points are
its measured cells (the pooled mean of its runs), the lines between measured
loads are interpolation (drawn dashed and labelled so), and the best band sits
at the measured value of each level's pick. The model's figures stay in the
tables and in the points' tooltips.
"""

from __future__ import annotations

from dataclasses import dataclass

from sweep.report.schedule import Schedule
from sweep.score.metrics import load_of, ok_cells

INTERPOLATED = "dashed: interpolated between measured loads"


@dataclass(frozen=True)
class BandPoint:
    """A level's pick, where the best band passes: its measured tok/s there."""

    load: float
    tok_s: float
    name: str
    tied: bool  # the level is open: the pick is not told apart from others


def measured_curves(s: Schedule) -> dict[str, list[tuple[float, float]]]:
    """Per config (its name), its measured (load, tok/s) at the schedule's context, by load."""
    out: dict[str, list[tuple[float, float]]] = {}
    for r in s.rows:
        pts = sorted((load_of(c), float(c.output_tok_s)) for c in ok_cells(r.doc.cells)
                     if c.context == s.context and c.output_tok_s is not None)
        if pts:
            out[r.name] = pts
    return out


def best_band(s: Schedule) -> list[BandPoint]:
    """At each level with a pick (decided or equivalent), the pick's measured tok/s there."""
    return [BandPoint(lv.load, float(lv.best.cell.output_tok_s), lv.best.name, bool(lv.tied))
            for lv in s.levels if lv.best is not None and lv.best.cell.output_tok_s is not None]


def top_measured(s: Schedule) -> float:
    """The highest measured tok/s the charts may reach (0 when nothing was measured)."""
    return max((y for pts in measured_curves(s).values() for _, y in pts), default=0.0)
