"""What speculation did in a trial, in words a person reads: accept length, rate, per position.

Why: an accept length alone does not say whether the draft helps. The rate
(accepted / drafted draft tokens) does, and a trial whose draft was never
accepted must say so plainly instead of showing an accept length of 1.00 --
the usual cause is a draft model that does not agree with the target (the
shipped random-weight llama.cpp draft, a wrong tokenizer, a mismatched head).

Where the counts come from, best first: the requests' own counters
(``acceptance.requests``: llama.cpp's ``timings.draft_n``/``draft_n_accepted``),
the ``/metrics`` counters over the trial window (``acceptance.metrics``:
llama.cpp, vLLM), else the server's own rate without counts (SGLang's log line
``accept rate: Y``, averaged over the window, or its gauge). Per draft position:
``acceptance.metrics.per_position`` where the server reports it (llama.cpp,
vLLM): the share of drafting steps whose i-th draft token was accepted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from sweep.record.result import TrialResult


@dataclass(frozen=True, slots=True)
class Speculation:
    """One trial's acceptance as the report and the summaries show it."""

    accept_len: float | None = None
    rate: float | None = None            # accepted / drafted
    accepted: int | None = None
    drafted: int | None = None
    source: str | None = None            # where the rate was read: requests, metrics, log
    per_position: tuple[float, ...] = ()

    @property
    def drafted_nothing_accepted(self) -> bool:
        return bool(self.drafted) and self.accepted == 0

    def rate_text(self) -> str:
        """``0.43 (3,452 of 8,000 drafted)``, ``0.62 (server log)``, or ``-``."""
        if self.rate is None:
            return "-"
        if self.drafted is not None and self.accepted is not None:
            return f"{self.rate:.2f} ({self.accepted:,} of {self.drafted:,} drafted)"
        return f"{self.rate:.2f} ({self.source})" if self.source else f"{self.rate:.2f}"

    def verdict(self) -> str | None:
        """One line when the draft was never accepted (None otherwise)."""
        if not self.drafted_nothing_accepted:
            return None
        return (f"draft accepted 0 of {self.drafted:,} tokens: the draft does not agree with the target "
                "(every verify step kept only the target's own token)")

    def positions_text(self) -> str | None:
        if not self.per_position:
            return None
        return " ".join(f"{p:.2f}" for p in self.per_position)


def _section(doc: TrialResult, name: str) -> Mapping[str, Any]:
    acc = doc.acceptance
    part = getattr(acc, name, None) if acc is not None else None
    if part is not None and hasattr(part, "to_dict"):  # a typed record (acceptance.metrics: CounterWindow)
        part = part.to_dict()
    return part if isinstance(part, Mapping) else {}


def _int(x: Any) -> int | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or x != x:
        return None
    return int(x)


def _float(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or x != x:
        return None
    return float(x)


def speculation(doc: TrialResult) -> Speculation:
    """The trial's acceptance from what result.json recorded (old files: what they have)."""
    if (doc.spec_value("algorithm") or doc.trial.spec) in (None, "none", "?"):
        return Speculation()
    accept_len = doc.metrics.accept_len if doc.metrics.accept_len is not None else doc.accept_len.requests
    metrics = _section(doc, "metrics")
    positions = tuple(float(p) for p in (metrics.get("per_position") or ()) if _float(p) is not None)
    for source in ("requests", "metrics"):
        part = _section(doc, source)
        drafted, accepted = _int(part.get("drafted")), _int(part.get("accepted"))
        if drafted:
            return Speculation(accept_len, round((accepted or 0) / drafted, 4), accepted or 0, drafted,
                               source, positions)
    for source, part in (("server log", _section(doc, "log")), ("server metrics", metrics)):
        if (rate := _float(part.get("accept_rate"))) is not None:
            return Speculation(accept_len, round(rate, 4), None, None, source, positions)
    return Speculation(accept_len, None, None, None, None, positions)


def accept_rate(doc: TrialResult) -> float | None:
    """accepted / drafted over the trial (the headline metric ``accept_rate``)."""
    return speculation(doc).rate
