"""Headline metrics of a trial: what every table, plot, MLflow run and sweeper compares.

Scoring reads only the result document, so the trial, the report, the sweep
summary and the sweeper all agree on what "tok_s_c1" means. What is feasible
and what the objective is: :mod:`sweep.score.objective`; the speedup over the
autoregressive baseline: :mod:`sweep.score.speedup`; $/Mtok: :mod:`sweep.score.cost`.
"""

from __future__ import annotations

from typing import Sequence

from sweep.record.result import Cell, Metrics, TrialResult


def ok_cells(cells: Sequence[Cell]) -> list[Cell]:
    """Cells that measured a throughput (every request of an empty one failed)."""
    return [c for c in cells if c.output_tok_s is not None]


def headline_cell(cells: Sequence[Cell]) -> Cell | None:
    """The lowest-concurrency cell at the shortest context (single stream)."""
    ok = ok_cells(cells)
    if not ok:
        return None
    return min(ok, key=lambda c: (c.concurrency, c.context))


def trial_accept_len(cells: Sequence[Cell]) -> float | None:
    """Sum of completion tokens over sum of verify steps, across all cells."""
    tokens = steps = 0.0
    for c in cells:
        acc, toks = c.accept_len, c.completion_tokens
        if acc and toks:
            tokens += toks
            steps += toks / acc
    return tokens / steps if steps else None


def metrics(result: TrialResult) -> Metrics:
    cells = result.cells
    head = headline_cell(cells)
    ok = ok_cells(cells)
    coding = result.coding
    return Metrics(
        tok_s_c1=head.output_tok_s if head else None,
        tok_s_peak=max((c.output_tok_s for c in ok if c.output_tok_s is not None), default=None),
        accept_len=trial_accept_len(cells),
        coding_pass_rate=coding.pass_rate if coding is not None else None,
        speedup_vs_baseline=result.speedup_vs_baseline,
        ttft_ms_p50=head.ttft_ms_p50 if head else None,
        ttft_ms_p99=max((c.ttft_ms_p99 or 0 for c in ok), default=None) if ok else None,
        tpot_ms_p50=head.tpot_ms_p50 if head else None,
        startup_s=result.server.startup_s if result.server is not None else None,
        errors=sum(int(c.errors or 0) for c in cells),
    )
