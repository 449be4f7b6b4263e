"""Prometheus text for /metrics (with the server's metrics flag), SGLang's names.

Gauges are the last logging window's values, as SGLang's scheduler sets
them at each decode log line (spec_accept_length is per window, not
cumulative); counters are totals since start (``_total`` suffix, as
prometheus_client writes them).
"""

from __future__ import annotations

from typing import Any

GAUGES = (
    ("sglang:num_running_reqs", "The number of running requests.", "num_running"),
    ("sglang:num_queue_reqs", "The number of requests in the waiting queue.", "num_queue"),
    ("sglang:gen_throughput", "The generation throughput (token/s).", "gen_throughput"),
    ("sglang:token_usage", "The token usage.", "token_usage"),
    ("sglang:num_used_tokens", "The number of used tokens.", "num_used_tokens"),
    ("sglang:cache_hit_rate", "The prefix cache hit rate.", None),
    ("sglang:spec_accept_length", "Mean acceptance length of speculative decoding "
     "(accepted drafts + bonus token per forward).", "accept_length"),
    ("sglang:spec_accept_rate", "Speculative acceptance rate (`accepted drafts / proposed drafts` in batch).",
     "accept_rate"),
)
COUNTERS = (
    ("sglang:prompt_tokens", "Number of prefill tokens processed.", "prompt_tokens_total"),
    ("sglang:generation_tokens", "Number of generation tokens processed.", "generation_tokens_total"),
    ("sglang:num_requests", "Number of requests processed.", "finished_total"),
    ("sglang:spec_verify_calls", "Number of speculative decoding verification calls.", "verify_ct_total"),
)


def _labels(model: str) -> str:
    esc = model.replace("\\", "\\\\").replace('"', '\\"')
    return f'{{engine_type="unified",model_name="{esc}",pp_rank="0",tp_rank="0"}}'


def render(state: Any) -> str:
    """The exposition text for the sim's current stats."""
    st = state.engine.stats
    labels = _labels(state.args.served_model_name)
    out: list[str] = []
    for name, doc, attr in GAUGES:
        value = float(getattr(st, attr)) if attr else 0.0
        out += [f"# HELP {name} {doc}", f"# TYPE {name} gauge", f"{name}{labels} {value}"]
    for name, doc, attr in COUNTERS:
        value = float(getattr(st, attr))
        out += [f"# HELP {name}_total {doc}", f"# TYPE {name}_total counter", f"{name}_total{labels} {value}"]
    return "\n".join(out) + "\n"
