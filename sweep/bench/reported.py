"""What a server reports is data to validate: counts, timings and metrics, by type and range.

A usage block with negative token counts gave an ``ok`` trial with negative
tok/s; ``completion_tokens: 1e400`` crashed the trial with OverflowError; a
running count of 10^12 tokens would have built a list that long. Every number
the harness takes from a server goes through :func:`count` or :func:`number`
here first; a value of the wrong type or out of range raises
:class:`BadReport` naming the field, and the request (or the trial, for
``/metrics`` and log figures) fails with it -- counted by
``sweep/trial/bench_errors.py`` like any other failed request
(``bad_value: usage.completion_tokens: -5 is negative``), never scored.

Bounds are generous (a bound catches nonsense, not a fast server): a request
carries at most :data:`MAX_TOKENS` tokens (the longest context any model
serves, ``keys.MAX_CONTEXT``), a counter at most :data:`MAX_COUNTER`.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from sweep.compose.keys import MAX_CONTEXT

KIND = "bad_value"              # the request's error kind (sweep/bench/client.py ERROR_KINDS)
MISMATCH = "usage_mismatch"     # the detail of a count that disagrees with another the same answer gave
MAX_TOKENS = MAX_CONTEXT        # tokens of one request, prompt or completion
MAX_COUNTER = 1e15              # a /metrics counter or a log figure


class BadReport(ValueError):
    """A number the server reported that is of the wrong type or out of range; ``field`` names it."""

    def __init__(self, field: str, detail: str) -> None:
        super().__init__(f"{field}: {detail}")
        self.field = field


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def count(field: str, value: Any, *, hi: float = MAX_TOKENS) -> int | None:
    """A non-negative whole count, or None when absent."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadReport(field, f"{_shown(value)} is not a number")
    if isinstance(value, float) and (not math.isfinite(value) or not value.is_integer()):
        raise BadReport(field, f"{_shown(value)} is not a whole count")
    if value < 0:
        raise BadReport(field, f"{_shown(value)} is negative")
    if value > hi:
        raise BadReport(field, f"{_shown(value)} is beyond any real count (> {hi:,.0f})")
    return int(value)


def number(field: str, value: Any, *, lo: float = 0.0, hi: float = MAX_COUNTER) -> float | None:
    """A finite number in [lo, hi], or None when absent."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadReport(field, f"{_shown(value)} is not a number")
    if not math.isfinite(value):
        raise BadReport(field, f"{_shown(value)} is not a finite number")
    if value < lo or value > hi:
        raise BadReport(field, f"{_shown(value)} is out of range [{lo:g}, {hi:g}]")
    return float(value)


def usage(raw: Any, *, content_events: int, max_tokens: int | None = None) -> tuple[int | None, int | None]:
    """(completion_tokens, prompt_tokens) of a usage block, checked.

    ``max_tokens``: the request's own limit; a server stops there (a speculative
    step's surplus tokens are cut), so more completion tokens than asked for is
    a count the server got wrong, never throughput."""
    if raw is None:
        return None, None
    if not isinstance(raw, Mapping):
        raise BadReport("usage", f"{_shown(raw)} is not an object")
    completion = count("usage.completion_tokens", raw.get("completion_tokens"))
    prompt = count("usage.prompt_tokens", raw.get("prompt_tokens"))
    if completion is not None and completion < content_events:  # each content event carries >= 1 token
        raise BadReport("usage.completion_tokens", f"{MISMATCH}: {completion} tokens, although {content_events} "
                        "events carried text (each carries at least one token)")
    if completion is not None and max_tokens is not None and completion > max_tokens:
        raise BadReport("usage.completion_tokens", f"{completion} is more than the request's max_tokens {max_tokens}")
    return completion, prompt


def running(values: Sequence[Any], final: int | None, *, last_chunk: Any = None, closed: bool = False) -> None:
    """Running usage (``continuous_usage_stats``): whole counts, never decreasing, up to the final count;
    ``closed`` (a final usage block came after the chunks): the final equals the last running count
    (``last_chunk``: of the last chunk that carried one, content or not)."""
    last = 0
    for v in values:
        n = count("usage.completion_tokens (running)", v)
        assert n is not None
        if n < last:
            raise BadReport("usage.completion_tokens (running)", f"went down from {last} to {n}")
        last = n
    if final is not None and last > final:
        raise BadReport("usage.completion_tokens (running)", f"{last} is more than the final count {final}")
    end = count("usage.completion_tokens (running)", last_chunk)
    if closed and final is not None and end is not None and end != final:
        raise BadReport("usage.completion_tokens", f"{MISMATCH}: the final count {final} is not the last "
                        f"running count {end}")


def usage_blocks(finals: Sequence[Any]) -> None:
    """Two final usage blocks of one answer must say the same (which one would the count be?)."""
    seen = [count("usage.completion_tokens", v) for v in finals]
    distinct = list(dict.fromkeys(v for v in seen if v is not None))
    if len(distinct) > 1:
        raise BadReport("usage.completion_tokens", f"{MISMATCH}: {len(seen)} usage blocks disagree "
                        f"({' then '.join(map(str, distinct[:4]))} tokens)")


def metrics_window(window: Mapping[str, Any], source: str) -> dict[str, Any]:
    """Acceptance figures of ``/metrics`` over the trial (counter differences, gauges) or of the log,
    checked: finite and not negative. NaN is Prometheus' "no data" (a gauge before any draft):
    it becomes None, not a failure."""
    out: dict[str, Any] = {}
    for key, value in window.items():
        if key == "per_position" and isinstance(value, (list, tuple)):
            out[key] = [number(f"{source}: per_position[{i}]", v) for i, v in enumerate(value)]
        elif isinstance(value, float) and math.isnan(value):
            out[key] = None
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            out[key] = value if number(f"{source}: {key}", value) is not None else None
        else:
            out[key] = value
    return out
