"""One name per figure: what a person reads wherever a figure is shown, and how it is rounded.

Why: the headline figure was ``tok_s_lowc`` in one place, "tok/s c1" or "tok/s c2"
in the next and plain "tok/s" in MLflow; a two-objective study was named after
its first metric only; a speedup printed as 1.9358674055305418. Every figure
has a *key* (what the config, result.json, MLflow's metrics, CSV and JSON say:
``tok_s_lowc``, never renamed) and one *label* (what a person reads: the
terminal, the HTML report, MLflow's columns, the docs), both in :data:`LABELS`
here; :func:`label` adds the load it was measured at where that varies
("low-load tok/s (c2)"), :func:`shown` rounds a value for reading (:func:`rounded`: to
significant figures, for tables).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

# key -> label. Headline figures (result.json's metrics), then a cell's figures.
LABELS: dict[str, str] = {
    "tok_s_lowc": "low-load tok/s",               # output tok/s, lowest measured concurrency, shortest context
    "tok_s_c1": "tok/s at c1",                    # the same, only when concurrency 1 was measured
    "tok_s_peak": "peak tok/s",                   # the highest output tok/s of any cell
    "per_stream_tok_s_lowc": "low-load tok/s per user",
    "goodput_tok_s": "goodput tok/s",             # tok/s of the requests that met objective.slo
    "max_load": "max load",                       # the highest load meeting objective.slo
    "tok_s_weighted_mean": "weighted tok/s",      # objective.metric=weighted_mean
    "accept_len": "accept len",
    "accept_rate": "accept rate",
    "greedy_identical": "greedy identical",
    "coding_pass_rate": "coding pass",
    "speedup_vs_baseline": "speedup",
    "errors": "errors",
    "usd_per_mtok": "USD/Mtok",                    # (MLflow tag names take no $)
    "startup_s": "startup s",
    "headline_concurrency": "low-load conc",
    "ttft_ms_p50": "TTFT ms p50", "ttft_ms_p99": "TTFT ms p99",
    "tpot_ms_p50": "TPOT ms p50", "tpot_ms_p99": "TPOT ms p99",
    # a cell's figures
    "output_tok_s": "tok/s",                      # the cell's output tokens over its wall time, all streams
    "per_stream_tok_s": "tok/s per user",         # one stream's tokens after its first, over its decode time
}
# Figures measured at a load that differs between groups: their label says which.
_AT_LOAD = ("tok_s_lowc", "per_stream_tok_s_lowc")


def label(key: str, concurrency: int | None = None) -> str:
    """The figure's label; ``concurrency``: the load a low-load figure was measured at."""
    if key.startswith("tok_s_ctx") and "_c" in key:  # objective.metric=cell: tok_s_ctx1024_c8
        ctx, _, conc = key[len("tok_s_ctx"):].partition("_c")
        return f"tok/s at ctx {ctx}, c{conc}"
    text = LABELS.get(key, key)
    return f"{text} (c{concurrency})" if concurrency is not None and key in _AT_LOAD else text


def objective_label(metric: str, metrics: Sequence[str] | None = None) -> str:
    """What an objective maximises: one label, or each of a multi-objective study's."""
    return " + ".join(label(m) for m in metrics) if metrics else label(metric)


def speedup(x: float | None, sign: str = "x") -> str:
    return "-" if x is None else f"{x:.2f}{sign}"


def rounded(x: Any, digits: int = 4) -> Any:
    """A number as a person reads it: ``digits`` significant figures (never in stored metrics)."""
    if isinstance(x, bool) or not isinstance(x, float) or not math.isfinite(x) or x == 0:
        return x
    return round(x, max(0, digits - 1 - int(math.floor(math.log10(abs(x))))))


def interval_text(value: float, lo: float, hi: float, fmt: Any = lambda x: f"{x:,.1f}") -> str:
    """A throughput's 95% interval as a person reads it: `` ±half`` while it stays above zero, else
    on the log scale (``[lo-hi]``, the same upper reach, never below zero: a throughput is positive,
    and two repeats 2x apart give a t-interval reaching far below it)."""
    half = (hi - lo) / 2
    if lo > 0 or not value > 0:
        return f" ±{fmt(half)}"
    w = math.log1p(max(hi - value, half) / value)
    return f" [{fmt(value * math.exp(-w))}-{fmt(value * math.exp(w))}]"


def shown(key: str, value: Any) -> str:
    """A value as a person reads it: tok/s to 0.1, ratios to 0.01, a speedup as 1.94x."""
    if value is None:
        return "-"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if key == "speedup_vs_baseline":
        return speedup(float(value))
    if key in ("accept_len", "accept_rate", "greedy_identical", "coding_pass_rate", "usd_per_mtok"):
        return f"{value:.2f}"
    if key in ("max_load", "errors", "headline_concurrency") and float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.1f}"
