"""Checks of the keys that say how the benchmark talks to a server and what it sends.

``server.endpoint`` / ``server.tokenize`` / ``server.continuous_usage``
(server facts, in the server YAML) and ``workload.prompt_source`` /
``workload.dataset_path`` / ``workload.seed`` (what the matrix sends).
Each problem is one ConfigError naming the key and the allowed values; the
keys' types and bounds are those of the one table, :mod:`sweep.compose.bounds`
(this adds what spans keys: ``server.tokenize``'s fields, random ids need the
completions endpoint, a dataset must exist).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from sweep.compose.bounds import get as _v
from sweep.errors import ConfigError

TOKENIZE_KEYS = ("path", "field", "batch", "messages", "extra")


def endpoint(node: Mapping[str, Any]) -> str:
    return "completions" if node.get("endpoint") is None else str(_v(node, "server", "endpoint"))


def tokenize(node: Mapping[str, Any]) -> dict[str, Any] | None:
    """``server.tokenize``: null, or {path, field, batch, messages, extra}."""
    value = node.get("tokenize")
    if value is None:
        return None
    p = "server.tokenize"
    if not isinstance(value, Mapping):
        raise ConfigError(p, f"must be null or a mapping with keys {', '.join(TOKENIZE_KEYS)}, got {value!r}")
    for key in value:
        if key not in TOKENIZE_KEYS:
            raise ConfigError(f"{p}.{key}", f"is not a tokenize setting; allowed: {', '.join(TOKENIZE_KEYS)}")
    path = value.get("path")
    if not isinstance(path, str) or not path.startswith("/") or any(c in path for c in " ?#\t\r\n"):
        raise ConfigError(f"{p}.path", f"must be a URL path such as /v1/tokenize, got {path!r}")
    field = value.get("field", "prompt")
    if not isinstance(field, str) or not field.isidentifier():
        raise ConfigError(f"{p}.field", f"must be the request field that carries the text (e.g. prompt), "
                          f"got {field!r}")
    extra = value.get("extra") or {}
    if not isinstance(extra, Mapping):
        raise ConfigError(f"{p}.extra", f"must be a mapping of extra request fields, got {extra!r}")
    for key in ("batch", "messages"):
        if not isinstance(value.get(key, False), bool):
            raise ConfigError(f"{p}.{key}", f"must be true or false, got {value.get(key)!r}")
    return {"path": path, "field": field, "batch": bool(value.get("batch", False)),
            "messages": bool(value.get("messages", False)), "extra": dict(extra)}


def prompt_source(node: Mapping[str, Any], server_endpoint: str) -> tuple[str, str | None, int]:
    """(prompt_source, dataset_path, seed) of ``workload``."""
    p = "workload"
    source = "text" if node.get("prompt_source") is None else str(_v(node, p, "prompt_source"))
    if source == "random_ids" and server_endpoint != "completions":
        raise ConfigError(f"{p}.prompt_source", "random_ids sends token ids, which only the completions "
                          f"endpoint takes (server.endpoint=completions), got server.endpoint={server_endpoint}")
    raw_path = node.get("dataset_path")
    path = None
    if source == "dataset":
        if not raw_path:
            raise ConfigError(f"{p}.dataset_path", "is required for workload.prompt_source=dataset "
                              "(a JSONL file of prompts, e.g. ShareGPT-style)")
        resolved = Path(str(raw_path)).expanduser()
        if not resolved.is_file():
            raise ConfigError(f"{p}.dataset_path", f"must be an existing JSONL file, got {str(raw_path)!r}")
        path = str(resolved.resolve())
    seed = _v(node, p, "seed", 0)
    return str(source), path, seed


@dataclass(frozen=True, slots=True)
class MaxLoadSearch:
    """``workload.max_load``: the search for the highest load meeting ``objective.slo``
    (:mod:`sweep.bench.maxload`); disabled: the workload's fixed matrix runs."""

    enabled: bool = False
    over: str = "concurrency"    # concurrency (in-flight requests) | rate (Poisson requests/s)
    start: float = 1.0
    max: float = 256.0
    tolerance: float = 0.1       # bisection stops at (missed - met) / met <= tolerance
    max_rounds: int = 6          # bisection probes at most
    concurrency: int = 256       # over=rate: in-flight cap


def max_load(node: Mapping[str, Any], contexts: tuple[int, ...]) -> MaxLoadSearch:
    """``workload.max_load`` typed and checked (one context, start <= max, whole in-flight counts)."""
    p = "workload.max_load"
    raw = node.get("max_load")
    if raw is None or not _v(raw, p, "enabled", False):
        return MaxLoadSearch()
    over = str(_v(raw, p, "over") or "concurrency")
    start, top = float(_v(raw, p, "start", 1.0)), float(_v(raw, p, "max", 256.0))
    if len(contexts) != 1:
        raise ConfigError("workload.contexts", f"workload.max_load searches one context: give one "
                          f"(e.g. workload.contexts=[{contexts[0]}]), got {list(contexts)}")
    if start > top:
        raise ConfigError(f"{p}.start", f"must be <= {p}.max ({top:g}), got {start:g}")
    if over == "concurrency" and (not start.is_integer() or not top.is_integer()):
        raise ConfigError(f"{p}.start" if not start.is_integer() else f"{p}.max",
                          "counts in-flight requests with over=concurrency: a whole number, got "
                          f"{start if not start.is_integer() else top:g}")
    out = MaxLoadSearch(enabled=True, over=over, start=start, max=top,
                        tolerance=float(_v(raw, p, "tolerance", 0.1)),
                        max_rounds=int(_v(raw, p, "max_rounds", 6)),
                        concurrency=int(_v(raw, p, "concurrency", 256)))
    if over == "rate":
        _rate_search_bounded(out, node)
    return out


MAX_RATE_SEARCH_S = 3600.0  # arrivals of one max-load search over rate: an hour at most


def rate_search_seconds(ml: MaxLoadSearch, requests_for: Any) -> float:
    """The longest a search over rate can spend sending its arrivals (requests / rate per probe):
    doubling from ``start`` to ``max`` with every probe meeting the SLO, then ``max_rounds``
    bisection probes no slower than the first; or ``start`` missing and the search halving
    ``max_rounds`` times (each halving doubles a probe's time). Serving time comes on top."""
    def probe(rate: float) -> float:
        return requests_for(rate) / rate

    up, rate = 0.0, ml.start
    while True:
        up += probe(rate)
        if rate >= ml.max:
            break
        rate = min(rate * 2, ml.max)
    down, rate = probe(ml.start), ml.start
    for _ in range(ml.max_rounds):
        rate /= 2
        down += probe(rate)
    return max(up + ml.max_rounds * probe(ml.start), down)


def _rate_search_bounded(ml: MaxLoadSearch, node: Mapping[str, Any]) -> None:
    """A search over rate whose arrivals alone would take hours (a start of 0.001 req/s) is refused."""
    import dataclasses
    import math

    p = "workload"
    per_cell = _v(node, p, "requests_per_cell")
    least = int(_v(node, p, "min_requests", 2) or 2)

    def requests_for(rate: float) -> int:
        return int(per_cell) if per_cell is not None else max(2 * math.ceil(rate), least)

    worst = rate_search_seconds(ml, requests_for)
    if worst <= MAX_RATE_SEARCH_S:
        return
    ok = ml.start
    while ok < ml.max and rate_search_seconds(dataclasses.replace(ml, start=ok), requests_for) > MAX_RATE_SEARCH_S:
        ok *= 2
    first = requests_for(ml.start) / ml.start
    hint = (f"start at {float(f'{ok:.2g}'):g} req/s or more" if ok < ml.max else "a higher start")
    raise ConfigError("workload.max_load.start", f"{ml.start:g} req/s: the search's arrivals alone could take "
                      f"{worst / 3600:.1f} h (its first probe sends {requests_for(ml.start)} requests over "
                      f"{first:,.0f} s; at most {MAX_RATE_SEARCH_S / 3600:g} h): {hint}, fewer requests per "
                      "probe (workload.requests_per_cell) or fewer workload.max_load.max_rounds")
