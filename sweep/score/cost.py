"""Dollars per million output tokens from a box's hourly price.

Why it exists: a faster configuration that needs a 150 s server restart per
trial is not always cheaper. The per-cell figure is the steady-state price of
that load point; the per-trial figure amortises the server's startup over the
tokens the trial actually produced, so restart-heavy setups pay for it.

Formulas (also in docs/tracking.md)::

    cell  $/Mtok = cost_per_hour / 3600 / (output_tok_s / 1e6)
    trial $/Mtok = cost_per_hour * (startup_s + measured_s) / 3600 / (total_tokens / 1e6)

``cost_per_hour`` is the price of the whole box (``hardware.cost_per_hour``);
``null`` (unknown) gives ``None`` everywhere, never a made-up number.
"""

from __future__ import annotations

import math

SECONDS_PER_HOUR = 3600.0
TOKENS_PER_MTOK = 1e6


def _valid(x: float | int | None) -> bool:
    return x is not None and not isinstance(x, bool) and math.isfinite(float(x))


def usd_per_mtok(cost_per_hour: float | None, tok_s: float | None = None, *,
                 startup_s: float = 0.0, measured_s: float | None = None,
                 total_tokens: float | None = None) -> float | None:
    """Generic form: from a rate (``tok_s``) or from tokens over time.

    With ``total_tokens`` and ``measured_s`` the time base is
    ``startup_s + measured_s``; with ``tok_s`` alone it is the steady state,
    plus ``startup_s`` amortised over ``tok_s * measured_s`` tokens when
    ``measured_s`` is given. ``None`` when the price or the throughput is
    unknown or not positive.
    """
    if not _valid(cost_per_hour) or float(cost_per_hour) <= 0:  # type: ignore[arg-type]
        return None
    if total_tokens is None and _valid(tok_s) and measured_s is not None and _valid(measured_s):
        total_tokens = float(tok_s) * float(measured_s)  # type: ignore[arg-type]
    if total_tokens is not None:
        if not _valid(total_tokens) or float(total_tokens) <= 0 or measured_s is None:
            return None
        seconds = float(startup_s or 0.0) + float(measured_s)
        if seconds <= 0:
            return None
        return float(cost_per_hour) * seconds / SECONDS_PER_HOUR / (float(total_tokens) / TOKENS_PER_MTOK)  # type: ignore[arg-type]
    if not _valid(tok_s) or float(tok_s) <= 0:  # type: ignore[arg-type]
        return None
    return float(cost_per_hour) / SECONDS_PER_HOUR / (float(tok_s) / TOKENS_PER_MTOK)  # type: ignore[arg-type]


def cell_usd_per_mtok(cost_per_hour: float | None, output_tok_s: float) -> float | None:
    """Steady-state price of one load point (no startup): the box's hourly
    price over the tokens it emits per hour at that cell's aggregate rate."""
    return usd_per_mtok(cost_per_hour, output_tok_s)


def trial_usd_per_mtok(cost_per_hour: float | None, total_tokens: float, measured_s: float,
                       startup_s: float = 0.0) -> float | None:
    """Whole-trial price: box time from the start of the server launch to the
    end of the last cell, over every completion token the matrix produced.
    A reused server reports its own ``startup_s`` (0 when it was already up)."""
    return usd_per_mtok(cost_per_hour, startup_s=startup_s or 0.0, measured_s=measured_s,
                        total_tokens=total_tokens)
