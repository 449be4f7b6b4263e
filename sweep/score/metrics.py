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
import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence, TypeVar

from sweep.record.result import Cell, MaxLoad, Metrics, TrialResult
from sweep.stats.slo import Slo, judge


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
        """``low-load tok/s (c2)``: what a table header or a summary line calls it (sweep/score/names.py)."""
        from sweep.score.names import label

        return label("tok_s_lowc", self.concurrency)


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


def slo_of(result: TrialResult) -> Slo:
    """The SLO the trial was judged against (``objective.slo`` as recorded; none: no limit)."""
    objective = result.config_section("objective")
    return Slo.from_mapping(objective.get("slo") if isinstance(objective.get("slo"), dict) else None)


def cell_goodput(cell: Cell, slo: Slo, recorded: Slo | None = None) -> tuple[float, float] | None:
    """(slo_attainment, goodput_tok_s) of a cell under ``slo``; the recorded figures when ``recorded``
    (the trial's own SLO) is the same, else judged from the cell's ``latencies`` rows."""
    if not slo.active:
        return None
    if recorded == slo and cell.slo_attainment is not None:
        return float(cell.slo_attainment), float(cell.goodput_tok_s or 0.0)
    if not cell.latencies or not cell.requests or not cell.duration_s:
        return None
    judged = judge(cell.latencies, slo, requests=int(cell.requests), ok=int(cell.requests) - int(cell.errors or 0),
                   duration_s=float(cell.duration_s),
                   completion_tokens=int(cell.completion_tokens or 0))
    return (judged.slo_attainment, judged.goodput_tok_s) if judged is not None else None


def load_of(cell: Cell) -> float:
    """The load a cell stands for: the rate (req/s) of a max-load probe over rate, else its in-flight
    requests (a Poisson matrix's cells share one rate and differ by their in-flight cap)."""
    if cell.request_rate and cell.load_search == "max_load":
        return float(cell.request_rate)
    return float(cell.concurrency)


def max_load_of(result: TrialResult, slo: Slo | None = None) -> float | None:
    """The highest load meeting the SLO: the max-load search's answer when the trial ran it (under its own
    SLO), else the highest measured load at the shortest context whose cell met it (None: none did)."""
    own = slo_of(result)
    slo = slo if slo is not None else own
    if not slo.active:
        return None
    if result.max_load is not None and slo == own:
        return None if result.max_load.value is None else float(result.max_load.value)
    ok = ok_cells(result.cells)
    if not ok:
        return None
    ctx = min(c.context for c in ok)
    met = [load_of(c) for c in ok if c.context == ctx
           and (g := cell_goodput(c, slo, own)) is not None and g[0] >= slo.target]
    return max(met, default=None)


C = TypeVar("C")


def within_load(cells: Sequence[C], max_load: MaxLoad | None) -> list[C]:
    """The cells a trial answers for: all of them, except the max-load search's probes above the load
    it found (they missed the SLO, failed requests included: finding where is the search's job, so
    their errors neither fail the trial nor make it infeasible)."""
    if max_load is None:
        return list(cells)
    edge = max_load.value if max_load.value is not None else 0.0
    out = []
    for c in cells:
        rate = getattr(c, "request_rate", None) if max_load.over == "rate" else None
        load = float(rate) if rate else float(getattr(c, "concurrency"))
        if getattr(c, "load_search", None) != "max_load" or load <= edge:
            out.append(c)
    return out


def metrics(result: TrialResult) -> Metrics:
    from sweep.score.acceptance import accept_rate

    cells = result.cells
    head = headline_cell(cells)
    ok = ok_cells(cells)
    coding = result.coding
    slo = slo_of(result)
    goodputs = [g[1] for c in ok if (g := cell_goodput(c, slo, slo)) is not None]
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
        errors=sum(int(c.errors or 0) for c in within_load(cells, result.max_load)),
        per_stream_tok_s_lowc=head.per_stream_tok_s if head else None,
        goodput_tok_s=max(goodputs, default=None),
        max_load=max_load_of(result) if _correct(result) else None,
    )


LOAD_METRIC = re.compile(r"^tok_s_at_c(\d+)$")  # a study metric per load: tok/s at that concurrency


def load_values(result: TrialResult) -> dict[str, float]:
    """``tok_s_at_c<N>``: output tok/s of each measured concurrency at the headline (shortest) context --
    a multi-objective study's values per load (``objective.metrics``, the per-load search)."""
    head = headline_cell(result.cells)
    if head is None:
        return {}
    return {f"tok_s_at_c{c.concurrency}": float(c.output_tok_s) for c in ok_cells(result.cells)
            if c.context == head.context and c.output_tok_s is not None and not c.load_search}


def _correct(result: TrialResult) -> bool:
    """The correctness gate as the objective states it: a config whose answers changed has no max load."""
    objective = result.config_section("objective")
    cons = objective.get("constraints") if isinstance(objective.get("constraints"), dict) else {}
    floor = cons.get("coding_pass_rate_min") if isinstance(cons, dict) else None
    rate = result.coding.pass_rate if result.coding is not None else None
    return floor is None or rate is None or float(rate) >= float(floor)
