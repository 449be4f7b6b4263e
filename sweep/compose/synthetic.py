"""Synthetic acceptance knobs (llama.cpp's ``--spec-synth-len`` / ``--spec-synth-rates``).

llama.cpp refuses bad values only when it builds its speculative context, after
the model loaded; checked here they are one line naming the key, before any
server starts (the same rules: one of the two, a length in [1, budget + 1],
``budget`` non-increasing probabilities).
"""

from __future__ import annotations

from typing import Any, Mapping

from sweep.compose.bounds import get as _v
from sweep.errors import ConfigError


def check_synthetic(node: Mapping[str, Any], p: str, budget: int | None) -> None:
    """Synthetic acceptance knobs (llama.cpp's --spec-synth-*), checked before a server starts."""
    length = _v(node, p, "synth_len")
    rates = node.get("synth_rates")
    if length is not None and rates is not None:
        raise ConfigError(f"{p}.synth_rates", "and spec.synth_len are mutually exclusive: set one to null")
    if length is not None and budget is not None and length > budget + 1:
        raise ConfigError(f"{p}.synth_len", f"must be in [1, {budget + 1}] (spec.budget + 1), got {length:g}")
    if rates is None:
        return
    if not isinstance(rates, (list, tuple)) or not rates:
        raise ConfigError(f"{p}.synth_rates", f"must be a list of probabilities, got {rates!r}")
    values = list(_v(node, p, "synth_rates"))
    if budget is not None and len(values) != budget:
        raise ConfigError(f"{p}.synth_rates", f"must have spec.budget={budget} values, got {len(values)}")
    for prev, cur in zip(values, values[1:]):
        if cur is not None and prev is not None and cur > prev:
            raise ConfigError(f"{p}.synth_rates", f"must be non-increasing probabilities in [0, 1], got {list(rates)}")
    if any(v is not None and v > 1 for v in values):
        raise ConfigError(f"{p}.synth_rates", f"must be probabilities in [0, 1], got {list(rates)}")
