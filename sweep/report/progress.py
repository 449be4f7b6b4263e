"""``trial i of N`` with an ETA, for a grid (the Hydra callback) and a search (the Optuna loop).

Why: a grid or a search prints each trial's own progress, but not where the
sweep stands -- with a 150 s server restart per trial, "how long until it is
done" is the question. The ETA is the mean wall time of the trials this
process actually ran (jobs a resumed grid skipped, or repeats a search
answered without running, take no time and are left out) times the trials
left, the current one included. One line per trial on stderr, flushed, so it
reads the same on a terminal and in a log.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


def duration(seconds: float) -> str:
    """``42 s``, ``3:05``, ``1:02:09``."""
    s = int(round(seconds))
    if s < 60:
        return f"{s} s"
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"


class SweepProgress:
    """Counts the trials of one sweep in this process and prints where it stands."""

    def __init__(self, total: int | None, *, noun: str = "trial", stream: TextIO | None = None) -> None:
        self.total = total
        self.noun = noun
        self.stream = stream
        self.t0 = time.monotonic()
        self.ran: list[float] = []  # wall time of each trial that ran
        self._started: float | None = None

    def eta(self, index: int) -> float | None:
        """Seconds left when trial ``index`` (1-based) starts; None before any trial ran."""
        if not self.ran or self.total is None:
            return None
        return sum(self.ran) / len(self.ran) * max(0, self.total - index + 1)

    def line(self, index: int, what: str = "") -> str:
        of = f"/{self.total}" if self.total is not None else ""
        parts = [f"[{self.noun} {index}{of}]" + (f" {what}" if what else ""),
                 f"elapsed {duration(time.monotonic() - self.t0)}"]
        left = self.eta(index)
        if left is not None:
            mean = sum(self.ran) / len(self.ran)
            parts.append(f"ETA {duration(left)} ({duration(mean)} per {self.noun})")
        return " · ".join(parts)

    def start(self, index: int, what: str = "") -> None:
        """Trial ``index`` (1-based) starts: say so, with the ETA."""
        self._started = time.monotonic()
        print(self.line(index, what), file=self.stream or sys.stderr, flush=True)

    def done(self, *, ran: bool = True) -> None:
        """The trial ended; ``ran=False``: it was answered without running (not in the mean)."""
        if self._started is not None and ran:
            self.ran.append(time.monotonic() - self._started)
        self._started = None
