"""Headline metrics of a trial: what every table, plot, MLflow run and sweeper compares.

Scoring reads only the result document, so the trial, the report, the sweep
summary and the sweeper all agree on what a headline number means. What is
feasible and what the objective is: :mod:`sweep.score.objective`; the speedup
over the autoregressive baseline: :mod:`sweep.score.speedup`; $/Mtok:
:mod:`sweep.score.cost`.

Names say what they measure. The single-stream headline is ``tok_s_lowc``:
output tok/s at the *lowest measured* concurrency (``headline_concurrency``,
recorded with it) at the shortest context -- ``workload=smoke`` measures
concurrency 2 only, so calling that "c1" would be a lie. ``tok_s_c1`` is kept
for what its name says: tok/s at concurrency 1, and only when concurrency 1
was measured. Result files written before ``tok_s_lowc`` existed put the
lowest concurrency's tok/s into ``tok_s_c1`` whatever it was; :func:`headline`
and :func:`honest` read them right.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from sweep.record.result import Cell, Metrics, TrialResult


def ok_cells(cells: Sequence[Cell]) -> list[Cell]:
    """Cells that measured a throughput (every request of an empty one failed)."""
    return [c for c in cells if c.output_tok_s is not None]


def headline_cell(cells: Sequence[Cell]) -> Cell | None:
    """The lowest-concurrency cell at the shortest context (single stream when c=1 was measured)."""
    ok = ok_cells(cells)
    if not ok:
        return None
    return min(ok, key=lambda c: (c.concurrency, c.context))


@dataclass(frozen=True, slots=True)
class Headline:
    """The headline number and where in the matrix it was measured."""

    tok_s: float | None
    concurrency: int | None
    context: int | None

    @property
    def label(self) -> str:
        """``tok/s c2``: what a table header or a summary line calls it."""
        return "tok/s c?" if self.concurrency is None else f"tok/s c{self.concurrency}"


def _lowest(config: Mapping[str, Any], key: str) -> int | None:
    workload = config.get("workload")
    values = workload.get(key) if isinstance(workload, Mapping) else None
    try:
        return min(int(v) for v in values) if values else None
    except (TypeError, ValueError):
        return None


def _int(x: Any) -> int | None:
    """A count as recorded (MLflow gives every metric back as a float)."""
    return None if x is None or isinstance(x, bool) else int(x)


def headline(doc: TrialResult) -> Headline:
    """The headline of any result (new or old file, or a document read back from MLflow)."""
    m = doc.metrics
    if "tok_s_lowc" not in m.absent and (m.tok_s_lowc is not None or m.headline_concurrency is not None):
        return Headline(m.tok_s_lowc, _int(m.headline_concurrency), _int(m.headline_context))
    head = headline_cell(doc.cells)
    if head is not None:
        return Headline(m.tok_s_c1 if m.tok_s_c1 is not None else head.output_tok_s,
                        head.concurrency, head.context)
    # An older document without cells (an MLflow run): its matrix is in the config.
    return Headline(m.tok_s_c1, _lowest(doc.config, "concurrency"), _lowest(doc.config, "contexts"))


def honest(doc: TrialResult) -> Metrics:
    """``doc.metrics`` with the headline fields filled and ``tok_s_c1`` only when it is c=1.

    The stored document is not changed (result files stay byte-identical when read).
    """
    head = headline(doc)
    return dataclasses.replace(
        doc.metrics, tok_s_lowc=head.tok_s, headline_concurrency=head.concurrency,
        headline_context=head.context, tok_s_c1=head.tok_s if head.concurrency == 1 else None,
        absent=doc.metrics.absent - {"tok_s_lowc", "headline_concurrency", "headline_context"},
        extra=dict(doc.metrics.extra))


def trial_accept_len(cells: Sequence[Cell]) -> float | None:
    """Sum of completion tokens over sum of verify steps, across all cells."""
    tokens = steps = 0.0
    for c in cells:
        acc, toks = c.accept_len, c.completion_tokens
        if acc and toks:
            tokens += toks
            steps += toks / acc
    return tokens / steps if steps else None


def accept_rate(result: TrialResult) -> float | None:
    """Accepted / drafted draft tokens over the trial: the requests' counters, else /metrics'."""
    acc = result.acceptance
    if acc is None:
        return None
    rate = (acc.requests or {}).get("accept_rate")
    if rate is None and acc.metrics is not None:
        rate = acc.metrics.accept_rate
    return None if rate is None else float(rate)


def metrics(result: TrialResult) -> Metrics:
    cells = result.cells
    head = headline_cell(cells)
    ok = ok_cells(cells)
    coding = result.coding
    return Metrics(
        tok_s_lowc=head.output_tok_s if head else None,
        headline_concurrency=head.concurrency if head else None,
        headline_context=head.context if head else None,
        tok_s_c1=head.output_tok_s if head and head.concurrency == 1 else None,
        tok_s_peak=max((c.output_tok_s for c in ok if c.output_tok_s is not None), default=None),
        accept_len=trial_accept_len(cells),
        accept_rate=accept_rate(result),
        greedy_identical=result.identity.greedy_identical if result.identity is not None else None,
        coding_pass_rate=coding.pass_rate if coding is not None else None,
        speedup_vs_baseline=result.speedup_vs_baseline,
        ttft_ms_p50=head.ttft_ms_p50 if head else None,
        ttft_ms_p99=max((c.ttft_ms_p99 or 0 for c in ok), default=None) if ok else None,
        tpot_ms_p50=head.tpot_ms_p50 if head else None,
        startup_s=result.server.startup_s if result.server is not None else None,
        errors=sum(int(c.errors or 0) for c in cells),
    )
