"""Every value a search space can give, checked before the study starts.

Why: the Optuna sweeper composes one job up front (the first value of each
param), so ``spec.budget=choice(4,-1)`` used to become a failed trial -- a
server start, an MLflow run and a sampler steered by a typo -- instead of
one line and exit status 2. Here each value of each param (every choice,
every value of a range, both ends of an interval) goes through the key's own
rule in :mod:`sweep.compose.bounds`; a config group param
(``spec=choice(ddtree,fast)``) is composed and validated option by option.
Rules across keys (``spec.topk`` <= ``spec.budget``) are left to the trial:
a space may hold combinations that are infeasible, and the sweeper learns them.

Called by :mod:`sweep.compose.cmdline` (``python -m sweep -m hydra/sweeper=optuna``)
and by the Optuna sweeper itself (``hydra_plugins/specsweep_optuna_sweeper``)
with the distributions it built.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterable, Mapping, Sequence

from sweep.compose import bounds
from sweep.errors import ConfigError

GROUPS = ("hardware", "spec", "model", "server", "launcher", "workload")
MAX_VALUES = 10_000  # a longer range is checked at its ends


def _shown(value: Any) -> str:
    return "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


def check_values(space: Mapping[str, Iterable[Any]],
                 compose_job: Callable[[list[str]], None] | None = None) -> None:
    """Each value of each param, by its key's rule; raises ConfigError naming the key.

    ``compose_job(overrides)`` composes and validates one job (for group
    params); without it group params are not checked here.
    """
    for key, values in space.items():
        name = key.lstrip("+~")
        for value in values:
            if name in GROUPS:
                if compose_job is not None:
                    compose_job([f"{name}={_shown(value)}"])
                continue
            try:
                bounds.check(name, value)
            except ConfigError as err:
                raise ConfigError(err.key, f"{err.message} (a value of its search space)") from None


SYNTAX = "choice(a, b, ...), range(start, stop[, step]), interval(low, high), int(interval(...)), tag(log, ...)"


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_sweep(key: str, override: Any) -> None:
    """One search-space expression: a range that holds values, an interval low <= high, finite
    numbers, a log scale above 0 (ConfigError naming ``key``). The Optuna sweeper and the
    command-line check both call it, so an expression is judged once, the same way."""
    from hydra.core.override_parser.types import IntervalSweep, RangeSweep

    if not override.is_sweep_override():
        return
    sweep = override.value()
    start: Any
    stop: Any
    if isinstance(sweep, RangeSweep):
        start, stop, step = sweep.start, sweep.stop, 1 if sweep.step is None else sweep.step
        if not all(_number(v) and math.isfinite(v) for v in (start, stop, step)):
            raise ConfigError(key, f"range() takes finite numbers, got range({start}, {stop}, step={step})")
        if step == 0:
            raise ConfigError(key, f"range({start}, {stop}, step=0): the step must not be 0")
        if (step > 0 and start >= stop) or (step < 0 and start <= stop):
            raise ConfigError(key, f"range({start}, {stop}, step={step}) is empty (the stop is exclusive; "
                              "start must be below stop for a positive step)")
    elif isinstance(sweep, IntervalSweep):
        low: Any = sweep.start
        high: Any = sweep.end
        if not (_number(low) and _number(high) and math.isfinite(low) and math.isfinite(high)):
            raise ConfigError(key, f"interval() takes two finite numbers, got interval({low}, {high})")
        if low > high:
            raise ConfigError(key, f"interval({low}, {high}): low must be <= high")
        if "log" in (sweep.tags or set()) and low <= 0:
            raise ConfigError(key, f"tag(log, interval({low}, {high})): a log scale needs low > 0")


def _override_values(override: Any) -> list[Any]:
    """The values one Hydra override can take: a sweep's values (a long range's ends), or its value."""
    from hydra.core.override_parser.types import IntervalSweep, RangeSweep

    if not override.is_sweep_override():
        return [override.value()]
    check_sweep(override.key_or_group, override)
    sweep = override.value()
    if isinstance(sweep, IntervalSweep):
        return [sweep.start, sweep.end]
    if isinstance(sweep, RangeSweep) and sweep.start is not None and sweep.stop is not None:
        step = sweep.step or 1
        if abs((sweep.stop - sweep.start) / step) > MAX_VALUES:
            return [sweep.start, sweep.stop - step]
    out = []
    for i, value in enumerate(override.sweep_iterator()):
        if i >= MAX_VALUES:
            break
        out.append(value)
    return out


def space_of(params: Mapping[str, Any] | None, sweeps: Sequence[str]) -> dict[str, list[Any]]:
    """``hydra.sweeper.params`` then the command line's sweep overrides: key -> values (later wins)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    lines, todo = [], [("", dict(params or {}))]
    while todo:  # {spec: {budget: ...}} reads like {spec.budget: ...}
        prefix, node = todo.pop(0)
        for k, v in node.items():
            if isinstance(v, Mapping):
                todo.append((f"{prefix}{k}.", dict(v)))
            else:
                lines.append(f"{prefix}{k}={v}")
    lines += list(sweeps)
    parser = OverridesParser.create()
    out: dict[str, list[Any]] = {}
    for line in lines:
        try:
            (override,) = parser.parse_overrides([line])
        except HydraException as exc:
            key = line.split("=", 1)[0].lstrip("+~")
            raise ConfigError(key or "overrides", f"not a search space ({SYNTAX}): "
                              f"{str(exc).splitlines()[0]}") from None
        if override.is_delete():
            continue
        prefix = "++" if override.is_force_add() else "+" if override.is_add() else ""
        out[prefix + override.key_or_group] = _override_values(override)
    return out
