"""Latency SLOs as data: the limits, who meets them, and goodput (DistServe's definition).

A leaf module on purpose: the benchmark judges each request while it
aggregates a cell (:mod:`sweep.bench.cell`), and the score, the schedule and
the report judge again from a result file alone -- under the SLO the trial ran
with, or any other -- so the rule lives once, below all of them, on plain
numbers.

Definitions (docs/deployment.md):

* A request **meets the SLO** when it succeeded and each limit that is set
  holds for it: its TTFT, its TPOT ((e2e - TTFT) / (tokens - 1)), its e2e, and
  its inter-token latency at the SLO's percentile (90% of its token gaps within
  ``itl_ms``, by default). Unset limits do not count. A limit on a figure the request does
  not have is *not* met: an unknown ITL (one token, or every token in one event) is never
  "within" a limit; only TPOT of a one-token answer counts as 0 (vLLM's goodput rule).
* ``slo_attainment`` = requests meeting it / requests sent (a failed request
  never meets it).
* ``goodput_req_s`` = requests meeting it per second of the cell's wall time;
  ``goodput_tok_s`` = their output tokens per second: DistServe's goodput
  (Zhong et al., OSDI 2024: "the maximum request rate ... with SLO attainment
  at the target") measured per load level, as vLLM's ``bench serve --goodput``
  and GuideLLM report it.
* A load level **meets the SLO** when its attainment reaches the target,
  ``percentile`` / 100: with the default 90, nine requests in ten must meet
  every limit (DistServe's 90% attainment target). 90 rather than 99: a cell
  holds 2 x concurrency requests by default, so a p99 is its single slowest
  request, and one outlier would decide a verdict that is meant to describe
  the load.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

LIMITS = ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms")
DEFAULT_PERCENTILE = 90.0
# One row per measured request in a cell's ``latencies`` (result.json), in this order.
LATENCY_FIELDS = ("ttft_ms", "tpot_ms", "e2e_ms", "completion_tokens", "itl_ms")
LATENCY_CAP = 256  # rows kept per cell: a judged SLO needs a few hundred, a result file stays small


@dataclass(frozen=True, slots=True)
class Slo:
    """``objective.slo``: limits in milliseconds (None: not limited) and the judged percentile."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    itl_ms: float | None = None
    e2e_ms: float | None = None
    percentile: float = DEFAULT_PERCENTILE

    @property
    def active(self) -> bool:
        """At least one limit is set."""
        return any(getattr(self, k) is not None for k in LIMITS)

    @property
    def target(self) -> float:
        """The attainment a load level needs to meet the SLO (0.9 for percentile 90)."""
        return self.percentile / 100.0

    def limits(self) -> dict[str, float]:
        return {k: float(v) for k in LIMITS if (v := getattr(self, k)) is not None}

    def to_dict(self) -> dict[str, Any]:
        return {**{k: getattr(self, k) for k in LIMITS}, "percentile": self.percentile}

    def label(self) -> str:
        """``TTFT <= 2000 ms, TPOT <= 50 ms at p90``."""
        names = {"ttft_ms": "TTFT", "tpot_ms": "TPOT", "itl_ms": "ITL", "e2e_ms": "e2e"}
        parts = [f"{names[k]} <= {v:g} ms" for k, v in self.limits().items()]
        return (", ".join(parts) or "no limit") + f" at p{self.percentile:g}"

    @classmethod
    def from_mapping(cls, node: Mapping[str, Any] | None) -> Slo:
        """An ``objective.slo`` block as recorded (already checked when it was composed)."""
        node = node or {}
        values = {k: float(v) for k in LIMITS if isinstance((v := node.get(k)), (int, float))
                  and not isinstance(v, bool)}
        pct = node.get("percentile")
        return cls(**values, percentile=float(pct) if isinstance(pct, (int, float)) and 0 < pct <= 100
                   else DEFAULT_PERCENTILE)

    def meets(self, ttft_ms: float | None, tpot_ms: float | None, e2e_ms: float | None,
              itl_ms: float | None) -> bool:
        """One successful request against every limit that is set. A limit on a figure nobody can
        know for this request is not met: an inter-token latency of a one-token answer or of a
        stream whose tokens came in one event (no gap was seen), a TTFT or e2e the row lacks. A
        one-token answer's TPOT is 0 (vLLM's ``bench serve --goodput`` rule: it has no decode)."""
        if self.tpot_ms is not None and tpot_ms is not None and tpot_ms > self.tpot_ms:
            return False
        for limit, value in ((self.ttft_ms, ttft_ms), (self.e2e_ms, e2e_ms), (self.itl_ms, itl_ms)):
            if limit is not None and (value is None or value > limit):
                return False
        return True


@dataclass(frozen=True, slots=True)
class Goodput:
    """A cell judged against an SLO."""

    slo_attainment: float
    goodput_req_s: float
    goodput_tok_s: float


def judge(rows: Iterable[Sequence[Any]], slo: Slo, *, requests: int, ok: int, duration_s: float,
          completion_tokens: int) -> Goodput | None:
    """A cell's attainment and goodput from its ``latencies`` rows (None: nothing to judge).

    ``rows`` are successful requests (all of them, or an even sample when the
    cell held more than :data:`LATENCY_CAP`): the share of rows meeting the SLO
    stands for the share of successful requests, and their share of the rows'
    tokens for the share of ``completion_tokens``. Failed requests
    (``requests - ok``) never meet it.
    """
    rows = [r for r in rows if r is not None and len(r) >= 4]
    if requests <= 0 or duration_s <= 0:
        return None
    if not rows:
        return Goodput(0.0, 0.0, 0.0) if ok == 0 else None
    i_ttft, i_tpot, i_e2e, i_tok, i_itl = (LATENCY_FIELDS.index(k) for k in (
        "ttft_ms", "tpot_ms", "e2e_ms", "completion_tokens", "itl_ms"))
    good = good_tokens = all_tokens = 0.0
    for r in rows:
        tokens = float(r[i_tok] or 0)
        all_tokens += tokens
        if slo.meets(r[i_ttft], r[i_tpot], r[i_e2e], r[i_itl] if len(r) > i_itl else None):
            good += 1
            good_tokens += tokens
    good_share = good / len(rows)
    token_share = good_tokens / all_tokens if all_tokens else good_share
    good_requests = good_share * ok
    return Goodput(slo_attainment=round(good_requests / requests, 4),
                   goodput_req_s=round(good_requests / duration_s, 4),
                   goodput_tok_s=round(token_share * completion_tokens / duration_s, 3))


def sig4(x: float | None) -> float | None:
    """Four significant digits (latency rows: enough to judge a limit, small on disk)."""
    if x is None or not math.isfinite(x):
        return None
    return float(f"{x:.4g}")


def sample(items: Sequence[Any], cap: int = LATENCY_CAP) -> list[Any]:
    """At most ``cap`` items, evenly spread over the sequence (first and last kept)."""
    n = len(items)
    if n <= cap:
        return list(items)
    if cap <= 1:
        return list(items[:cap])
    return [items[round(i * (n - 1) / (cap - 1))] for i in range(cap)]
