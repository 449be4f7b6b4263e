"""The search loop, independent of Hydra: ask -> (repeat? answer it : run the job) -> tell.

Hydra's sweeper (``_impl``) and ``benchmarks/search_efficiency.py`` both drive
this class, so the benchmark measures the code path users run. A job is any
``execute(trial_number, overrides) -> Outcome``.

Rules it enforces:

* ``n_trials`` counts the whole study: every finished or running trial except
  those that were interrupted or went stale (they produced no information and
  their configs are queued again), so a rerun with a larger ``n_trials``
  resumes up to that total.
* A config that failed for a deterministic reason (``cuda_graph``, ``oom``,
  ``bad_flag``, ``config_error`` ...) is never run again: if the sampler
  proposes it anyway, the new trial is told the same FAIL and reason
  (``duplicate_of`` in user attrs) without starting a server. The sampler
  also learns the failure (see ``_sampler``), so such repeats are rare.
* With ``reuse_completed`` a repeat of a completed config is told the
  recorded result instead of restarting a server for it.
* A trial never stays RUNNING because of this process: Ctrl-C or an error
  marks it FAIL (``interrupted`` / ``sweeper_error``) before leaving.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Mapping, Sequence

import optuna
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import FrozenTrial, Trial, TrialState

from . import _storage
from ._result import INTERRUPTED, Outcome, failed
from ._sampler import FailureAwareSampler
from ._space import SearchSpace, format_value

log = logging.getLogger(__name__)

Execute = Callable[[int, list[str]], Outcome]


class Interrupted(Exception):
    """The user stopped the study (Ctrl-C, or a job reported status "interrupted")."""

    def __init__(self, trial_number: int | None) -> None:
        super().__init__(f"interrupted at trial {trial_number}")
        self.trial_number = trial_number


def params_key(params: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((str(k), repr(v)) for k, v in params.items()))


def params_of(t: FrozenTrial) -> dict[str, Any]:
    return dict(t.params) if t.params else dict(t.system_attrs.get("fixed_params") or {})


def _suggest(trial: Trial, space: SearchSpace) -> dict[str, Any]:
    for name, d in space.distributions.items():
        if isinstance(d, CategoricalDistribution):
            trial.suggest_categorical(name, d.choices)
        elif isinstance(d, IntDistribution):
            trial.suggest_int(name, d.low, d.high, step=d.step, log=d.log)
        elif isinstance(d, FloatDistribution):
            trial.suggest_float(name, d.low, d.high, step=d.step, log=d.log)
        else:  # pragma: no cover - parse() only builds the three above
            raise TypeError(f"unsupported distribution {d!r}")
    return {name: trial.params[name] for name in space.distributions}


class SearchLoop:
    def __init__(self, study: optuna.Study, space: SearchSpace, execute: Execute, *,
                 n_trials: int, deterministic: Sequence[str], reuse_completed: bool = True,
                 requeue_interrupted: bool = True, extra_overrides: Callable[[int], list[str]]
                 | None = None, heartbeat_interval: float = 30.0) -> None:
        self.study = study
        self.space = space
        self.execute = execute
        self.n_trials = n_trials
        self.deterministic = set(deterministic)
        self.reuse_completed = reuse_completed
        self.requeue_interrupted = requeue_interrupted
        self.extra_overrides = extra_overrides or (lambda n: [])
        self.heartbeat_interval = heartbeat_interval
        self.executed = 0  # jobs this loop actually ran (server starts)

    # -- bookkeeping ------------------------------------------------------------------------
    def _reason(self, t: FrozenTrial) -> str | None:
        return t.user_attrs.get("failure_reason")

    def counted(self) -> int:
        """Trials that count toward n_trials (see module docstring)."""
        n = 0
        for t in self.study.get_trials(deepcopy=False):
            if t.state == TrialState.WAITING:
                continue
            if t.state == TrialState.FAIL and self._reason(t) in INTERRUPTED:
                continue
            n += 1
        return n

    def _known(self) -> dict[tuple[tuple[str, str], ...], FrozenTrial]:
        """Finished configs whose result can answer a repeat: original trials first."""
        out: dict[tuple[tuple[str, str], ...], FrozenTrial] = {}
        for t in self.study.get_trials(deepcopy=False):
            if not t.params:
                continue
            usable = (t.state == TrialState.COMPLETE and self.reuse_completed) or \
                (t.state == TrialState.FAIL and self._reason(t) in self.deterministic)
            key = params_key(t.params)
            if usable and (key not in out or "duplicate_of" in out[key].user_attrs):
                out[key] = t
        return out

    def _exists(self, params: Mapping[str, Any], skip_number: int | None = None) -> bool:
        """Whether a trial (other than skip_number) already stands for this config."""
        for t in self.study.get_trials(deepcopy=False):
            if t.number == skip_number:
                continue
            if t.state == TrialState.FAIL and self._reason(t) in INTERRUPTED:
                continue
            tp = params_of(t)
            if all(k in tp and repr(tp[k]) == repr(v) for k, v in params.items()):
                return True
        return False

    def exhausted(self) -> bool:
        size = self.space.size()
        if size is None or not self.reuse_completed:
            return False
        return len(self._known()) >= size

    # -- queueing ---------------------------------------------------------------------------
    def requeue(self) -> None:
        """Queue the configs of interrupted/stale trials that nothing else stands for."""
        if not self.requeue_interrupted:
            return
        for t in self.study.get_trials(deepcopy=False, states=(TrialState.FAIL,)):
            if self._reason(t) in INTERRUPTED and t.params and not self._exists(t.params, t.number):
                self.study.enqueue_trial(dict(t.params), user_attrs={"requeued_from": t.number})
                log.info("queued again: the config of interrupted trial %d %s", t.number,
                         _fmt(t.params))

    def enqueue(self, seeds: Sequence[Mapping[str, Any]]) -> None:
        """Queue known configs (production, reference points) unless already in the study."""
        for seed in seeds:
            params = dict(seed)
            why = self.space.check_params(params)
            if why:
                log.warning("enqueue %s skipped: %s", _fmt(params), why)
                continue
            if not self._exists(params):
                self.study.enqueue_trial(params, user_attrs={"enqueued": True})
                log.info("enqueued %s", _fmt(params))

    # -- the loop ---------------------------------------------------------------------------
    def run(self) -> None:
        done = self.counted()
        if done >= self.n_trials:
            log.info("study %r already has %d counted trials (n_trials=%d): nothing to run",
                     self.study.study_name, done, self.n_trials)
        while done < self.n_trials:
            sampler = self.study.sampler
            if isinstance(sampler, FailureAwareSampler) and sampler.stop_requested:
                log.info("the grid is exhausted: stopping after %d trials", done)
                break
            if self.exhausted():
                log.info("every point of the search space has a result: stopping after %d trials",
                         done)
                break
            self.step(done)
            done += 1

    def step(self, done: int) -> FrozenTrial:
        trial: Trial | None = None
        try:
            trial = self.study.ask()
            params = _suggest(trial, self.space)
            prefix = f"trial {trial.number} [{done + 1}/{self.n_trials}] {_fmt(params)}"
            known = self._known().get(params_key(params))
            if known is not None and known.number != trial.number:
                return self._answer_repeat(trial, known, prefix)
            overrides = self.space.overrides(params) + self.extra_overrides(trial.number)
            _storage.mark_owner(self.study._storage, trial._trial_id)
            with _storage.Heartbeat(self.study._storage, trial._trial_id,
                                    self.heartbeat_interval):
                try:
                    outcome = self.execute(trial.number, overrides)
                except (KeyboardInterrupt, Interrupted):
                    raise
                except Exception as exc:  # execute() should not raise; never abort the study
                    log.exception("%s: the job raised", prefix)
                    outcome = failed("exception", f"{type(exc).__name__}: {exc}")
            self.executed += 1
            frozen = self._tell(trial, outcome)
            log.info("%s -> %s", prefix, _describe(frozen))
            if outcome.interrupted:
                raise Interrupted(trial.number)
            return frozen
        except (KeyboardInterrupt, Interrupted):
            self._abandon(trial, "interrupted", "stopped by the user")
            self.requeue()
            raise Interrupted(trial.number if trial is not None else None) from None
        except Exception as exc:
            self._abandon(trial, "sweeper_error", f"{type(exc).__name__}: {exc}")
            raise

    def _abandon(self, trial: Trial | None, reason: str, message: str) -> None:
        """Finish a trial this process owns so it is not left RUNNING; queue its config again."""
        if trial is None:
            return
        frozen = self.study._storage.get_trial(trial._trial_id)
        if frozen.state != TrialState.RUNNING:
            return
        trial.set_user_attr("failure_reason", reason)
        trial.set_user_attr("failure_message", message)
        self.study.tell(trial, state=TrialState.FAIL, skip_if_finished=True)
        log.warning("trial %d marked FAIL (%s)", trial.number, reason)

    def _tell(self, trial: Trial, outcome: Outcome) -> FrozenTrial:
        for k, v in outcome.user_attrs.items():
            trial.set_user_attr(k, v)
        if outcome.state == TrialState.COMPLETE:
            for name, value in outcome.constraints.items():
                trial.set_constraint(name, value)
            return self.study.tell(trial, outcome.values)
        return self.study.tell(trial, state=TrialState.FAIL)

    def _answer_repeat(self, trial: Trial, known: FrozenTrial, prefix: str) -> FrozenTrial:
        """The sampler proposed a config with a known result: tell it again, run nothing."""
        trial.set_user_attr("duplicate_of", known.number)
        for k in ("status", "failure_reason", "result_path", "feasible", "values", "fingerprint"):
            if k in known.user_attrs:
                trial.set_user_attr(k, known.user_attrs[k])
        if known.state == TrialState.COMPLETE:
            for name, value in known.constraints.items():
                trial.set_constraint(name, value)
            frozen = self.study.tell(trial, known.values)
        else:
            trial.set_user_attr("failure_message", f"repeat of trial {known.number}, which failed "
                                f"with {self._reason(known)}: not run again")
            frozen = self.study.tell(trial, state=TrialState.FAIL)
        log.info("%s -> repeat of trial %d (%s), answered without running", prefix,
                 known.number, _describe(known))
        return frozen


def _fmt(params: Mapping[str, Any]) -> str:
    return " ".join(f"{k}={format_value(v)}" for k, v in params.items())


def _describe(t: FrozenTrial) -> str:
    if t.state == TrialState.COMPLETE:
        vals = ", ".join(f"{v:.6g}" for v in (t.values or []))
        feasible = all(v <= 0 for v in t.constraints.values())
        return vals + ("" if feasible else " (infeasible: " + ", ".join(
            k for k, v in t.constraints.items() if v > 0) + ")")
    return f"{t.state.name} {t.user_attrs.get('failure_reason') or ''}".strip()
