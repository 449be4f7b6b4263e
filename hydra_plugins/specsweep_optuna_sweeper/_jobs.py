"""A :class:`~._dispatch.Runner` whose jobs run elsewhere: launcher=slurm (docs/cluster.md).

The backend's jobs class (``sweep.launch.BACKENDS[name].trials``, e.g.
:class:`launchers.slurm.SlurmJobs`) submits, watches and cancels; this adapter
turns each trial into one job and each ended job into an Outcome for the
dispatcher, which asks and tells exactly as it does for jobs in its own
process. What a job runs is the app's command line with the trial's override
lines in ``hydra.sweeper.pool.job`` (``_impl`` then runs that one Hydra job,
the same ``_execute`` as in-process, so ``<sweep_dir>/<N>/`` and its
``result.json``, the MLflow child under the sweep's parent run and the
job's trial number are what they are for any other trial).

An ended job means (``JobEnd.reason``):

* its own end: the trial's ``result.json`` (on the shared sweep dir) gives the
  outcome, as the job's return would have (``sweep.score.objective.trial_return``);
  no result at all is ``job_failed`` with the job log's last lines;
* ``time_limit``: FAIL ``time_limit`` (counted, not queued again: it would
  reach the limit again); the result keeps its finished cells (``interrupted``);
* ``preempted`` (cancelled by someone else, node down, preempted): FAIL
  ``preempted`` -- not counted, its config queued again -- up to the backend's
  ``max_requeue`` runs again of one config; lost once more it is ``job_lost``
  (counted, not run again);
* ``interrupted``: this controller cancelled it (Ctrl-C);
* ``oom``: SLURM's memory limit.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, Callable, Sequence

from omegaconf import OmegaConf

from ._dispatch import Running
from ._result import Outcome, failed, from_return

log = logging.getLogger(__name__)


def outcome_from_result(job_dir: Path, metrics: Sequence[str] | None,
                        n_objectives: int) -> tuple[Outcome | None, Any]:
    """What a finished trial's ``result.json`` means for Optuna (None: no finished result)."""
    from sweep.compose.settings import Objective
    from sweep.record.result import TrialResult
    from sweep.score.objective import trial_return

    path = job_dir / "result.json"
    try:
        doc = TrialResult.load(path)
    except Exception:  # noqa: BLE001 - absent or unreadable: the job left no result
        return None, None
    if doc.status == "running":
        return None, doc
    ret = trial_return(doc, Objective.from_mapping((doc.config or {}).get("objective")), str(path))
    return from_return(ret, list(metrics) if metrics else None, n_objectives), doc


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


class JobsRunner:
    """Each trial one job of ``jobs``; up to ``slots`` out at once (module docstring)."""

    stop_when_interrupted = False  # a job's "interrupted" is its cancel, not our Ctrl-C

    def __init__(self, jobs: Any, *, slots: int, sweep_dir: Path, argv: Callable[[Running], list[str]],
                 job_name: str, metrics: Sequence[str] | None, n_objectives: int) -> None:
        self.jobs = jobs
        self.slots = slots
        self.sweep_dir = sweep_dir
        self.argv = argv
        self.job_name = job_name
        self.metrics = metrics
        self.n_objectives = n_objectives
        self.cwd = Path(os.getcwd())
        self._out: dict[str, Running] = {}
        self._done: list[tuple[Running, Outcome]] = []
        self._last_poll = 0.0

    def start(self, run: Running) -> None:
        from launchers.slurm import SubmitError

        job_dir = self.sweep_dir / str(run.number)
        try:
            job_id = self.jobs.submit(f"{self.job_name}-{run.number}", self.argv(run), job_dir,
                                      self.cwd)
        except SubmitError as exc:
            log.error("trial %d: sbatch refused its job: %s", run.number, exc)
            self._done.append((run, failed("submit_failed", str(exc))))
            return
        run.info["job_id"] = job_id
        from sweep.io.atomic import now_iso

        run.info["submitted"] = now_iso()
        run.trial.set_user_attr("slurm_job_id", job_id)
        self._out[job_id] = run
        log.info("trial %d: SLURM job %s submitted (%s)", run.number, job_id, job_dir)

    def wait(self, timeout: float) -> list[tuple[Running, Outcome]]:
        import time

        deadline = time.monotonic() + timeout
        while not self._done and self._out:
            pause = self._last_poll + self.jobs.poll_s - time.monotonic()
            if pause > 0:
                if time.monotonic() + pause > deadline:
                    time.sleep(max(0.0, deadline - time.monotonic()))
                    break
                time.sleep(pause)
            self._last_poll = time.monotonic()
            for end in self.jobs.poll():
                run = self._out.pop(end.job_id, None)
                if run is not None:
                    self._done.append((run, self._outcome(run, end)))
            if time.monotonic() >= deadline:
                break
        done, self._done = self._done, []
        return done

    def _outcome(self, run: Running, end: Any) -> Outcome:
        job_dir = self.sweep_dir / str(run.number)
        attrs = {"slurm_job_id": end.job_id, "slurm_state": end.state, "job_dir": str(job_dir)}
        if end.node:
            attrs["slurm_node"] = end.node
        outcome, doc = outcome_from_result(job_dir, self.metrics, self.n_objectives)
        if doc is not None:
            attrs["result_path"] = str(job_dir / "result.json")
            if getattr(doc.mlflow, "run_id", None):
                attrs["mlflow_run_id"] = doc.mlflow.run_id
            attrs["status"] = doc.status
        cells = len(doc.cells) if doc is not None else 0
        if end.reason == "time_limit":
            if outcome is None:
                self._record_failure(run, job_dir, "time_limit", end.message, end.log_path)
            return failed("time_limit", f"{end.message}; the trial stopped with {cells} finished "
                          "cell(s) (result.json status interrupted); raise launcher.sbatch.time",
                          **attrs)
        if end.reason == "preempted":
            lost = int(run.trial.user_attrs.get("lost") or 0)
            if lost >= int(self.jobs.max_requeue):
                if outcome is None:
                    self._record_failure(run, job_dir, "job_lost", end.message, end.log_path)
                return failed("job_lost", f"{end.message}; its config was lost {lost + 1} times "
                              f"(launcher.max_requeue={self.jobs.max_requeue}): not run again",
                              **attrs)
            return failed("preempted", f"{end.message}; its config is queued again", **attrs)
        if end.reason in ("interrupted", "oom"):
            if end.reason == "oom" and outcome is None:
                self._record_failure(run, job_dir, "oom", end.message, end.log_path)
            return failed(str(end.reason), end.message, **attrs)
        if outcome is None:
            self._record_failure(run, job_dir, "job_failed", f"{end.message} without a finished result.json",
                                 end.log_path)
            return failed("job_failed", f"{end.message} without a finished result.json; the last "
                          f"lines of {end.log_path}:\n{_tail(end.log_path)}", **attrs)
        outcome.user_attrs.update({k: v for k, v in attrs.items() if k not in outcome.user_attrs
                                   or k.startswith("slurm_")})
        return outcome

    def _record_failure(self, run: Running, job_dir: Path, reason: str, message: str, log_path: Path) -> None:
        """A job that ended without a finished result leaves one, ``failed`` with the reason, as a trial
        that fails in this process does: the report, sync and the exit status (every trial failed: 1)
        then mean the same with and without SLURM. A result the trial began (``running``) keeps its cells."""
        from sweep.io.atomic import now_iso
        from sweep.record.result import Failure, TrialInfo, TrialResult

        path = job_dir / "result.json"
        try:
            doc = TrialResult.load(path)
        except (OSError, ValueError):
            doc = TrialResult(trial=TrialInfo(name=f"{self.job_name}-{run.number}", hardware="?", spec="?",
                                              job_dir=str(job_dir), sweep_dir=str(self.sweep_dir),
                                              job_num=run.number, overrides=list(run.overrides),
                                              started=str(run.info.get("submitted") or now_iso())))
        doc.status = "failed"
        doc.failure = Failure(reason=reason, message=message, log_tail=_tail(log_path))
        doc.trial.finished = now_iso()
        try:
            doc.write(path)
        except OSError as exc:  # the study is told either way; the file is what the report reads
            log.warning("trial %d: could not record its failure in %s (%s)", run.number, path, exc)

    def cancel(self, why: str) -> None:
        if self._out:
            log.warning("cancelling SLURM job(s) %s (%s); each trial is marked interrupted",
                        ", ".join(self._out), why)
        self.jobs.cancel()
        self._out.clear()

    def close(self) -> None:
        self.jobs.close()


def jobs_runner(config: Any, s: Any, sweep_dir: Path, name: str, *,
                probe_overrides: list[str]) -> JobsRunner | None:
    """The runner of a launcher whose trials run as jobs (None: this process runs them).

    Everything a job needs is checked here, before the study starts: the launcher's
    settings (the key table), no secret on the command line the job script would
    hold, and the scheduler's own verdict on the options (``sbatch --test-only``).
    """
    import json
    import sys

    from sweep.errors import ConfigError
    from sweep.launch import BACKENDS, load

    from ._pool_proc import base_command, worker_argv

    entry = BACKENDS.get(str(OmegaConf.select(config, "launcher.name") or ""))
    if entry is None or entry.trials is None:
        if s.n_jobs > 1:
            raise ConfigError("hydra.sweeper.n_jobs", f"{s.n_jobs}: this launcher runs one "
                              "trial at a time in this process; for parallel trials use "
                              "launcher=slurm or a host pool, launcher.hosts=[...] "
                              "(docs/parallel.md)")
        return None
    from sweep import secrets
    from sweep.compose.settings import launcher_settings

    # a ConfigError from here on reaches the command's boundary: one line, masked, exit 2
    settings = launcher_settings(OmegaConf.to_container(config.launcher, resolve=True))  # type: ignore[arg-type]
    jobs = load(entry.trials)(settings)
    base = base_command(jobs.settings.command)
    pool = s.pool
    port_key = (pool.get("key_map") or {}).get("server_port") if jobs.settings.free_port else None

    def argv(run: Running | None, number: int = 0, lines: list[str] | None = None) -> list[str]:
        if run is not None:
            number, lines = run.number, run.overrides
        from sweep.compose.hosts import hydra_value

        extra = [f"hydra.sweep.dir={hydra_value(str(sweep_dir))}",
                 f"hydra.sweeper.study_name={hydra_value(name)}",
                 "hydra.sweeper.pool.job=" + hydra_value(json.dumps(
                     {"trial": number, "overrides": lines or [], "port_key": port_key})),
                 *[str(o) for o in pool.get("worker_overrides") or []]]
        return worker_argv(base, sys.argv[1:], extra)

    probe = argv(None, 0, probe_overrides)
    found = secrets.collect_secrets(list(probe), environ={})
    if found:
        raise ConfigError("launcher", "a secret is on the command line; launcher=slurm writes "
                          "the command line into each job's script (and SLURM keeps it): "
                          "pass secrets through the environment instead (SPECSWEEP_API_KEY, "
                          "exported to the jobs)")
    from launchers.slurm import SubmitError

    try:
        jobs.check(probe, sweep_dir / ".slurm-check", Path.cwd())
    except SubmitError as exc:
        raise ConfigError("launcher.sbatch", f"SLURM refuses these job options: {exc}") from None
    return JobsRunner(jobs, slots=s.n_jobs, sweep_dir=sweep_dir, argv=argv,
                      job_name=jobs.settings.job_name, metrics=s.metrics,
                      n_objectives=len(s.directions))

