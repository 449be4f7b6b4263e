"""The objective of predicted cells: how the pre-screen ranks configs it never ran.

The twin (``sweep.sim.predict``) predicts a config's cells with result.json's
keys; this turns them into the same objective a measured trial gets
(:func:`sweep.score.objective.objective_value`, through the same headline
metrics), so the ranking, the trial's "predicted vs measured" and the sweeper
all mean one thing by "objective". A constraint the twin can predict is
honoured: p99 TTFT cannot be lower than the predicted median, so a config whose
predicted median TTFT already breaks ``ttft_ms_p99_max`` is infeasible. The
coding pass rate and request errors cannot be predicted (assumed met). Under an
SLO (``objective.slo``) each predicted cell is one typical request: it meets the
SLO or not by its predicted medians (attainment 1 or 0), so ``goodput`` and
``max_load`` rank on the twin too (``max_load``: the highest predicted concurrency
of the workload that meets it).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from sweep.compose.settings import Objective
from sweep.record.result import Cell, TrialResult
from sweep.score.metrics import metrics
from sweep.score.objective import objective_value


def as_result(cells: Sequence[Mapping[str, Any]], objective: Objective | None = None) -> TrialResult:
    """A result document holding predicted cells (only the keys a Cell has), judged under the
    objective's SLO when it has one."""
    known = {f.name for f in Cell._fields()}
    doc = TrialResult(status="ok", simulated=True,
                      cells=[Cell.from_dict({k: v for k, v in c.items() if k in known}) for c in cells])
    slo = objective.slo if objective is not None else None
    if slo is not None and slo.active:
        doc.config = {"objective": {"slo": slo.to_dict()}}
        for cell, raw in zip(doc.cells, cells):
            # the twin predicts a per-token time, TPOT: its ITL (an unknown ITL never meets a limit)
            itl = raw.get("itl_ms_p50", raw.get("tpot_ms_p50"))
            meets = slo.meets(raw.get("ttft_ms_p50"), raw.get("tpot_ms_p50"), raw.get("e2e_ms_p50"), itl)
            cell.slo_attainment = 1.0 if meets else 0.0
            cell.goodput_tok_s = float(raw.get("output_tok_s") or 0.0) if meets else 0.0
    doc.metrics = metrics(doc)
    return doc


def predicted_objective(cells: Sequence[Mapping[str, Any]], objective: Objective) -> float | None:
    """The objective the predicted cells would give (None without cells)."""
    return objective_value(as_result(cells, objective), objective) if cells else None


def predicted_infeasible(cells: Sequence[Mapping[str, Any]], objective: Objective) -> str | None:
    """Why the predicted cells break a constraint the twin can predict, or None."""
    limit = objective.constraints.ttft_ms_p99_max
    worst = max((float(c.get("ttft_ms_p50") or 0.0) for c in cells), default=0.0)
    if limit is not None and worst > limit:
        return f"predicted median TTFT {worst:.0f} ms > objective.constraints.ttft_ms_p99_max={limit:g}"
    return None
