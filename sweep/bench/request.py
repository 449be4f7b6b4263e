"""What one request did: the record the client fills and every figure is computed from.

Kept apart from the client (:mod:`sweep.bench.client`, which sends) and the SSE
parser (:mod:`sweep.bench.sse`, which fills it) so the record sits below both:
the parser writes into it, the cell aggregates read it (:mod:`sweep.bench.cell`),
and neither needs the code that moves bytes. Times are ``time.perf_counter()``
seconds; tokens come from the server's ``usage``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["ERROR_KINDS", "RequestResult"]

# Error kinds (plus ``http_<status>``), documented in one place.
ERROR_KINDS = {
    "connect": "endpoint unreachable (connection refused / DNS / connect timeout)",
    "timeout": "no complete answer within the request timeout",
    "disconnect": "connection closed before the stream finished",
    "bad_sse": "an SSE event whose data is not valid JSON",
    "bad_json": "a non-streaming body that is not JSON",
    "not_streamed": "a JSON body where an SSE stream was expected",
    "server_error": "the server reported an error object",
    "no_usage": "stream finished without a usage block (token count unknown)",
    "bad_value": "a number the server reported is of the wrong type or out of range (the field is named)",
    "http_error": "another HTTP transport error",
    "exception": "an unexpected client-side error",
}


@dataclass(slots=True)
class RequestResult:
    """What one request did. ``ok`` is False exactly when ``error`` is set."""

    ok: bool = False
    error: str | None = None
    detail: str | None = None
    status: int | None = None
    started: float = 0.0              # time.perf_counter() when the request was handed to the transport
    ttft_s: float | None = None
    e2e_s: float | None = None
    chunk_t: list[float] = field(default_factory=list)     # perf_counter of each content event
    chunk_tokens: list[int] = field(default_factory=list)  # running completion_tokens at each (if sent)
    chunks: int = 0                   # SSE events with content (not tokens!)
    completion_tokens: int | None = None   # from usage
    prompt_tokens: int | None = None       # from usage
    spec_verify_ct: int | None = None      # from meta_info
    meta_completion_tokens: int | None = None
    # raw fields of the stream's non-content events (llama.cpp's timings, SGLang's meta_info)
    extras: dict[str, Any] | None = None
    finish_reason: str | None = None
    text: str = ""
    retries: int = 0                  # re-sent after a kept-alive connection closed unanswered

    @property
    def step_s(self) -> list[float]:
        """Gaps between consecutive content events (one verify step each)."""
        t = self.chunk_t
        return [t[i] - t[i - 1] for i in range(1, len(t))]

    @property
    def tokens_counted(self) -> bool:
        """True when the server said how many tokens each event carried."""
        return len(self.chunk_tokens) == len(self.chunk_t) > 0

    def itl_s(self) -> list[float]:
        """Inter-token latencies, one per token after the first event (SGLang's definition).

        Each gap between content events is spread evenly over the tokens the
        later event carries; an event that adds no token passes its gap on.
        """
        t = self.chunk_t
        if len(t) < 2:
            return []
        per_event = self._tokens_per_event()
        out: list[float] = []
        last = t[0]
        for i in range(1, len(t)):
            k = per_event[i]
            if k <= 0:
                continue
            gap = (t[i] - last) / k
            out.extend([gap] * k)
            last = t[i]
        return out

    def _tokens_per_event(self) -> list[int]:
        n = len(self.chunk_t)
        if self.tokens_counted:
            cum = self.chunk_tokens
            return [cum[0]] + [cum[i] - cum[i - 1] for i in range(1, n)]
        rest = max(0, (self.completion_tokens or n) - 1)  # the first event: prefill's one token
        base, extra = divmod(rest, n - 1) if n > 1 else (0, 0)
        return [1] + [base + (1 if i <= extra else 0) for i in range(1, n)]

    @property
    def tpot_s(self) -> float | None:
        """Mean time per output token after the first: (e2e - ttft) / (tokens - 1)."""
        if not self.ok or self.e2e_s is None or self.ttft_s is None:
            return None
        n = self.completion_tokens or 0
        if n < 2:
            return None
        return max(0.0, self.e2e_s - self.ttft_s) / (n - 1)

    @property
    def stream_tok_s(self) -> float | None:
        """Decode speed one user sees: completion_tokens / (e2e - ttft).

        Prefill wait is excluded (TTFT reports it); when the whole answer
        arrived in the first chunk, falls back to completion_tokens / e2e.
        """
        if not self.ok or not self.completion_tokens or self.e2e_s is None:
            return None
        decode = self.e2e_s - (self.ttft_s or 0.0)
        if decode <= 1e-6:
            decode = self.e2e_s
        return self.completion_tokens / decode if decode > 0 else None

    @property
    def accept_len(self) -> float | None:
        """(completion_tokens - 1) / spec_verify_ct: tokens per verify step, the bonus token in, the
        prefill's first token out (sweep/bench/acceptance.py); None without spec."""
        if not self.spec_verify_ct:
            return None
        n = self.meta_completion_tokens or self.completion_tokens
        return (n - 1) / self.spec_verify_ct if n else None

    def fail(self, kind: str, detail: str | None = None) -> "RequestResult":
        self.ok = False
        self.error = kind
        self.detail = (detail or "")[:300] or None
        return self
