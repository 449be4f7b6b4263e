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


def _override_values(override: Any) -> list[Any]:
    """The values one Hydra override can take: a sweep's values (a long range's ends), or its value."""
    from hydra.core.override_parser.types import IntervalSweep, RangeSweep

    if not override.is_sweep_override():
        return [override.value()]
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
            key = line.split("=", 1)[0]
            raise ConfigError(key or "overrides", f"not a search space: {str(exc).splitlines()[0]}") from None
        if override.is_delete():
            continue
        out[override.key_or_group] = _override_values(override)
    return out
