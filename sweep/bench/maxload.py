"""The highest load a config carries under its latency SLO, found in one server start.

What the people who size deployments ask their tools for (GuideLLM's
``goodput`` profile, AIPerf's ``max-concurrency-under-sla``, SGLang's
``auto_benchmark`` QPS bisection, vLLM's former ``serve_sla``): not a fixed
ladder of loads but the edge. The search (``workload.max_load``):

1. **double** from ``start`` while the load meets the SLO (attainment >=
   ``objective.slo.percentile`` / 100, :mod:`sweep.stats.slo`), up to ``max``;
   when even ``start`` misses, halve instead (a rate may start too high;
   concurrency stops at 1);
2. **bisect** between the highest load that met it and the lowest that
   missed, until they are within ``tolerance`` of each other (relative:
   (missed - met) / met; adjacent integers for concurrency) or
   ``max_rounds`` bisection probes were spent.

Every probe is a cell of the trial (``load_search: max_load``), measured like
any other (warm-up, flush, ``workload.repeats``), so nothing the search saw is
thrown away. With repeats the verdict is the pooled attainment's; the answer's
uncertainty is the range between the highest load every repeat met and the
highest any repeat met (``value_ci``). :class:`LoadSearch` is the pure
algorithm (no I/O: tests drive it with a known edge); :class:`MaxLoadPlan`
hands its loads to the sender as :class:`~sweep.bench.loadplan.LoadPoint`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

from sweep.bench.loadplan import LoadPoint, requests_at

if TYPE_CHECKING:
    from sweep.bench.cell import CellResult
    from sweep.compose.config import Workload
    from sweep.stats.slo import Slo


@dataclass
class LoadSearch:
    """Doubling, then bisection, on a monotone pass/fail of the load (module docstring)."""

    start: float
    limit: float
    tolerance: float = 0.1
    max_rounds: int = 8
    integer: bool = True
    probes: list[tuple[float, bool]] = field(default_factory=list)
    stopped: str | None = None
    _rounds: int = 0
    _pending: float | None = None

    @property
    def met(self) -> float | None:
        """The highest load that met the SLO."""
        return max((x for x, ok in self.probes if ok), default=None)

    @property
    def missed(self) -> float | None:
        """The lowest load above :attr:`met` that missed it."""
        lo = self.met
        return min((x for x, ok in self.probes if not ok and (lo is None or x > lo)), default=None)

    def _round(self, x: float) -> float:
        return float(max(1, math.floor(x))) if self.integer else float(f"{x:.3g}")

    def next(self) -> float | None:
        """The next load to probe; None when the search is over (:attr:`stopped` says why)."""
        if self.stopped is not None:
            return None
        if self._pending is not None:
            return self._pending
        load = self._choose()
        self._pending = load
        return load

    def _choose(self) -> float | None:
        if not self.probes:
            return self._round(self.start)
        met, missed = self.met, self.missed
        if met is None:  # everything so far missed: halve below the lowest probe
            lowest = min(x for x, _ in self.probes)
            down = self._round(lowest / 2)
            if down >= lowest or self._rounds >= self.max_rounds:
                return self._stop("first_missed")
            self._rounds += 1
            return down
        if missed is None:  # still doubling, up to the limit
            up = min(self._round(met * 2), self._round(self.limit))
            return up if up > met else self._stop("limit")
        if (missed - met) <= self.tolerance * met or (self.integer and missed - met <= 1):
            return self._stop("tolerance")
        if self._rounds >= self.max_rounds:
            return self._stop("rounds")
        mid = self._round((met + missed) / 2)
        if not met < mid < missed:
            return self._stop("tolerance")
        self._rounds += 1
        return mid

    def _stop(self, why: str) -> float | None:
        """Over, for ``why``: nothing more to probe."""
        self.stopped = why
        return None

    def record(self, load: float, met: bool) -> None:
        if self._pending is None or load != self._pending:
            raise ValueError(f"recorded load {load} was not the one handed out ({self._pending})")
        self._pending = None
        self.probes.append((load, bool(met)))

    def fail(self, why: str = "failed") -> None:
        """End the search early (the server stopped answering)."""
        self._pending = None
        self.stopped = why


class MaxLoadPlan:
    """The search as a plan for the sender: one probe cell at a time (concurrency or rate)."""

    def __init__(self, workload: Workload, slo: Slo) -> None:
        ml = workload.max_load
        self.workload, self.slo, self.over = workload, slo, ml.over
        self.context = int(workload.contexts[0])
        self.cap = int(ml.concurrency)
        self.search = LoadSearch(start=ml.start, limit=ml.max, tolerance=ml.tolerance,
                                 max_rounds=ml.max_rounds, integer=ml.over == "concurrency")
        self.cells: dict[float, tuple[CellResult, list[float]]] = {}

    @property
    def total(self) -> int | None:
        return None  # the search decides as it goes

    def next(self) -> LoadPoint | None:
        load = self.search.next()
        if load is None:
            return None
        if self.over == "rate":
            return LoadPoint(context=self.context, concurrency=self.cap, rate=load,
                             requests=requests_at(self.workload, self.cap, load), search="max_load")
        conc = int(load)
        return LoadPoint(context=self.context, concurrency=conc, requests=requests_at(self.workload, conc),
                         search="max_load")

    def load_of(self, point: LoadPoint) -> float:
        return float(point.rate) if self.over == "rate" and point.rate else float(point.concurrency)

    def record(self, point: LoadPoint, cell: CellResult, runs: Sequence[CellResult]) -> None:
        load = self.load_of(point)
        per_run = [r.slo_attainment for r in runs if r.slo_attainment is not None]
        self.cells[load] = (cell, per_run)
        if cell.errors >= cell.requests > 0:  # nothing answered: no load can be judged any more
            self.search.fail("failed")
            return
        self.search.record(load, (cell.slo_attainment or 0.0) >= self.slo.target)

    def summary(self) -> dict[str, Any]:
        """``result.max_load`` (sweep.record.result.MaxLoad)."""
        s = self.search
        value = s.met
        best = self.cells.get(value) if value is not None else None
        out: dict[str, Any] = {
            "over": self.over, "value": value, "context": self.context,
            "goodput_tok_s": best[0].goodput_tok_s if best else None,
            "goodput_tok_s_ci": best[0].goodput_tok_s_ci if best else None,
            "output_tok_s": best[0].output_tok_s if best else None,
            "slo_attainment": best[0].slo_attainment if best else None,
            "value_ci": None, "bracket": [value, s.missed],
            "stopped": s.stopped, "probes": len(self.cells), "slo": self.slo.to_dict(),
            "tolerance": s.tolerance, "max_rounds": s.max_rounds}
        runs = [per for _, per in self.cells.values() if len(per) > 1]
        if runs:
            target = self.slo.target
            every = [x for x, (_, per) in self.cells.items() if per and min(per) >= target]
            anyone = [x for x, (_, per) in self.cells.items() if per and max(per) >= target]
            out["value_ci"] = [max(every, default=0.0), max(anyone, default=0.0)]
        return out
