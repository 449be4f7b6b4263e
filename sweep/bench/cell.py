"""One measured cell: its figures, how they are reduced from request records, its keys.

The cell's keys in result.json are those of one type, the result file's
:class:`sweep.record.result.Cell` (:data:`CELL_KEYS` is derived from it): a
figure added there is written here, and a figure computed here but missing
there fails the test that holds them together -- no key list to keep twice.
Kept below the matrix (which moves requests) and the repeats (which combine
cells), so both import it and neither imports the other.

Definitions (per cell, over the measured phase only):

* ``output_tok_s``: sum of ``usage.completion_tokens`` of successful
  requests / wall time from the first send to the last completion.
  Failed requests add no tokens but do take wall time: a server that
  fails requests is slower, not faster.
* ``per_stream_tok_s``: the decode speed one user sees once the first
  token has arrived (prefill wait is TTFT's business), token-weighted over
  successful requests: sum(completion_tokens) / sum(e2e - ttft). A ratio of
  sums rather than a mean of ratios, because with multi-token chunks one
  request whose answer arrives in a single burst has e2e - ttft near 0 and
  would make a mean of per-request ratios explode.
* ``ttft/itl/step/tpot/e2e`` percentiles in ms (linear interpolation, as
  numpy's default). ``itl_ms``: per token, pooled over every request, each
  gap between content events spread over the tokens the later event carries
  (SGLang's bench_serving); ``step_ms``: the gaps between content events
  themselves (one verify step with speculative decoding; vLLM's ``bench
  serve`` ITL); ``itl_tokens`` says whether tokens per event were counted by
  the server (running usage) or estimated (an even split). TPOT is per
  request (e2e - ttft) / (completion_tokens - 1).
* ``prompt_tokens_mean``: the mean ``usage.prompt_tokens`` the server
  reported for the cell's measured requests (the context actually sent).
* ``accept_len``: sum(completion_tokens - 1) / sum(spec_verify_ct) over
  successful requests carrying spec counters (None without them): tokens per
  verify step, the bonus token included, the prefill's first token not
  (:mod:`sweep.bench.acceptance`).
* ``errors`` / ``error_kinds``: failed requests, counted and shown.
* ``slo_attainment``, ``goodput_req_s``, ``goodput_tok_s``: the cell judged
  against ``objective.slo`` (:mod:`sweep.stats.slo`; None without one);
  ``latencies``: one row per successful request (``sweep.stats.slo.LATENCY_FIELDS``,
  at most ``LATENCY_CAP`` evenly sampled) so any other SLO can be judged later
  from the result file alone.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from sweep.bench.acceptance import accept_len_of, spec_sums
from sweep.bench.request import RequestResult
from sweep.record.result import Cell
from sweep.stats.slo import LATENCY_CAP, Slo, judge, sample, sig4

# Cell fields the trial adds after the benchmark (sweep.score.cost): not the benchmark's to fill.
TRIAL_ADDS = ("usd_per_mtok",)
# Exactly the cell keys of result.json (docs/ARCHITECTURE.md), in the type's order.
CELL_KEYS = tuple(f.name for f in Cell._fields() if f.name not in TRIAL_ADDS)


@dataclass
class CellResult:
    """Aggregates of one cell; ``results`` keeps the per-request records."""

    context: int
    concurrency: int
    requests: int
    errors: int
    error_kinds: dict[str, int]
    output_tok_s: float
    per_stream_tok_s: float | None
    ttft_ms_p50: float | None
    ttft_ms_p90: float | None
    ttft_ms_p99: float | None
    ttft_ms_mean: float | None
    itl_ms_p50: float | None
    itl_ms_p90: float | None
    itl_ms_p99: float | None
    itl_tokens: str | None        # counted (running usage) | estimated (even split)
    step_ms_p50: float | None
    step_ms_p90: float | None
    step_ms_p99: float | None
    tpot_ms_p50: float | None
    tpot_ms_p90: float | None
    tpot_ms_p99: float | None
    e2e_ms_p50: float | None
    e2e_ms_p90: float | None
    e2e_ms_p99: float | None
    accept_len: float | None
    completion_tokens: int
    prompt_tokens_mean: float | None
    duration_s: float
    accept_rate: float | None = None   # accepted / drafted draft tokens (/metrics around the window)
    tokens_source: str | None = None   # usage: the server's counts, checked against the stream (reported.py)
    spec_tokens: int = 0          # numerator of accept_len: tokens the verify steps yielded
    spec_verify_ct: int = 0       # denominator of accept_len
    cache: str | None = None      # what the prefix cache held when the window opened (matrix.CACHE_STATES)
    load_avg: float | None = None  # the machine's 1-minute load average when the cell ended
    prompt_sizing: str | None = None   # tokenize | probe | exact (token ids) | approx (no server count)
    client_cpu_s: float = 0.0     # this process's CPU time during the measured window
    # in-flight requests actually used when the process could not open `concurrency` connections
    concurrency_capped: int | None = None
    request_rate: float | None = None  # Poisson arrivals (req/s); None: closed loop
    repeats: int = 1              # workload.repeats (sweep/bench/repeats.py); figures are means
    output_tok_s_ci: list[float] | None = None
    per_stream_tok_s_ci: list[float] | None = None
    accept_len_ci: list[float] | None = None
    output_tok_s_runs: list[float] | None = None   # each repeat's output_tok_s (repeats > 1): the noise
    slo_attainment: float | None = None
    goodput_req_s: float | None = None
    goodput_tok_s: float | None = None
    goodput_tok_s_ci: list[float] | None = None
    latencies: list[list[float | None]] | None = None
    load_search: str | None = None  # "max_load": a probe of the max-load search (sweep/bench/maxload.py)
    box_state: dict[str, Any] | None = None  # what the box was doing over the window (sweep/bench/boxstate.py)
    results: list[RequestResult] = field(default_factory=list, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """The ``cells[]`` entry of result.json, exactly the documented keys."""
        return {k: getattr(self, k) for k in CELL_KEYS}


RESULT_FIELDS = frozenset(f.name for f in dataclasses.fields(CellResult))


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolated percentile (q in 0..100); None for no data."""
    if not values:
        return None
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def _ms(values: Sequence[float], q: float) -> float | None:
    p = percentile(values, q)
    return None if p is None else round(p * 1000.0, 3)


def latency_rows(ok: Sequence[RequestResult], itl_percentile: float,
                 cap: int = LATENCY_CAP) -> list[list[float | None]]:
    """``latencies``: per successful request ttft, tpot, e2e (ms), tokens, its ITL at the
    SLO's percentile (ms); an even sample of at most ``cap`` rows, in completion order."""
    def ms(s: float | None) -> float | None:
        return None if s is None else sig4(s * 1000.0)

    rows = []
    for r in sample(ok, cap):
        itl = percentile(r.itl_s(), itl_percentile)
        rows.append([ms(r.ttft_s), ms(r.tpot_s), ms(r.e2e_s), r.completion_tokens or 0, ms(itl)])
    return rows


def aggregate(context: int, concurrency: int, results: Sequence[RequestResult],
              duration_s: float, slo: Slo | None = None, *,
              request_rate: float | None = None) -> CellResult:
    """Reduce one cell's request records to the documented figures; judged against ``slo``
    when one is given with at least one limit."""
    ok = [r for r in results if r.ok]
    kinds: dict[str, int] = {}
    for r in results:
        if not r.ok:
            kinds[r.error or "unknown"] = kinds.get(r.error or "unknown", 0) + 1
    tokens = sum(r.completion_tokens or 0 for r in ok)
    ttft = [r.ttft_s for r in ok if r.ttft_s is not None]
    itl = [g for r in ok for g in r.itl_s()]
    step = [g for r in ok for g in r.step_s]
    timed = [r for r in ok if len(r.chunk_t) > 1]
    itl_tokens = None if not timed else ("counted" if all(r.tokens_counted for r in timed) else "estimated")
    tpot = [t for t in (r.tpot_s for r in ok) if t is not None]
    e2e = [r.e2e_s for r in ok if r.e2e_s is not None]
    decoding = [r for r in ok if r.completion_tokens and r.e2e_s is not None and r.ttft_s is not None]
    decode_s = sum(r.e2e_s - r.ttft_s for r in decoding)  # type: ignore[operator,misc]
    decode_tokens = sum(r.completion_tokens or 0 for r in decoding)
    spec_tokens, spec_verify = spec_sums(ok)
    prompt = [r.prompt_tokens for r in ok if r.prompt_tokens is not None]
    rows = latency_rows(ok, slo.percentile if slo is not None else 90.0)
    judged = judge(rows, slo, requests=len(results), ok=len(ok), duration_s=duration_s,
                   completion_tokens=tokens) if slo is not None and slo.active else None
    return CellResult(
        context=context, concurrency=concurrency, requests=len(results),
        errors=len(results) - len(ok), error_kinds=dict(sorted(kinds.items())),
        output_tok_s=round(tokens / duration_s, 3) if duration_s > 0 else 0.0,
        per_stream_tok_s=round(decode_tokens / decode_s, 3) if decode_s > 0 else None,
        ttft_ms_p50=_ms(ttft, 50), ttft_ms_p90=_ms(ttft, 90), ttft_ms_p99=_ms(ttft, 99),
        ttft_ms_mean=round(sum(ttft) / len(ttft) * 1000.0, 3) if ttft else None,
        itl_ms_p50=_ms(itl, 50), itl_ms_p90=_ms(itl, 90), itl_ms_p99=_ms(itl, 99), itl_tokens=itl_tokens,
        step_ms_p50=_ms(step, 50), step_ms_p90=_ms(step, 90), step_ms_p99=_ms(step, 99),
        tpot_ms_p50=_ms(tpot, 50), tpot_ms_p90=_ms(tpot, 90), tpot_ms_p99=_ms(tpot, 99),
        e2e_ms_p50=_ms(e2e, 50), e2e_ms_p90=_ms(e2e, 90), e2e_ms_p99=_ms(e2e, 99),
        accept_len=accept_len_of(spec_tokens, spec_verify),
        completion_tokens=tokens, tokens_source="usage" if ok else None,
        prompt_tokens_mean=round(sum(prompt) / len(prompt), 2) if prompt else None,
        duration_s=round(duration_s, 6), spec_tokens=spec_tokens, spec_verify_ct=spec_verify,
        request_rate=request_rate,
        slo_attainment=judged.slo_attainment if judged else None,
        goodput_req_s=judged.goodput_req_s if judged else None,
        goodput_tok_s=judged.goodput_tok_s if judged else None,
        latencies=rows, results=list(results),
    )


def trial_accept_len(cells: Iterable[CellResult]) -> float | None:
    """Accept length over every measured request of a trial (None without spec)."""
    cells = list(cells)
    verify = sum(c.spec_verify_ct for c in cells)
    return round(sum(c.spec_tokens for c in cells) / verify, 4) if verify else None
