"""A cell measured several times (``workload.repeats``): one cell with means and intervals.

Why repeat at all: a single measurement cannot tell a 2% difference between two
configs from the box's run-to-run noise (two B300 runs of one config differed by
6%). With N repeats each cell reports

* the throughput figures (``output_tok_s``, ``per_stream_tok_s``, ``accept_len``,
  ``goodput_tok_s``) as the mean over the repeats, each with a 95% t-interval ``<name>_ci``
  (:func:`sweep.stats.interval`; null with one repeat);
* latency percentiles over every measured request of every repeat (pooled: a
  percentile of the union, not a mean of percentiles), and so the SLO attainment
  and the ``latencies`` sample;
* counts as totals over the repeats: ``requests``, ``errors`` (+ kinds),
  ``completion_tokens``, ``duration_s``, ``client_cpu_s`` -- an error in any repeat stays an error,
  and tokens / seconds still give the cell's rate;
* each repeat's own ``output_tok_s`` in ``output_tok_s_runs`` (the run-to-run noise a
  recorded landscape replays).
"""

from __future__ import annotations

import statistics
from dataclasses import replace
from typing import TYPE_CHECKING, Sequence

from sweep.stats import interval

if TYPE_CHECKING:
    from sweep.bench.cell import CellResult

MEANS = ("output_tok_s", "per_stream_tok_s", "accept_len", "accept_rate", "goodput_tok_s")


def combine(runs: Sequence["CellResult"], pooled: "CellResult") -> "CellResult":
    """One cell from its repeats; ``pooled``: every repeat's requests aggregated as one cell
    over the repeats' total duration (``cell.aggregate``)."""
    if not runs:
        raise ValueError("no repeat to combine")
    if len(runs) == 1:
        return replace(runs[0], repeats=1)
    from sweep.bench.boxstate import combine as combine_states

    loads = [r.load_avg for r in runs if r.load_avg is not None]
    out = replace(pooled, repeats=len(runs), cache=runs[0].cache, load_avg=max(loads) if loads else None,
                  prompt_sizing=runs[0].prompt_sizing,
                  client_cpu_s=sum(c.client_cpu_s for c in runs), concurrency_capped=runs[0].concurrency_capped,
                  load_search=runs[0].load_search, box_state=combine_states([c.box_state for c in runs]),
                  output_tok_s_runs=[round(c.output_tok_s, 4) for c in runs])
    for name in MEANS:
        values = [getattr(c, name) for c in runs if getattr(c, name) is not None]
        if not values:
            setattr(out, name, None)
            continue
        setattr(out, name, round(statistics.fmean(values), 4))
        if hasattr(out, f"{name}_ci"):
            ci = interval(values) if len(values) == len(runs) else None
            setattr(out, f"{name}_ci", [round(ci[0], 4), round(ci[1], 4)] if ci else None)
    return out
