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
* Only valid points run (``rules``, see ``_rules``): the sampler proposes inside
  the valid space (``_sampler``); a proposal that is not (a GP optimum outside it)
  is told FAIL ``invalid`` with the rule it breaks, runs nothing and does not count
  toward ``n_trials``. A point run with a quirk's workaround gets its override lines
  appended and recorded (user attrs ``quirk``, ``workaround``).
* A job stopped early by the pruner (``around_job`` registers the cell hook, see
  ``_prune``) is told PRUNED (its value: the last intermediate one); it counts, and
  a repeat of its config is answered PRUNED without running.

Several loops may work on one study at once (one per host of a pool, or
controllers on several machines). Then:

* "count, then ask" runs under the study lock (``_storage.study_lock``), so
  the study never gets more than ``n_trials`` counted trials: a RUNNING trial
  counts, and the next worker sees it;
* before each ask, RUNNING trials of dead workers are failed as ``stale``
  and their configs queued again (heartbeat / dead pid, see ``_storage``);
* a loop with nothing left to ask does not leave while trials of other
  workers are still RUNNING: one of them may die, and its config must still
  be run by someone (``wait_for_running``);
* a config that is RUNNING in another worker is not run twice: the new trial
  waits for that result and is answered like any repeat.
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from typing import TYPE_CHECKING, Any, Callable, ContextManager, Mapping, Sequence

import optuna
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.exceptions import UpdateFinishedTrialError
from optuna.trial import FrozenTrial, Trial, TrialState

from sweep.report.progress import SweepProgress

from . import _storage
from ._dispatch import Dispatcher, InProcess, Runner, _fmt, _Idle, _Job
from ._result import INTERRUPTED, Outcome
from ._sampler import REJECTED, FailureAwareSampler
from ._space import SearchSpace

if TYPE_CHECKING:
    from ._rules import Rules

log = logging.getLogger(__name__)

Execute = Callable[[int, list[str]], Outcome]
MAX_REJECTED_IN_A_ROW = 200  # proposals outside the valid space before the loop gives up


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
                 requeue_interrupted: bool = True,
                 extra_overrides: Callable[[int, Mapping[str, Any]], list[str]] | None = None,
                 heartbeat_interval: float = 30.0,
                 lock: ContextManager[Any] | None = None, stale_after: float | None = None,
                 wait_for_running: bool = True, label: str | None = None,
                 rules: "Rules | None" = None,
                 around_job: Callable[[Trial], ContextManager[Any]] | None = None,
                 identify: Callable[[Mapping[str, Any]], str | None] | None = None) -> None:
        self.study = study
        self.space = space
        self.execute = execute
        self.n_trials = n_trials
        self.deterministic = set(deterministic)
        self.reuse_completed = reuse_completed
        self.requeue_interrupted = requeue_interrupted
        self.extra_overrides = extra_overrides or (lambda n, p: [])
        self.rules = rules
        self.around_job = around_job or (lambda trial: contextlib.nullcontext())
        # params -> the config id its trial will record (sweep/score/configs.py): two points of the
        # space that run the same config (a knob the engine does not render) are one config
        self.identify = identify
        self._rejected_in_a_row = 0
        self.heartbeat_interval = heartbeat_interval
        # The study lock (``_storage.study_lock``); none: this loop is the study's only writer.
        self.lock: ContextManager[Any] = lock if lock is not None else contextlib.nullcontext()
        # Fail other workers' dead trials before each ask (None: only at startup, by open_study).
        self.stale_after = stale_after
        self.wait_for_running = wait_for_running
        self.label = label  # the host this loop's jobs run on (user attr "host")
        self.poll_interval = min(max(heartbeat_interval / 2, 0.2), 1.0)
        self.executed = 0  # jobs this loop actually ran (server starts)
        self.progress = SweepProgress(n_trials)  # "[trial i/N] ... ETA" before each job it runs
        self._last_wait: str | None = None

    # -- bookkeeping ------------------------------------------------------------------------
    def _reason(self, t: FrozenTrial) -> str | None:
        return _storage.failure_reason(t)

    def _counts(self, t: FrozenTrial) -> bool:
        if t.state == TrialState.WAITING:
            return False
        return not (t.state == TrialState.FAIL and self._reason(t) in (*INTERRUPTED, REJECTED))

    def counted(self) -> int:
        """Trials that count toward n_trials (see module docstring)."""
        return sum(1 for t in self.study.get_trials(deepcopy=False) if self._counts(t))

    def _known(self) -> dict[tuple[tuple[str, str], ...], FrozenTrial]:
        """Finished configs whose result can answer a repeat: original trials first."""
        out: dict[tuple[tuple[str, str], ...], FrozenTrial] = {}
        for t in self.study.get_trials(deepcopy=False):
            if not t.params:
                continue
            usable = (t.state == TrialState.COMPLETE and self.reuse_completed) or \
                t.state == TrialState.PRUNED or (t.state == TrialState.FAIL and (
                    self._reason(t) in self.deterministic or self._reason(t) == REJECTED))
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

    def _size(self) -> int | None:
        """Points of a discrete space that can run (the valid ones, with rules)."""
        if self.rules is None:
            return self.space.size()
        valid = self.rules.valid_points()
        return None if valid is None else len(valid)

    def _known_valid(self) -> set[tuple[tuple[str, str], ...]]:
        return {k for k, t in self._known().items() if self._reason(t) != REJECTED}

    def exhausted(self) -> bool:
        size = self._size()
        if size is None or not self.reuse_completed:
            return False
        return len(self._known_valid()) >= size

    def _saturated(self, running: Sequence[FrozenTrial]) -> bool:
        """Every point of a discrete space has a result or is running: a new ask is a twin."""
        size = self._size()
        if size is None or not self.reuse_completed:
            return False
        keys = self._known_valid() | {params_key(params_of(t)) for t in running if params_of(t)}
        return len(keys) >= size

    def _grid_done(self) -> bool:
        sampler = self.study.sampler
        if not isinstance(sampler, FailureAwareSampler):
            return False
        if sampler.stop_requested:
            return True
        inner = sampler.inner
        exhausted = getattr(inner, "is_exhausted", None)  # _grid.ValidGridSampler
        return bool(exhausted is not None and exhausted(self.study))

    # -- queueing ---------------------------------------------------------------------------
    def requeue(self) -> None:
        """Queue the configs of interrupted/stale trials that nothing else stands for."""
        if not self.requeue_interrupted:
            return
        for t in self.study.get_trials(deepcopy=False, states=(TrialState.FAIL,)):
            if self._reason(t) in INTERRUPTED and t.params and not self._exists(t.params, t.number):
                attrs: dict[str, Any] = {"requeued_from": t.number}
                if self._reason(t) == "preempted":  # how often this config's job was lost (_jobs)
                    attrs["lost"] = int(t.user_attrs.get("lost") or 0) + 1
                self.study.enqueue_trial(dict(t.params), user_attrs=attrs)
                log.info("queued again: the config of interrupted trial %d %s", t.number,
                         _fmt(t.params))

    def enqueue(self, seeds: Sequence[Mapping[str, Any]],
                attrs: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = None) -> None:
        """Queue known configs (production, reference points) unless already in the study."""
        for seed in seeds:
            params = dict(seed)
            why = self.space.check_params(params)
            if not why and self.rules is not None:
                why = self.rules.check(params).why
            if why:
                log.warning("enqueue %s skipped: %s", _fmt(params), why)
                continue
            if not self._exists(params):
                extra = dict(attrs(params)) if attrs is not None else {}
                self.study.enqueue_trial(params, user_attrs={"enqueued": True, **extra})
                log.info("enqueued %s", _fmt(params))

    # -- the loop ---------------------------------------------------------------------------
    def run(self, runner: Runner | None = None) -> None:
        """Ask, run and tell until the study is complete.

        ``runner``: where the jobs run (``_dispatch``): by default this process, one
        job at a time (``execute``); launcher=slurm passes its jobs, several in flight.
        Both go through the one dispatcher, so asking and telling is one code path.
        """
        Dispatcher(self, runner or InProcess(self.execute, self.around_job)).run()

    def next(self) -> "FrozenTrial | _Idle":
        """One step of :meth:`run` in this process: the next trial, asked and finished (run,
        answered or rejected), or why there is none now (``wait``: other workers' trials are
        running)."""
        return Dispatcher(self, InProcess(self.execute, self.around_job)).step()

    def ask_next(self) -> "FrozenTrial | _Idle | _Job":
        """Under the study lock: a trial to run (``_Job``), one already finished (a repeat
        answered, a proposal outside the valid space), or why there is none now."""
        with self.lock:
            decision = self._decide()
            job = self._ask(decision) if isinstance(decision, int) else None
        if job is None:
            assert isinstance(decision, _Idle)
            return decision
        self._last_wait = None
        if job.answered is not None:
            if self._reason(job.answered) == REJECTED:
                self._count_rejection(job.answered.user_attrs.get("failure_message") or "")
            else:
                self._rejected_in_a_row = 0
            return job.answered
        if job.rejected is not None:
            return self._reject(job.trial, job.rejected, job.prefix)
        self._rejected_in_a_row = 0
        return job

    def after_twin(self, job: _Job) -> FrozenTrial | None:
        """``job``'s twin (the same config, running elsewhere) has finished: its result
        answers ``job`` (returned), or ``job`` runs after all (None)."""
        known = self._known().get(params_key(job.params))
        if known is not None and known.number != job.trial.number:
            return self._answer_repeat(job.trial, known, job.prefix)
        return None

    def overrides(self, job: _Job) -> list[str]:
        """The job's override lines: the space's, a quirk's workaround, the app's extras."""
        return self.space.overrides(job.params) + list(job.workaround) \
            + self.extra_overrides(job.trial.number, job.params)

    def tell(self, job: _Job, outcome: Outcome) -> FrozenTrial:
        self.executed += 1
        frozen = self._tell(job.trial, outcome)
        log.info("%s -> %s", job.prefix, _describe(frozen))
        return frozen

    def abandon(self, trial: Trial | None, reason: str, message: str) -> None:
        self._abandon(trial, reason, message)

    def refresh_stale(self) -> None:
        """Fail other workers' dead trials and queue their configs (a waiting loop's check)."""
        with self.lock:
            if self.stale_after is not None and \
                    _storage.fail_stale_trials(self.study, self.stale_after, quiet=True):
                self.requeue()

    def note_wait(self, message: str) -> None:
        if message != self._last_wait:
            log.info("%s", message)
            self._last_wait = message

    def _decide(self) -> int | _Idle:
        """Under the study lock: the counted trials so far (ask one more), or why not."""
        if self.stale_after is not None and \
                _storage.fail_stale_trials(self.study, self.stale_after, quiet=True):
            self.requeue()
        trials = self.study.get_trials(deepcopy=False)
        done = sum(1 for t in trials if self._counts(t))
        running = [t for t in trials if t.state == TrialState.RUNNING]
        if done >= self.n_trials:
            return self._idle(running, f"study {self.study.study_name!r} has {done} counted "
                              f"trials (n_trials={self.n_trials})")
        if not any(t.state == TrialState.WAITING for t in trials):
            if self._grid_done():
                return self._idle(running, f"the grid is exhausted after {done} trials")
            if self.exhausted():
                return self._idle(running, "every point of the search space has a result "
                                  f"after {done} trials")
            if running and self._saturated(running):
                return _Idle(True, "every point of the search space has a result or is "
                             f"running: waiting for trial(s) {_numbers(running)}")
        return done

    def _idle(self, running: Sequence[FrozenTrial], why: str) -> _Idle:
        if running and self.wait_for_running:
            return _Idle(True, f"{why}: waiting for trial(s) {_numbers(running)} running "
                         "elsewhere (a dead worker's trial is failed as stale and run again)")
        return _Idle(False, f"{why}: nothing more to run")

    def _ask(self, done: int) -> _Job:
        """Under the study lock: a new trial, its config, and whether it repeats a known one."""
        with warnings.catch_warnings():  # this loop records Optuna's heartbeat itself (_storage)
            warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed")
            trial = self.study.ask()
        params = _suggest(trial, self.space)
        prefix = f"trial {trial.number} [{done + 1}/{self.n_trials}] {_fmt(params)}"
        if self.label:
            trial.set_user_attr("host", self.label)
        known = self._known().get(params_key(params))
        if known is None and self.identify is not None:
            cid = self._identify(params)
            if cid is not None:
                trial.set_user_attr("config_id", cid)
                known = next((t for t in self._known().values() if t.user_attrs.get("config_id") == cid), None)
        if known is not None and known.number != trial.number:
            return _Job(trial, params, prefix, answered=self._answer_repeat(trial, known, prefix))
        verdict = self.rules.check(params) if self.rules is not None else None
        if verdict is not None and not verdict.ok:
            return _Job(trial, params, prefix, rejected=verdict.why or "outside the valid space")
        for k, v in (verdict.attrs() if verdict is not None else {}).items():
            trial.set_user_attr(k, v)
        _storage.mark_owner(self.study._storage, trial._trial_id)
        twin = next((t for t in self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
                     if t.number != trial.number and params_of(t) == params), None)
        return _Job(trial, params, prefix, index=done + 1, twin=twin,
                    workaround=verdict.workaround if verdict is not None else ())

    def _count_rejection(self, why: str) -> None:
        self._rejected_in_a_row += 1
        if self._rejected_in_a_row > MAX_REJECTED_IN_A_ROW:
            raise RuntimeError(f"the sampler proposed {MAX_REJECTED_IN_A_ROW} points in a row that "
                               f"the declared rules exclude (last: {why}); is anything valid left?")

    def _reject(self, trial: Trial, why: str, prefix: str) -> FrozenTrial:
        """A proposal outside the valid space: FAIL ``invalid``, no job, not counted."""
        self._count_rejection(why)
        trial.set_user_attr("failure_reason", REJECTED)
        trial.set_user_attr("failure_message", why)
        frozen = self.study.tell(trial, state=TrialState.FAIL)
        log.info("%s -> not run: %s", prefix, why)
        return frozen

    def _abandon(self, trial: Trial | None, reason: str, message: str) -> None:
        """Finish a trial this process owns so it is not left RUNNING; queue its config again."""
        if trial is None:
            return
        frozen = self.study._storage.get_trial(trial._trial_id)
        if frozen.state != TrialState.RUNNING:
            return
        try:
            trial.set_user_attr("failure_reason", reason)
            trial.set_user_attr("failure_message", message)
            self.study.tell(trial, state=TrialState.FAIL, skip_if_finished=True)
        except UpdateFinishedTrialError:
            return
        log.warning("trial %d marked FAIL (%s)", trial.number, reason)

    def _tell(self, trial: Trial, outcome: Outcome) -> FrozenTrial:
        try:
            for k, v in outcome.user_attrs.items():
                trial.set_user_attr(k, v)
            if outcome.state == TrialState.COMPLETE:
                for name, value in outcome.constraints.items():
                    trial.set_constraint(name, value)
                return self.study.tell(trial, outcome.values)
            if outcome.state == TrialState.PRUNED:
                return self.study.tell(trial, state=TrialState.PRUNED)
            return self.study.tell(trial, state=TrialState.FAIL)
        except UpdateFinishedTrialError:
            # Another sweeper found no heartbeat for stale_after seconds and failed it (and
            # queued its config again). The job's own result stays in its job dir.
            frozen = self.study._storage.get_trial(trial._trial_id)
            log.warning("trial %d was marked %s %s by another sweeper while its job ran "
                        "(heartbeat older than stale_after?): this result is not told",
                        trial.number, frozen.state.name, self._reason(frozen) or "")
            return frozen

    def _identify(self, params: Mapping[str, Any]) -> str | None:
        """The config id of a proposal, or None when it cannot be told here (it runs, and says)."""
        assert self.identify is not None
        try:
            return self.identify(params)
        except Exception as exc:  # noqa: BLE001 - a point the rules refuse is told so below
            log.debug("config id of %s: %s", params, exc)
            return None

    def _answer_repeat(self, trial: Trial, known: FrozenTrial, prefix: str) -> FrozenTrial:
        """The sampler proposed a config with a known result: tell it again, run nothing."""
        trial.set_user_attr("duplicate_of", known.number)
        for k in ("status", "failure_reason", "result_path", "feasible", "values", "fingerprint",
                  "quirk", "workaround", "objective_ci", "objective_n", "config_id"):
            if k in known.user_attrs:
                trial.set_user_attr(k, known.user_attrs[k])
        if known.state == TrialState.COMPLETE:
            for name, value in known.constraints.items():
                trial.set_constraint(name, value)
            frozen = self.study.tell(trial, known.values)
        elif known.state == TrialState.PRUNED:
            for step, value in sorted(known.intermediate_values.items()):
                trial.report(value, step)
            frozen = self.study.tell(trial, state=TrialState.PRUNED)
        else:
            trial.set_user_attr("failure_message", f"repeat of trial {known.number}, which failed "
                                f"with {self._reason(known)}: not run again")
            frozen = self.study.tell(trial, state=TrialState.FAIL)
        log.info("%s -> repeat of trial %d (%s), answered without running", prefix,
                 known.number, _describe(known))
        return frozen


def _numbers(trials: Sequence[FrozenTrial]) -> str:
    return ", ".join(str(t.number) for t in trials)


def _describe(t: FrozenTrial) -> str:
    if t.state == TrialState.COMPLETE:
        vals = ", ".join(f"{v:.6g}" for v in (t.values or []))
        feasible = all(v <= 0 for v in t.constraints.values())
        return vals + ("" if feasible else " (infeasible: " + ", ".join(
            k for k, v in t.constraints.items() if v > 0) + ")")
    if t.state == TrialState.PRUNED:
        last = t.last_step
        return "PRUNED" + (f" after {last + 1} cell(s) ({t.intermediate_values[last]:.6g} so far)"
                           if last is not None else "")
    return f"{t.state.name} {t.user_attrs.get('failure_reason') or ''}".strip()
