"""Sampler construction, and the wrapper that lets crashed configs teach the sampler.

Optuna's samplers ignore FAIL trials: a config that crashed the server
(``cuda_graph`` at budget 16 on b300) teaches them nothing, so they propose
its neighbours -- and itself -- again and again (the "re-suggested forever"
complaint of peer tools). The study must still record the crash as FAIL with
its reason. :class:`FailureAwareSampler` reconciles the two: the sampler is
given a *view* of the study in which every deterministic failure appears as a
COMPLETE but infeasible trial (constraint ``crashed = 1`` through Optuna 5's
constraint API, value = the worst observed), so TPE puts it in the "bad"
group, GP fits a feasibility model over it and NSGA-II ranks it dominated. The
stored study is never changed. The constraint keys of every completed trial
are also aligned (same names, same order), which GP requires.

It also keeps the sampler inside the valid space (``_rules``: the app's declared
constraints and the box's quirks), per sampler:

* TPE, random, NSGA-II: the wrapper answers every param itself
  (``infer_relative_search_space`` = the whole space) and draws the inner
  sampler's proposal -- its joint ``sample_relative``, completed param by param
  with its ``sample_independent`` -- again until the point is valid. That is
  rejection sampling of each sampler's own proposal: TPE keeps its per-knob
  densities (restricted to the valid region), random search is uniform over the
  valid points, NSGA-II's crossover and mutation are retried.
* GP: its proposal is the acquisition's optimum, so a retry returns the same
  point; after a repeated proposal the wrapper stops retrying and the search loop
  records the point as rejected (FAIL ``invalid``, not counted, no job), which this
  view then shows GP as a crash, so its feasibility model learns the boundary.
  Any sampler falls back to that after ``tries`` invalid proposals.
* grid: ``_grid.ValidGridSampler``, an explicit grid of the valid points only.
"""

from __future__ import annotations

import copy
import math
from typing import Any, Callable, Container, Sequence

import optuna

from sweep.errors import ConfigError
from optuna.distributions import BaseDistribution
from optuna.samplers import BaseSampler
from optuna.study import Study, StudyDirection
from optuna.trial import FrozenTrial, TrialState

from ._space import SearchSpace

CONSTRAINT_PREFIX = "constraints:"  # how Optuna 5 stores Trial.set_constraint(name, value)
CRASHED = "crashed"                 # the sweeper's own constraint: 0 ran, 1 crashed
REJECTED = "invalid"                # a proposal outside the valid space: told FAIL, never run


class _StudyView:
    """The study as the sampler sees it (see module docstring); everything else delegates."""

    def __init__(self, study: Study, transform: Callable[[list[FrozenTrial]], list[FrozenTrial]],
                 on_stop: Callable[[], None]) -> None:
        self._study = study
        self._transform = transform
        self._on_stop = on_stop

    def __getattr__(self, name: str) -> Any:
        return getattr(self._study, name)

    def _get_trials(self, deepcopy: bool = True, states: Container[TrialState] | None = None,
                    use_cache: bool = False) -> list[FrozenTrial]:
        trials = self._transform(self._study._get_trials(deepcopy=False, states=None,
                                                         use_cache=use_cache))
        if states is not None:
            trials = [t for t in trials if t.state in states]
        return copy.deepcopy(trials) if deepcopy else trials

    def get_trials(self, deepcopy: bool = True,
                   states: Container[TrialState] | None = None) -> list[FrozenTrial]:
        return self._get_trials(deepcopy=deepcopy, states=states, use_cache=False)

    @property
    def trials(self) -> list[FrozenTrial]:
        return self.get_trials()

    def stop(self) -> None:
        # GridSampler calls study.stop() when the grid is exhausted; outside study.optimize
        # Optuna raises. The sweep loop reads this flag instead.
        self._on_stop()


class FailureAwareSampler(BaseSampler):
    """Delegates to ``inner`` with deterministic failures shown as infeasible completions,
    and (with ``valid``) keeps its proposals inside the valid space (module docstring)."""

    def __init__(self, inner: BaseSampler, deterministic: Container[str], *,
                 valid: Callable[[dict[str, Any]], bool] | None = None,
                 space: dict[str, BaseDistribution] | None = None, tries: int = 64) -> None:
        self.inner = inner
        self.deterministic = deterministic
        self.stop_requested = False
        self.valid = valid if space else None
        self.space = dict(space or {})
        self.tries = tries

    # -- the view -----------------------------------------------------------------------------
    def is_deterministic_failure(self, trial: FrozenTrial) -> bool:
        reason = trial.user_attrs.get("failure_reason")
        return trial.state == TrialState.FAIL and bool(trial.params) and \
            (reason == REJECTED or reason in self.deterministic)

    def _transform(self, trials: list[FrozenTrial], directions: Sequence[StudyDirection]
                   ) -> list[FrozenTrial]:
        failed = [t for t in trials if self.is_deterministic_failure(t)]
        complete = [t for t in trials if t.state == TrialState.COMPLETE]
        if not failed and not any(t.constraints for t in complete):
            return trials
        names: list[str] = [CRASHED]
        for t in complete:
            for k in t.constraints:
                if k not in names:
                    names.append(k)
        worst = _worst_values(complete, directions)
        out = []
        for t in trials:
            if t.state == TrialState.COMPLETE:
                out.append(_with(t, t.state, t.values, {**dict.fromkeys(names, 0.0), **t.constraints}))
            elif self.is_deterministic_failure(t):
                cons = dict.fromkeys(names, 0.0)
                cons[CRASHED] = 1.0
                out.append(_with(t, TrialState.COMPLETE, worst, cons))
            else:
                out.append(t)
        return out

    def _view(self, study: Study) -> Any:
        if isinstance(study, _StudyView):
            return study
        directions = study.directions
        return _StudyView(study, lambda ts: self._transform(ts, directions), self._request_stop)

    def _request_stop(self) -> None:
        self.stop_requested = True

    # -- BaseSampler --------------------------------------------------------------------------
    def infer_relative_search_space(self, study: Study, trial: FrozenTrial
                                    ) -> dict[str, BaseDistribution]:
        if self.valid is not None and not trial.system_attrs.get("fixed_params"):
            return dict(self.space)  # the wrapper proposes whole points (sample_relative)
        return self.inner.infer_relative_search_space(self._view(study), trial)

    def sample_relative(self, study: Study, trial: FrozenTrial,
                        search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
        view = self._view(study)
        if self.valid is None or trial.system_attrs.get("fixed_params"):
            return self.inner.sample_relative(view, trial, search_space)
        inner_space = self.inner.infer_relative_search_space(view, trial)
        seen: list[dict[str, Any]] = []
        params: dict[str, Any] = {}
        for _ in range(self.tries):
            params = dict(self.inner.sample_relative(view, trial, inner_space)) if inner_space else {}
            for name, dist in self.space.items():
                if name not in params:
                    params[name] = self.inner.sample_independent(view, trial, name, dist)
            if self.valid(params):
                return params
            if params in seen:  # a deterministic proposal (GP): retrying gives it again
                break
            seen.append(params)
        return params  # invalid: the loop records it as rejected and the sampler learns

    def sample_independent(self, study: Study, trial: FrozenTrial, param_name: str,
                           param_distribution: BaseDistribution) -> Any:
        return self.inner.sample_independent(self._view(study), trial, param_name,
                                             param_distribution)

    def before_trial(self, study: Study, trial: FrozenTrial) -> None:
        self.inner.before_trial(self._view(study), trial)

    def after_trial(self, study: Study, trial: FrozenTrial, state: TrialState,
                    values: Sequence[float] | None) -> None:
        self.inner.after_trial(self._view(study), trial, state, values)

    def reseed_rng(self) -> None:
        self.inner.reseed_rng()


def _worst_values(complete: list[FrozenTrial], directions: Sequence[StudyDirection]) -> list[float]:
    """Per objective, the worst finite value seen (0.0 before any completion)."""
    out = []
    for i, d in enumerate(directions):
        vals = [t.values[i] for t in complete if t.values and math.isfinite(t.values[i])]
        if not vals:
            out.append(0.0)
        else:
            out.append(min(vals) if d == StudyDirection.MAXIMIZE else max(vals))
    return out


def _with(t: FrozenTrial, state: TrialState, values: Sequence[float] | None,
          constraints: dict[str, float]) -> FrozenTrial:
    system = {k: v for k, v in t.system_attrs.items()
              if not k.startswith(CONSTRAINT_PREFIX) and k != "constraints"}
    system.update({CONSTRAINT_PREFIX + k: float(v) for k, v in constraints.items()})
    return FrozenTrial(
        number=t.number, state=state, value=None, values=list(values) if values else None,
        datetime_start=t.datetime_start, datetime_complete=t.datetime_complete,
        params=t.params, distributions=t.distributions, user_attrs=t.user_attrs,
        system_attrs=system, intermediate_values=t.intermediate_values, trial_id=t._trial_id,
    )


def build(conf: Any, *, seed: int | None, n_objectives: int, space: SearchSpace,
          deterministic: Container[str], rules: Any = None) -> FailureAwareSampler:
    """The Optuna sampler named by ``conf.name``, wrapped in :class:`FailureAwareSampler`.

    ``seed`` is the effective seed (the caller offsets it on resume so a resumed
    study does not replay the first run's random startup trials). ``rules``
    (``_rules.Rules``): proposals stay in its valid space.
    """
    name = str(conf.get("name") or "tpe").lower()
    options = dict(conf.get("options") or {})
    startup = conf.get("n_startup_trials")
    inner: BaseSampler
    if name == "tpe":
        if startup is not None:
            options.setdefault("n_startup_trials", int(startup))
        inner = optuna.samplers.TPESampler(seed=seed, **options)
    elif name == "gp":
        if n_objectives > 1:
            options.setdefault("warn_independent_sampling", False)
        if startup is not None:
            options.setdefault("n_startup_trials", int(startup))
        inner = optuna.samplers.GPSampler(seed=seed, **options)
    elif name == "random":
        inner = optuna.samplers.RandomSampler(seed=seed, **options)
    elif name == "grid":
        if space.grid() is None:
            raise ConfigError("hydra.sweeper.sampler", "grid needs a discrete space (choice/range, or interval "
                             "of ints); a float interval has no grid")
        from ._grid import ValidGridSampler

        points = rules.valid_points() if rules is not None else None
        inner = ValidGridSampler(space, points, seed=seed, **options)
    elif name == "nsgaii":
        if n_objectives < 2:
            raise ConfigError("hydra.sweeper.sampler", "nsgaii is for multi-objective studies "
                             "(hydra.sweeper.direction=[maximize,maximize] and metrics=[m1,m2])")
        inner = optuna.samplers.NSGAIISampler(seed=seed, **options)
    else:
        raise ConfigError("hydra.sweeper.sampler.name", f"unknown sampler {name!r}; "
                         "allowed: tpe, gp, random, grid, nsgaii")
    valid = rules.valid if rules is not None and name != "grid" else None
    return FailureAwareSampler(inner, deterministic, valid=valid, space=space.distributions)
