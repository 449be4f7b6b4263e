"""Interactivity against throughput: tok/s per user vs tok/s per GPU, one point per config and load.

The view vLLM's ``bench sweep plot_pareto`` and llm-optimizer's dashboard
show: a deployment buys speed for each user (x: the per-stream tok/s one
request sees once its first token arrived) with the box's throughput (y:
output tok/s per GPU, so boxes of different sizes compare), and the configs
worth keeping are the **front** -- no other point is better on both. Every
cell of every trial that passes the correctness gate is a point, labelled
with its config and context (and load); points from cells that missed the
SLO are drawn hollow (the front is the trade-off itself: the SLO is a line
across it), points whose requests failed are never on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from sweep.report.compare import Group
from sweep.report.schedule import correct
from sweep.score.metrics import cell_goodput, load_of, ok_cells, slo_of
from sweep.stats.slo import Slo


@dataclass
class Point:
    name: str
    context: int
    load: float
    per_user: float
    per_gpu: float
    eligible: bool  # passed the correctness gate (the trial) and no request failed (the cell)
    meets_slo: bool = True  # met the SLO (when one is set): drawn hollow otherwise
    on_front: bool = False

    @property
    def label(self) -> str:
        return f"{self.name}, ctx {self.context}, c{self.load:g}"


def gpus_of(group: Group) -> tuple[int, str]:
    """GPUs of the group's box and the y axis' unit (a CPU box counts as one)."""
    n = group.first.config_section("hardware").get("num_gpus")
    return (int(n), "per GPU") if isinstance(n, int) and n > 0 else (1, "per box (no GPU)")


def front(points: Sequence[Point]) -> list[Point]:
    """Eligible points no other eligible point beats on both axes, by tok/s per user."""
    cands = sorted((p for p in points if p.eligible), key=lambda p: (-p.per_user, -p.per_gpu))
    out: list[Point] = []
    best_y = float("-inf")
    for p in cands:
        if p.per_gpu > best_y:
            out.append(p)
            best_y = p.per_gpu
    return sorted(out, key=lambda p: p.per_user)


def points_of(group: Group, slo: Slo | None = None) -> list[Point]:
    """Every measured cell of the group's finished trials, the front marked."""
    n, _ = gpus_of(group)
    pts: list[Point] = []
    for r in group.rows:
        if not r.doc.ok or not correct(r):
            continue
        own = slo_of(r.doc)
        judge_under = slo if slo is not None else own
        max_errors = r.objective.constraints.max_errors
        for c in ok_cells(r.doc.cells):
            if c.per_stream_tok_s is None:
                continue
            judged = cell_goodput(c, judge_under, own) if judge_under.active else None
            meets = judged is None or judged[0] >= judge_under.target
            clean = max_errors is None or float(c.errors or 0) <= float(max_errors)
            pts.append(Point(r.name, int(c.context), load_of(c), float(c.per_stream_tok_s),
                             float(c.output_tok_s or 0.0) / n, clean, meets))
    for p in front(pts):
        p.on_front = True
    return pts
