"""The dispatcher: one ask/tell code path, whatever runs the jobs.

A search asks Optuna for a trial, runs its job, and tells the result. Where
the job runs is a :class:`Runner`:

* :class:`InProcess` -- this process, one job at a time, through Hydra's
  launcher (the plain sweeper, and every worker of a host pool, local or SSH);
* ``_slurm.SlurmRunner`` -- each job a SLURM job, up to ``hydra.sweeper.n_jobs``
  in flight (launcher=slurm, docs/cluster.md).

Everything else is the :class:`Dispatcher`'s and the loop's (``_loop.SearchLoop``),
shared by both: counting and asking under the study lock, answering repeats,
waiting for a twin running elsewhere, a heartbeat per trial while it is out,
telling each result as soon as its job ends and asking the next one at once,
and on Ctrl-C (or an error) stopping every job in flight and marking its
trial ``interrupted`` (queued again) so nothing stays RUNNING. A runner only
starts jobs, reports the ones that ended with their :class:`~._result.Outcome`,
and cancels what is in flight. It never sees an objective: several objectives
(a list of values) pass through the outcome unchanged.
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, ContextManager, Iterator, Mapping, Protocol

from optuna.trial import FrozenTrial, Trial

from . import _storage
from ._result import Outcome, failed
from ._space import format_value

log = logging.getLogger(__name__)


class Interrupted(Exception):
    """The user stopped the study (Ctrl-C, or a job reported status "interrupted").

    ``ended``: the outcome of the trial that was running when Ctrl-C came, when its
    result had already ended (the stop reached it while it drew its plots or wrote its
    MLflow run): it is told as such, not thrown away and run again on resume."""

    def __init__(self, trial_number: int | None, ended: Outcome | None = None) -> None:
        super().__init__(f"interrupted at trial {trial_number}")
        self.trial_number = trial_number
        self.ended = ended


@dataclass
class _Job:
    """One asked trial, ready to run (or already answered as a repeat)."""

    trial: Trial
    params: dict[str, Any]
    prefix: str
    index: int = 0  # 1-based place in the study's n_trials (progress)
    answered: FrozenTrial | None = None
    twin: FrozenTrial | None = None  # a RUNNING trial of another worker with the same config
    rejected: str | None = None      # why the point is outside the valid space (never run)
    workaround: tuple[str, ...] = ()  # a quirk's override lines the job runs with


@dataclass
class _Idle:
    """Nothing to ask now: ``wait`` for running trials of other workers, or stop."""

    wait: bool
    message: str


def _fmt(params: Mapping[str, Any]) -> str:
    return " ".join(f"{k}={format_value(v)}" for k, v in params.items())




@dataclass
class Running:
    """A trial that is out: asked, its heartbeat beating, its job started (or waiting)."""

    job: _Job
    heartbeat: _storage.Heartbeat
    overrides: list[str] = field(default_factory=list)
    started: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)  # the runner's (a SLURM job id ...)

    @property
    def number(self) -> int:
        return int(self.job.trial.number)

    @property
    def trial(self) -> Trial:
        return self.job.trial


class Runner(Protocol):
    """Where jobs run. ``slots``: jobs at once; ``stop_when_interrupted``: a job that
    reports ``interrupted`` means the user stopped *this* process (Ctrl-C reached the job)."""

    slots: int
    stop_when_interrupted: bool

    def start(self, run: Running) -> None: ...
    def wait(self, timeout: float) -> list[tuple[Running, Outcome]]: ...
    def cancel(self, why: str) -> None: ...
    def close(self) -> None: ...


class InProcess:
    """This process runs each job to its end in :meth:`start` (one at a time)."""

    slots = 1
    stop_when_interrupted = True

    def __init__(self, execute: Callable[[int, list[str]], Outcome],
                 around_job: Callable[[Trial], ContextManager[Any]]) -> None:
        self.execute = execute
        self.around_job = around_job
        self._done: list[tuple[Running, Outcome]] = []

    def start(self, run: Running) -> None:
        try:
            with self.around_job(run.trial):
                outcome = self.execute(run.number, run.overrides)
        except (KeyboardInterrupt, Interrupted):
            raise
        except Exception as exc:  # execute() should not raise; never abort the study
            log.exception("%s: the job raised", run.job.prefix)
            outcome = failed("exception", f"{type(exc).__name__}: {exc}")
        self._done.append((run, outcome))

    def wait(self, timeout: float) -> list[tuple[Running, Outcome]]:
        done, self._done = self._done, []
        return done

    def cancel(self, why: str) -> None:  # the job was this process: nothing else runs
        return None

    def close(self) -> None:
        return None


class Dispatcher:
    """Keeps up to ``runner.slots`` trials out; tells each as it ends (module docstring)."""

    def __init__(self, loop: Any, runner: Runner) -> None:
        # loop: the _loop.SearchLoop that owns this dispatcher (typed Any: _loop imports this
        # module, and the import graph has no cycles, TYPE_CHECKING ones included)
        self.loop = loop
        self.runner = runner
        self.inflight: list[Running] = []
        self.awaiting: list[Running] = []  # a twin of theirs runs elsewhere

    # -- the two drivers -----------------------------------------------------------------------
    def run(self) -> None:
        loop = self.loop
        with self._guard():
            while True:
                for run, outcome in self.runner.wait(0):
                    self._finish(run, outcome)
                self._twins()
                idle: _Idle | None = None
                while len(self.inflight) + len(self.awaiting) < self.runner.slots:
                    out = loop.ask_next()
                    if isinstance(out, FrozenTrial):
                        continue
                    if isinstance(out, _Idle):
                        idle = out
                        break
                    self._take(out)
                if self.inflight or self.awaiting:
                    if self.awaiting:
                        loop.refresh_stale()
                    for run, outcome in self.runner.wait(loop.poll_interval):
                        self._finish(run, outcome)
                    continue
                if idle is None:
                    continue
                if not idle.wait:
                    log.info("%s", idle.message)
                    return
                loop.note_wait(idle.message)
                time.sleep(loop.poll_interval)

    def step(self) -> "FrozenTrial | _Idle":
        """One trial asked and finished in this process (the benchmark's and the tests' step)."""
        loop = self.loop
        with self._guard():
            out = loop.ask_next()
            if not isinstance(out, _Job):
                return out
            self._take(out)
            while self.awaiting:
                loop.refresh_stale()
                time.sleep(loop.poll_interval)
                answered = self._twins()
                if answered:
                    return answered[0]
            finished = self.runner.wait(0)
            assert len(finished) == 1, "an in-process job ends in start()"
            return self._finish(*finished[0])

    # -- one trial ------------------------------------------------------------------------------
    def _take(self, job: _Job) -> None:
        hb = _storage.Heartbeat(self.loop.study._storage, job.trial._trial_id,
                                self.loop.heartbeat_interval)
        hb.__enter__()
        run = Running(job, hb)
        if job.twin is not None:
            log.info("%s: the same config is running as trial %d; waiting for its result",
                     job.prefix, job.twin.number)
            self.awaiting.append(run)
            return
        self._start(run)

    def _twins(self) -> list[FrozenTrial]:
        """Waiting trials whose twin has finished: answered by its result, or started."""
        answered = []
        for run in list(self.awaiting):
            twin = run.job.twin
            assert twin is not None
            if not self.loop.study._storage.get_trial(twin._trial_id).state.is_finished():
                continue
            self.awaiting.remove(run)
            frozen = self.loop.after_twin(run.job)
            if frozen is None:
                self._start(run)
            else:
                run.heartbeat.__exit__(None, None, None)
                answered.append(frozen)
        return answered

    def _start(self, run: Running) -> None:
        loop = self.loop
        run.overrides = loop.overrides(run.job)
        run.started = time.monotonic()
        loop.progress.start(run.job.index, f"trial {run.number} {_fmt(run.job.params)}")
        self.inflight.append(run)
        self.runner.start(run)

    def _finish(self, run: Running, outcome: Outcome) -> FrozenTrial:
        self.inflight.remove(run)
        run.heartbeat.__exit__(None, None, None)
        self.loop.progress.ran.append(time.monotonic() - run.started)
        frozen = self.loop.tell(run.job, outcome)
        if outcome.interrupted:
            if self.runner.stop_when_interrupted:
                raise Interrupted(run.number)
            with self.loop.lock:  # a job lost elsewhere (preempted): its config runs again
                self.loop.requeue()
        return frozen

    # -- stopping ---------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _guard(self) -> Iterator[None]:
        """Whatever stops the loop, no trial of ours is left RUNNING and no job runs on."""
        try:
            yield
        except (KeyboardInterrupt, Interrupted) as exc:
            number = exc.trial_number if isinstance(exc, Interrupted) else None
            out = self.inflight + self.awaiting
            self._keep_ended(exc)
            self._stop_all("interrupted", "stopped by the user")
            with self.loop.lock:
                self.loop.requeue()
            raise Interrupted(number if number is not None else
                              (out[0].number if out else None)) from None
        except Exception as exc:
            self._stop_all("sweeper_error", f"{type(exc).__name__}: {exc}")
            raise
        finally:
            self.runner.close()

    def _keep_ended(self, exc: BaseException) -> None:
        """The trial whose result had ended when the stop came is told with it (Interrupted.ended)."""
        ended = getattr(exc, "ended", None)
        run = next((r for r in self.inflight if r.number == getattr(exc, "trial_number", None)), None)
        if ended is None or run is None:
            return
        try:
            self._finish(run, ended)
        except Exception as err:  # noqa: BLE001 - then it is marked interrupted like the rest
            log.warning("trial %d: its finished result could not be told: %s", run.number, err)

    def _stop_all(self, reason: str, message: str) -> None:
        if self.inflight:
            try:
                self.runner.cancel(message)
            except BaseException as exc:  # noqa: BLE001 - the trials are still marked below
                log.warning("stopping the jobs in flight failed: %s", exc)
        for run in self.inflight + self.awaiting:
            run.heartbeat.__exit__(None, None, None)
            self.loop.abandon(run.trial, reason, message)
        self.inflight.clear()
        self.awaiting.clear()
