"""The search space: Hydra sweep overrides -> Optuna distributions, and back to overrides.

Same ``params`` syntax as Hydra's Optuna sweeper, so existing habits and
configs carry over:

* ``choice(a, b, c)`` and a plain ``a,b,c`` list -> CategoricalDistribution
* ``range(start, stop[, step])`` -> Int/FloatDistribution with that step; like
  Hydra's ``range`` the stop is exclusive (``range(1, 5)`` is 1..4)
* ``interval(low, high)`` -> Int (both ends int) or Float distribution, inclusive
* ``tag(log, interval(...))`` -> the same on a log scale
* ``shuffle(range(...))`` -> CategoricalDistribution of the range's values
* anything that is not a sweep (``workload=smoke``, ``+x=1``) is a fixed
  override given to every job; a fixed override on the command line removes
  that key from the search space (narrowing a ready-made space).

Param names are the override keys without ``+``/``++`` prefixes, so plots and
``best.yaml`` read ``spec.budget``; the prefix is kept for the job's override.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence, cast

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Glob, IntervalSweep, Override, RangeSweep, Transformer
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)

from sweep.compose.search_space import SYNTAX, check_sweep
from sweep.errors import ConfigError

MAX_GRID = 1_000_000


class SearchSpaceError(ConfigError):
    """A ``params`` entry the sweeper cannot turn into a distribution (one line naming its key)."""


@dataclass
class SearchSpace:
    distributions: dict[str, BaseDistribution] = field(default_factory=dict)
    keys: dict[str, str] = field(default_factory=dict)        # param -> override key (with prefix)
    fixed: dict[str, str] = field(default_factory=dict)       # key -> raw override line

    def overrides(self, params: Mapping[str, Any]) -> list[str]:
        """One job's override lines: fixed overrides, then this trial's params."""
        lines = list(self.fixed.values())
        for name, value in params.items():
            lines.append(f"{self.keys.get(name, name)}={format_value(value)}")
        return lines

    def grid(self) -> dict[str, list[Any]] | None:
        """Every value of each param, or None when a param is continuous."""
        out: dict[str, list[Any]] = {}
        for name, dist in self.distributions.items():
            values = discrete_values(dist)
            if values is None:
                return None
            out[name] = values
        return out

    def size(self) -> int | None:
        grid = self.grid()
        if grid is None:
            return None
        return math.prod(len(v) for v in grid.values())

    def check_params(self, params: Mapping[str, Any]) -> str | None:
        """Why ``params`` (e.g. an enqueued seed) is not in the space, or None."""
        for name, value in params.items():
            dist = self.distributions.get(name)
            if dist is None:
                return f"{name} is not a searched param (searched: {', '.join(self.distributions)})"
            if not contains(dist, value):
                return f"{name}={value!r} is outside {describe(dist)}"
        return None


def format_value(value: Any) -> str:
    """A value as Hydra override text (strings from choice() are already escaped)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def discrete_values(dist: BaseDistribution) -> list[Any] | None:
    if isinstance(dist, CategoricalDistribution):
        return list(dist.choices)
    if isinstance(dist, IntDistribution):
        if (dist.high - dist.low) // dist.step > MAX_GRID:
            return None
        return list(range(dist.low, dist.high + 1, dist.step))
    if isinstance(dist, FloatDistribution) and dist.step is not None:
        n = int(round((dist.high - dist.low) / dist.step))
        return [dist.low + i * dist.step for i in range(n + 1)]
    return None


def contains(dist: BaseDistribution, value: Any) -> bool:
    if isinstance(dist, CategoricalDistribution):
        return any(value == c and type(value) is type(c) for c in dist.choices) or value in dist.choices
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if isinstance(dist, IntDistribution):
        return float(value).is_integer() and dist.low <= value <= dist.high \
            and (int(value) - dist.low) % dist.step == 0
    if isinstance(dist, FloatDistribution):
        return dist.low <= value <= dist.high
    return False


def describe(dist: BaseDistribution) -> str:
    if isinstance(dist, CategoricalDistribution):
        return "choice(" + ", ".join(map(str, dist.choices)) + ")"
    if isinstance(dist, (IntDistribution, FloatDistribution)):
        scale = " log" if dist.log else ""
        step = f" step {dist.step}" if dist.step not in (None, 1) else ""
        return f"[{dist.low}, {dist.high}]{step}{scale}"
    return repr(dist)


def _param_name(override: Override) -> str:
    key = override.key_or_group
    return key if override.package is None else f"{key}@{override.package}"


def _key_with_prefix(override: Override) -> str:
    prefix = "++" if override.is_force_add() else "+" if override.is_add() else ""
    return prefix + _param_name(override)


def _numbers(key: str, values: Iterable[Any]) -> list[int | float]:
    out = list(values)
    if not out or any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in out):
        raise SearchSpaceError(key, f"expected numbers, got {out!r}")
    return out


def distribution(override: Override) -> BaseDistribution:
    """The Optuna distribution of one sweep override (see module docstring)."""
    key = _param_name(override)
    if isinstance(override.value(), Glob):
        raise SearchSpaceError(key, "glob() selects config groups; list them with choice()")
    check_sweep(key, override)  # empty/zero-step ranges, reversed intervals: sweep/compose/search_space.py
    sweep = override.value()
    if override.is_choice_sweep():
        choices = list(override.sweep_iterator(transformer=Transformer.encode))
        for c in choices:
            if c is not None and not isinstance(c, (str, int, float, bool)):
                raise SearchSpaceError(key, f"choice() takes str/int/float/bool/null, got {c!r}")
        if not choices:
            raise SearchSpaceError(key, "choice() needs at least one value")
        return CategoricalDistribution(cast("list[Any]", choices))
    if isinstance(sweep, RangeSweep):
        values = list(override.sweep_iterator(transformer=Transformer.encode))
        if sweep.shuffle:
            return CategoricalDistribution(cast("list[Any]", values))
        nums = _numbers(key, values)
        step = abs(sweep.step) if sweep.step is not None else 1
        low, high = min(nums), max(nums)
        if all(isinstance(v, int) for v in nums) and float(step).is_integer():
            return IntDistribution(int(low), int(high), step=int(step))
        if len(nums) == 1:
            return CategoricalDistribution(nums)
        return FloatDistribution(float(low), float(high), step=float(step))
    if isinstance(sweep, IntervalSweep):
        log = "log" in (sweep.tags or set())
        if isinstance(sweep.start, int) and isinstance(sweep.end, int):
            return IntDistribution(sweep.start, sweep.end, log=log)
        return FloatDistribution(float(cast(float, sweep.start)), float(cast(float, sweep.end)),
                                 log=log)
    raise SearchSpaceError(key, f"only {SYNTAX} can be searched by the Optuna sweeper")


def parse(params: Mapping[str, Any] | None, arguments: Sequence[str]) -> SearchSpace:
    """Build the space from ``hydra.sweeper.params`` then the command line (later wins)."""
    from hydra.errors import HydraException

    lines = [f"{k}={v}" for k, v in (params or {}).items()]
    lines.extend(arguments)
    parser = OverridesParser.create()
    parsed = []
    for line in lines:
        try:
            parsed.extend(parser.parse_overrides([line]))
        except HydraException as exc:
            key = line.split("=", 1)[0].lstrip("+~") or "hydra.sweeper.params"
            raise SearchSpaceError(key, f"not a search space ({SYNTAX}): {str(exc).splitlines()[0]}") from None
    space = SearchSpace()
    for override in parsed:
        name = _param_name(override)
        if override.is_sweep_override():
            if override.is_delete():
                raise SearchSpaceError(name, "a deletion cannot be searched")
            space.distributions[name] = distribution(override)
            space.keys[name] = _key_with_prefix(override)
            space.fixed.pop(name, None)
        else:
            space.distributions.pop(name, None)
            space.keys.pop(name, None)
            space.fixed[name] = override.input_line or f"{_key_with_prefix(override)}=" \
                f"{override.get_value_element_as_str()}"
    return space


def decode(name: str, value: Any) -> Any:
    """A param value as the job saw it (decodes escaped choice strings)."""
    if not isinstance(value, str):
        return value
    parsed = OverridesParser.create().parse_overrides([f"{name}={value}"])[0]
    return parsed.value()
