"""A benchmark whose requests failed is a failed trial, not an ``ok`` one with 0 tok/s.

Why: 500s, broken streams, mid-stream disconnects, timeouts, a frozen server
and 30,000 connect errors all used to end ``status: ok`` with
``tok_s_c1: 0.0`` -- a number a sweeper ranks and a script trusts. Here every
request the trial sent (the coding eval's and the matrix's) is counted; a
trial with more failed requests than ``workload.max_error_rate`` of them
(default 0), or with no request answered at all, is ``failed`` with reason
``bench_errors`` and the first distinct error messages (secrets masked).

Only transport, HTTP and protocol failures count: a coding answer that runs
and fails its tests was *answered*; wrong answers are the correctness gate's
business (``objective.constraints.coding_pass_rate_min``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable

from sweep import secrets

if TYPE_CHECKING:
    from sweep.bench.request import RequestResult
    from sweep.bench.coding import CodingResult
    from sweep.bench.cell import CellResult

REASON = "bench_errors"
MAX_MESSAGES = 3


@dataclass
class Tally:
    """Requests sent and failed, and the first distinct error messages in the order they happened."""

    sent: int = 0
    failed: int = 0
    messages: list[str] = field(default_factory=list)
    repeats: dict[str, int] = field(default_factory=dict)
    _first: dict[str, str] = field(default_factory=dict, repr=False)

    def add(self, error: str | None) -> None:
        """One request: ``error`` is None when it was answered, else ``kind: detail``."""
        self.sent += 1
        if error is None:
            return
        self.failed += 1
        text = secrets.mask_text(" ".join(error.split()))[:200]
        same = re.sub(r"\d+", "#", text)  # "error on request 7" repeats "error on request 3"
        if same not in self._first:
            self._first[same] = text
            self.messages.append(text)
        first = self._first[same]
        self.repeats[first] = self.repeats.get(first, 0) + 1

    @property
    def rate(self) -> float:
        return self.failed / self.sent if self.sent else 0.0


def _error(rec: RequestResult) -> str | None:
    if rec.ok:
        return None
    return f"{rec.error}: {rec.detail}" if rec.detail else str(rec.error)


def tally(cells: Iterable[CellResult], coding: CodingResult | None = None) -> Tally:
    """Every request of the coding eval, then every measured request of the matrix."""
    out = Tally()
    for problem in coding.problems if coding is not None else ():
        out.add(problem.request_error)
    for cell in cells:
        for rec in cell.results:
            out.add(_error(rec))
    return out


def verdict(t: Tally, max_error_rate: float) -> str | None:
    """The failure message when the errors fail the trial, else None."""
    if t.sent == 0 or (t.failed < t.sent and t.rate <= max_error_rate):
        return None
    shown = "; ".join(f"{m} (x{t.repeats[m]})" if t.repeats[m] > 1 else m for m in t.messages[:MAX_MESSAGES])
    more = f"; and {len(t.messages) - MAX_MESSAGES} other errors" if len(t.messages) > MAX_MESSAGES else ""
    if t.failed == t.sent:
        head = f"no request succeeded ({t.failed} of {t.sent} failed)"
    else:
        head = (f"{t.failed} of {t.sent} requests failed ({t.rate:.1%} > workload.max_error_rate "
                f"{max_error_rate:g})")
    return f"{head}: {shown}{more}"
