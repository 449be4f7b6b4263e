"""The load a benchmark applies, planned apart from the code that sends it.

As vLLM's ``benchmarks/serve.py`` computes every arrival before the first
request leaves (``get_request``), the plan is data: which cells (context x
in-flight requests, or Poisson rate), how many requests each, and, for open
loop, every arrival offset -- a pure function of the rate and the seed, so two
trials with the same seed send the same schedule and a test can read it
without a server. The sender (:mod:`sweep.bench.matrix`) only follows it.

A plan hands out one :class:`LoadPoint` at a time and hears how it went
(``record``), so a plan may choose its next point from the last cell: the
fixed matrix ignores what it hears (:class:`MatrixPlan`); the max-load search
doubles then bisects on it (:class:`sweep.bench.maxload.MaxLoadPlan`).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, Sequence

if TYPE_CHECKING:
    from sweep.bench.cell import CellResult
    from sweep.compose.config import Workload


@dataclass(frozen=True, slots=True)
class LoadPoint:
    """One cell to measure."""

    context: int
    concurrency: int            # in-flight requests (closed loop: the load; open loop: the cap)
    requests: int
    rate: float | None = None   # Poisson arrivals in req/s; None: closed loop
    search: str | None = None   # "max_load": a probe of the max-load search

    @property
    def label(self) -> str:
        load = f"rate {self.rate:g}/s" if self.rate else f"conc {self.concurrency:<4}"
        return f"ctx {self.context:>6} x {load}"


class Plan(Protocol):
    """What the sender asks of a plan."""

    def next(self) -> LoadPoint | None: ...

    def record(self, point: LoadPoint, cell: CellResult, runs: Sequence[CellResult]) -> None: ...

    @property
    def total(self) -> int | None: ...


def arrivals(n: int, rate: float, seed: int) -> list[float]:
    """Offsets (seconds from the window's start) of ``n`` Poisson arrivals at ``rate`` req/s.

    The first request leaves at 0; gaps are exponential with mean 1/rate,
    drawn from ``random.Random(seed)`` -- the same seed, the same schedule.
    """
    if n <= 0:
        return []
    if not rate > 0:
        raise ValueError(f"rate must be > 0 req/s, got {rate!r}")
    rng = random.Random(seed)
    t, out = 0.0, []
    for _ in range(n):
        out.append(t)
        t += rng.expovariate(rate)
    return out


def requests_at(workload: Workload, concurrency: int, rate: float | None = None) -> int:
    """Requests measured at a load point: ``workload.requests_for`` of the in-flight count, or of
    the rate rounded up for open loop (about two seconds of arrivals, at least min_requests)."""
    return workload.requests_for(int(math.ceil(rate)) if rate else concurrency)


def matrix_points(workload: Workload) -> list[LoadPoint]:
    """The fixed matrix: contexts outer, concurrencies inner, as the workload lists them (only
    ``workload.cells`` when given); Poisson at ``workload.request_rate`` (capped at each concurrency)
    when it is set."""
    rate = workload.request_rate
    cells = getattr(workload, "cells", None)
    only = set(cells) if cells else None
    return [LoadPoint(context=int(ctx), concurrency=int(conc), requests=workload.requests_for(int(conc)),
                      rate=rate)
            for ctx in workload.contexts for conc in workload.concurrency
            if only is None or (int(ctx), int(conc)) in only]


class MatrixPlan:
    """Every cell of the workload's matrix, in order, whatever they measure."""

    def __init__(self, workload: Workload) -> None:
        self._points = matrix_points(workload)
        self._i = 0

    @property
    def total(self) -> int | None:
        return len(self._points)

    def next(self) -> LoadPoint | None:
        if self._i >= len(self._points):
            return None
        self._i += 1
        return self._points[self._i - 1]

    def record(self, point: LoadPoint, cell: CellResult, runs: Sequence[CellResult]) -> None:
        return None
