"""Speculative acceptance as the server itself reports it.

Why: the per-request figure (completion_tokens / spec_verify_ct from
meta_info) is the harness's view; an engineer cross-checks it against the
scheduler's own ``Decode batch ... accept len`` log lines and the
Prometheus gauges. ``bench_serving``'s ``avg_spec_accept_length`` is
cumulative over the server's life (warmup included), so here only the text
of one trial's window is parsed (the launcher's ``log_since(mark)``), and
for vLLM's cumulative counters :func:`metrics_delta` takes a difference.
"""

from __future__ import annotations

import math
import re
from typing import Any, Mapping

# `Decode batch, #running-req: 8, ..., accept len: 4.48, accept rate: 0.87, ...,
#  gen throughput (token/s): 870.20, #queue-req: 0,` and the older
# `Decode batch. ... accept len: 3.20, gen throughput (token/s): 100.5, ...`.
_DECODE = re.compile(r"Decode batch[,.]\s(?P<rest>.*)")
_ACCEPT_LEN = re.compile(r"accept len:\s*(?P<v>[-+0-9.eE]+|nan|inf)")
_ACCEPT_RATE = re.compile(r"accept rate:\s*(?P<v>[-+0-9.eE]+|nan|inf)")
_GEN_TPUT = re.compile(r"gen throughput \(token/s\):\s*(?P<v>[-+0-9.eE]+|nan|inf)")

WANTED_PREFIXES = ("sglang:", "vllm:")
# Series that are cumulative counters: summed across label sets, diffed over a window.
_COUNTER_SUFFIXES = ("_total", "_count", "_sum")


def _num(match: re.Match[str] | None) -> float | None:
    if match is None:
        return None
    try:
        v = float(match.group("v"))
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def _mean(xs: list[float]) -> float | None:
    return round(sum(xs) / len(xs), 4) if xs else None


def accept_from_log(text: str) -> dict[str, Any] | None:
    """Means over the ``Decode batch`` lines of ``text``; None when there are none.

    Returns ``{accept_len, accept_rate, gen_throughput, samples}``; a field is
    None when no line carried it (``accept rate`` is absent in older SGLang,
    ``accept len`` without speculative decoding).
    """
    lens: list[float] = []
    rates: list[float] = []
    tputs: list[float] = []
    samples = 0
    for line in text.splitlines():
        m = _DECODE.search(line)
        if not m:
            continue
        rest = m.group("rest")
        al, ar, gt = _num(_ACCEPT_LEN.search(rest)), _num(_ACCEPT_RATE.search(rest)), _num(_GEN_TPUT.search(rest))
        if al is None and gt is None:
            continue  # a truncated or unrelated line
        samples += 1
        if al is not None:
            lens.append(al)
        if ar is not None:
            rates.append(ar)
        if gt is not None:
            tputs.append(gt)
    if not samples:
        return None
    return {"accept_len": _mean(lens), "accept_rate": _mean(rates),
            "gen_throughput": _mean(tputs), "samples": samples}


parse_decode_log = accept_from_log


_SAMPLE = re.compile(
    r"^(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)(?P<labels>\{.*\})?\s+(?P<value>\S+)(?:\s+-?\d+)?\s*$")


def parse_prometheus(text: str, prefixes: tuple[str, ...] = WANTED_PREFIXES) -> dict[str, float]:
    """Prometheus text exposition -> ``{metric name: value}``.

    Only names starting with ``prefixes``; histogram buckets are skipped.
    Several label sets (ranks, models) are combined: counters are summed,
    gauges averaged. Comments and lines that do not parse are ignored.
    """
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if not m:
            continue
        name = m.group("name")
        if not name.startswith(prefixes) or name.endswith("_bucket"):
            continue
        try:
            value = float(m.group("value"))
        except ValueError:
            continue
        if not math.isfinite(value):
            continue
        sums[name] = sums.get(name, 0.0) + value
        counts[name] = counts.get(name, 0) + 1
    return {k: (v if _is_counter(k) else v / counts[k]) for k, v in sums.items()}


def _is_counter(name: str) -> bool:
    return name.endswith(_COUNTER_SUFFIXES) or name.startswith("vllm:spec_decode_num")


def fetch_metrics(base_url: str, api_key: str | None = None, *, timeout_s: float = 10.0) -> dict[str, float]:
    """GET ``/metrics`` and parse it; ``{}`` when disabled, unreachable or unparsable."""
    import httpx

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        with httpx.Client(base_url=base_url.rstrip("/"), headers=headers, timeout=timeout_s,
                          trust_env=False) as client:
            resp = client.get("/metrics")
    except httpx.HTTPError:
        return {}
    if resp.status_code != 200:
        return {}
    try:
        return parse_prometheus(resp.text)
    except Exception:  # noqa: BLE001 - stats are advisory, never fatal
        return {}


def metrics_delta(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float]:
    """Counters as a difference over a window; gauges as their value at the end."""
    out: dict[str, float] = {}
    for name, value in after.items():
        out[name] = value - before.get(name, 0.0) if _is_counter(name) else value
    return out


def metrics_accept(metrics: Mapping[str, float]) -> dict[str, float | None]:
    """Accept length / rate from (windowed) metrics, SGLang gauges or vLLM counters.

    vLLM: mean acceptance length = 1 + accepted / drafts (pass a
    :func:`metrics_delta` so it covers the trial window only).
    """
    accept_len = metrics.get("sglang:spec_accept_length")
    accept_rate = metrics.get("sglang:spec_accept_rate")
    drafts = _first(metrics, "vllm:spec_decode_num_drafts")
    accepted = _first(metrics, "vllm:spec_decode_num_accepted_tokens")
    proposed = _first(metrics, "vllm:spec_decode_num_draft_tokens")
    if accept_len is None and drafts:
        accept_len = 1.0 + (accepted or 0.0) / drafts
    if accept_rate is None and proposed:
        accept_rate = (accepted or 0.0) / proposed
    return {"accept_len": None if accept_len is None else round(accept_len, 4),
            "accept_rate": None if accept_rate is None else round(accept_rate, 4),
            "gen_throughput": metrics.get("sglang:gen_throughput"),
            "num_running_reqs": metrics.get("sglang:num_running_reqs")}


def _first(metrics: Mapping[str, float], base: str) -> float | None:
    for name in (base + "_total", base):
        if name in metrics:
            return metrics[name]
    return None
