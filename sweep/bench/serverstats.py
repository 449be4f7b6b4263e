"""Speculative acceptance as the server itself reports it: its log and ``/metrics``.

Why: the per-request figure (tokens / verify steps from the response) is the
harness's view; an engineer cross-checks it against the server's own log lines
and Prometheus metrics. ``bench_serving``'s ``avg_spec_accept_length`` is
cumulative over the server's life (warmup included), so here only the text of
one trial's window is parsed (the launcher's ``log_since(mark)``), and
cumulative counters are read as a difference (:func:`metrics_delta`).

Which lines, fields and metric names mean what is declared per server group
(``server.acceptance``) and read by :mod:`sweep.bench.acceptance`; the two
functions kept here for their callers, :func:`accept_from_log` and
:func:`metrics_accept`, default to the shipped SGLang (and vLLM) declarations.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from sweep.bench.acceptance import LogReader, MetricsReader, declared

WANTED_PREFIXES = ("sglang:", "vllm:", "llamacpp:")
# Series that are cumulative counters: summed across label sets, diffed over a window.
_COUNTER_SUFFIXES = ("_total", "_count", "_sum")


def accept_from_log(text: str, decl: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """Means over the declared log lines of ``text``; None when there are none.

    ``decl`` is a server group's ``acceptance.log`` (default: SGLang's
    ``Decode batch`` lines, giving ``{accept_len, accept_rate, gen_throughput,
    samples}``; a field is None when no line carried it).
    """
    return LogReader(declared("sglang").get("log") if decl is None else decl).read(text)


parse_decode_log = accept_from_log


_SAMPLE = re.compile(
    r"^(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)(?P<labels>\{.*\})?\s+(?P<value>\S+)(?:\s+-?\d+)?\s*$")


def parse_prometheus(text: str, prefixes: tuple[str, ...] = WANTED_PREFIXES,
                     split: Mapping[str, str] | None = None) -> dict[str, float]:
    """Prometheus text exposition -> ``{metric name: value}``.

    Only names starting with ``prefixes``; histogram buckets are skipped.
    Several label sets (ranks, models) are combined: counters are summed,
    gauges averaged. ``split`` ``{name: label}`` also keeps that metric per
    value of the label, as ``"name|value"`` (llama.cpp's accepted tokens per
    draft position). Comments and lines that do not parse are ignored.
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
        label = split.get(name) if split else None
        if label and m.group("labels"):
            lm = re.search(r'[{,]\s*' + re.escape(label) + r'="([^"]*)"', m.group("labels"))
            if lm:
                key = f"{name}|{lm.group(1)}"
                sums[key] = sums.get(key, 0.0) + value
                counts[key] = counts.get(key, 0) + 1
    return {k: (v if _is_counter(k) else v / counts[k]) for k, v in sums.items()}


def _is_counter(name: str) -> bool:
    name = name.partition("|")[0]
    return name.endswith(_COUNTER_SUFFIXES) or name.startswith("vllm:spec_decode_num")


def fetch_metrics(base_url: str, api_key: str | None = None, *, timeout_s: float = 10.0,
                  prefixes: tuple[str, ...] = WANTED_PREFIXES,
                  split: Mapping[str, str] | None = None) -> dict[str, float]:
    """GET ``/metrics`` and parse it (:func:`parse_prometheus`); ``{}`` when disabled,
    unreachable or unparsable."""
    import httpx

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        from sweep.io.bounded_http import BoundedTransport

        with httpx.Client(base_url=base_url.rstrip("/"), headers=headers, timeout=timeout_s,
                          trust_env=False, transport=BoundedTransport(total_s=2 * timeout_s)) as client:
            resp = client.get("/metrics")
    except httpx.HTTPError:
        return {}
    if resp.status_code != 200:
        return {}
    try:
        return parse_prometheus(resp.text, prefixes or WANTED_PREFIXES, split)
    except Exception:  # noqa: BLE001 - stats are advisory, never fatal
        return {}


def metrics_delta(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float]:
    """Counters as a difference over a window; gauges as their value at the end."""
    out: dict[str, float] = {}
    for name, value in after.items():
        out[name] = value - before.get(name, 0.0) if _is_counter(name) else value
    return out


def metrics_accept(metrics: Mapping[str, float], decl: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Accept length / rate from (windowed) metrics, as a server group's ``acceptance.metrics`` says.

    Default: SGLang's gauges, else vLLM's counters (pass a :func:`metrics_delta`
    so counters cover the trial window only): accept length = 1 + accepted / drafts.
    """
    if decl is None:
        sglang, vllm = declared("sglang").get("metrics") or {}, declared("vllm").get("metrics") or {}
        decl = {"gauges": sglang.get("gauges"), "counters": vllm.get("counters")}
    return MetricsReader(decl).read(metrics)


@dataclass(frozen=True)
class CounterProbe:
    """Acceptance counters read around one measured window (a cell), where requests carry none.

    vLLM reports speculative counters on /metrics only; the matrix reads them
    right before and right after each cell's measured requests (warm-up
    excluded), so each cell has its own accept length and rate.
    """

    fetch: Callable[[], Mapping[str, float]]
    reader: MetricsReader

    def snapshot(self) -> dict[str, float]:
        return dict(self.fetch())

    def accept(self, before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, Any]:
        """``{accept_len, accept_rate, drafts, ...}`` over the window (None values without drafts)."""
        if not before or not after:
            return {}
        return self.reader.read(metrics_delta(before, after))
