"""The grid sampler of the valid space: every valid point once, nothing else.

Optuna's ``GridSampler`` takes a product of value lists, so it cannot leave out
``topk=8, budget=4`` or a budget the box crashes on: its grid would propose them
and each would be a wasted trial (or a rejected one). This grid is the explicit
list of valid points (``_rules.Rules.valid_points``), drawn in a seeded random
order like Optuna's. A point is taken once any trial of the study stands for it
-- finished, running in another worker, or queued -- so a host pool never runs
a point twice and a resumed study continues where it stopped.
"""

from __future__ import annotations

import itertools
import random
from typing import Any, Mapping, Sequence

from optuna.distributions import BaseDistribution
from optuna.samplers import BaseSampler, RandomSampler
from optuna.study import Study
from optuna.trial import FrozenTrial

from ._space import SearchSpace


def _key(params: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((str(k), repr(v)) for k, v in params.items()))


class ValidGridSampler(BaseSampler):
    def __init__(self, space: SearchSpace, points: Sequence[Mapping[str, Any]] | None = None,
                 seed: int | None = None) -> None:
        self._space = dict(space.distributions)
        if points is None:
            grid = space.grid() or {}
            points = [dict(zip(grid, combo)) for combo in itertools.product(*grid.values())]
        self.points = [dict(p) for p in points]
        self._rng = random.Random(seed)
        self._random = RandomSampler(seed=seed)

    def _unvisited(self, study: Study, skip: int | None = None) -> list[dict[str, Any]]:
        taken = set()
        for t in study.get_trials(deepcopy=False):
            if t.number == skip:
                continue
            params = t.params or t.system_attrs.get("fixed_params") or {}
            if params:
                taken.add(_key(params))
        return [p for p in self.points if _key(p) not in taken]

    def is_exhausted(self, study: Study) -> bool:
        return not self._unvisited(study)

    def infer_relative_search_space(self, study: Study, trial: FrozenTrial
                                    ) -> dict[str, BaseDistribution]:
        return {} if trial.system_attrs.get("fixed_params") else dict(self._space)

    def sample_relative(self, study: Study, trial: FrozenTrial,
                        search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
        if not search_space or not self.points:
            return {}
        free = self._unvisited(study, skip=trial.number)
        if not free:
            study.stop()  # the search loop reads this as "the grid is exhausted"
            return dict(self._rng.choice(self.points))  # answered from the study as a repeat
        return dict(self._rng.choice(free))

    def sample_independent(self, study: Study, trial: FrozenTrial, param_name: str,
                           param_distribution: BaseDistribution) -> Any:
        # Only for a param a seed leaves out (every point of the grid is whole).
        return self._random.sample_independent(study, trial, param_name, param_distribution)
